"""Red team round 15: a candidate's text that is not text breaks the build for every candidate.

A candidate controls strings that the judge copies into its record: the message of an exception
it raises at import or while traced (`error`, `reasons`), what a declared `config_for` returns,
a pallas_call's name. The exporter writes its answer as JSON with Python's default
`ensure_ascii`, so a lone surrogate (`raise ValueError("\\ud800")`, plain ASCII in the source,
which `reward.read_kernel` therefore accepts) crosses as the escape `\\ud800`, and
`protocol.decode`'s `json.loads` turns it back into a lone surrogate in the record. Everything
that writes the record as JSON with escapes goes on working (records.jsonl, the verdict cache),
so nothing fails until a consumer encodes the text as UTF-8: the builder's Parquet (pyarrow
refuses it), its JSON (`ensure_ascii=False`), the evaluator's printed summary, a trainer's
tokenizer reading `Feedback.text()`.

Measured through the judge (`evaluate("relu", source=...)` of a file `raise ValueError("bad
\\ud800 here")`): `error` (load_error), the error holding '\\ud800', which `.encode("utf-8")`
refuses. Here that record, as a population run holds it, goes to the build.
"""

import dataclasses

import pyarrow.parquet as pq

from builder import build
from pallasbench_dataset.schema import ErrorType, Status

from tests import runfixtures as rf
from tests.builder.test_pieces import (  # noqa: F401  pylint: disable=unused-import
    _candidate, _candidate_record, _population_run, trees)

# The record's error as the judge wrote it for that file (the surrogate is one character).
MEASURED = ("importing <kernel source> raised ValueError: bad \ud800 here\nraised in the kernel "
            "at <kernel source>:1 in <module>: raise ValueError(\"bad \\ud800 here\")")


def test_one_candidate_s_error_text_does_not_break_the_build(trees, tmp_path):
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  honest, hostile = _candidate("honest"), _candidate("hostile")
  failed = dataclasses.replace(
      _candidate_record(trees, hostile), status=Status.ERROR, correct=False, robust=False,
      error_type=ErrorType.LOAD, error=MEASURED, reasons=(MEASURED.splitlines()[0],),
      speedup=None, runtime_ms=None)
  pop = _population_run(tmp_path / "pop", trees, [honest, hostile],
                        [_candidate_record(trees, honest), failed])
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees, candidate_runs=[pop],
                                repo_id="o/pb")
  table = pq.read_table(summary.out_dir / "candidates" / "train-00000-of-00001.parquet")
  assert [r["candidate"] for r in table.to_pylist()] == ["relu/honest", "relu/hostile"]
