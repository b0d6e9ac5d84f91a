"""The trusted room: the judge, which never imports candidate code.

It deserializes the exporter's artifacts, analyses the program XLA compiles for them, runs and
compares them against the references, times them against XLA and writes the verdict. Nothing
here imports from `exporter/`.
"""
