"""Adversarial control, relu: a record whose text is not text (red team round 15).

Attack: raise, at import, an exception whose message holds a lone surrogate. The source is
plain ASCII (the escape `\\ud800`), so the reward's `read_kernel`, which refuses a kernel that
holds a lone surrogate, accepts it; the surrogate exists only once the exporter runs the file.
The exporter's answer is JSON with Python's default `ensure_ascii`: the message crosses as the
escape, and `protocol.decode`'s `json.loads` makes it a lone surrogate again, in the record's
`error` and `reasons`.

What it breaks (measured): nothing that writes the record as JSON with escapes (records.jsonl,
the verdict cache, `evaluate --json`), but every consumer that encodes the text as UTF-8:
- the dataset build: a population run holding this record cannot be built, for any candidate
  (pyarrow refuses the string: tests/builder/test_candidate_text.py);
- `python -m pallasbench_dataset.evaluate` without --json: its summary cannot be printed, so
  the evaluator dies with a traceback (exit status 1, as for a failing kernel, without its
  verdict);
- a multi-turn trainer that tokenizes `Feedback.text()` for the next turn (reasoned).

Expected: error (load_error): the verdict is right; the record's text must be text (a fix
replaces what cannot be encoded where the exporter's answer is decoded).
"""
raise ValueError("not text: \ud800 (a lone surrogate)")
