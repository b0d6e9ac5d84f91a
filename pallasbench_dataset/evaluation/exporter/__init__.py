"""The untrusted room: the only code that runs in the process that imports candidate kernels.

Nothing here is believed by the judge: what the exporter writes is the candidate's word. The
trusted rooms (`judge/`, `pipeline/`) never import this package; they start its program
(`python -m pallasbench_dataset.evaluation.exporter.program`) inside the sandbox and read back
bytes (see `protocol.py`).
"""
