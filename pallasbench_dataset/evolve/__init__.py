"""Evolutionary kernel search with OpenEvolve and ShinkaEvolve: what the scaffolds run.

`python -m pallasbench_dataset.scaffold` writes the scaffolds. `blocks` marks the part of a
kernel a search may rewrite, `prompt` describes the task to the LLM, `scoring` turns the sealed
judge's record into a score and feedback, and one adapter per framework (`openevolve_adapter`,
`shinka_adapter`) holds that framework's contract: the files it expects and the entry point its
evaluator calls. Only the judge's sandboxed exporter ever imports a candidate: the evaluators
pass its path.
"""
