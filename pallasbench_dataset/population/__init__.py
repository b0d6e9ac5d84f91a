"""Populations: many candidate kernels, evaluated on the suite's pipeline.

    python -m pallasbench_dataset.population generate --out pop --count 500
    python -m pallasbench_dataset.population evaluate --candidates pop/candidates.jsonl --out runs/pop

`candidates` reads a population (a JSON Lines file or a folder of `<task>/<name>.py`),
`generate` makes one from the suite's fixed kernels (tuning, broken and cheating
mutations), `run` evaluates one into a run folder through `evaluation.suite` with the
verdict cache, and `__main__` is the command line.
"""
