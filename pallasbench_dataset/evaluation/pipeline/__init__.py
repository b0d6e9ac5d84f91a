"""The pipeline: schedules evaluations (the sandboxed export, the compile stage, the judge) on
Dask, keeps the run folder and the verdict cache, and reports. Trusted; it starts the exporter
as a program and never imports it.
"""
