"""Red team round 16, finding 2: a passing candidate's published `chosen` answer is not the text
the judge judged (class 17, the published text).

`builder.training.fenced` wraps a source in a fixed three-backtick fence. A population
candidate's source is the candidate's own text, and a line in it that starts with ``` (in a
docstring or a string: Python does not care) closes that fence early. The project's reader of
answers, `reward.extract_kernel` (the last closed python block: the same rule a trainer's
reward applies to a model's answer), then reads a text of the candidate's choosing, and so does
any Markdown renderer of the row. tests/controls/adv_fence_in_docstring_relu.py passes the
judge (measured: `pass`); its fenced form reads back as a plain `return x` whose own verdict is
`rejected` ("no Pallas kernel in the exported module"), published as the pair's passing, faster
answer. Closed (session 32): `fenced` uses a fence longer than any fence-like line of the
source.
"""

import dataclasses

import pytest

from builder import build, training
from pallasbench_dataset.population.candidates import Candidate
from pallasbench_dataset.reward import extract_kernel
from pallasbench_dataset.schema import Status

from tests import runfixtures as rf
from tests.builder.test_pieces import (  # noqa: F401  pylint: disable=unused-import
    _candidate, _candidate_record, _population_run, trees)
from tests.paths import CONTROLS

SOURCE = (CONTROLS / "adv_fence_in_docstring_relu.py").read_text()


def test_a_fenced_source_reads_back_as_itself():
  assert extract_kernel(training.fenced(SOURCE)) == SOURCE.rstrip() + "\n"


def test_a_published_chosen_answer_is_the_source_the_judge_passed(trees, tmp_path):
  import pyarrow.parquet as pq
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  fast = Candidate(id="relu/fenced", task="relu", source=SOURCE, kind="tuning")
  slow = _candidate("broken", kind="broken")
  failed = dataclasses.replace(_candidate_record(trees, slow), status=Status.INCORRECT,
                               correct=False, speedup=None, runtime_ms=None)
  pop = _population_run(tmp_path / "pop", trees, [fast, slow],
                        [_candidate_record(trees, fast), failed])
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees,
                                candidate_runs=[pop], repo_id="o/pb")
  rows = [r for split in ("train", "test")
          for path in sorted((summary.out_dir / "preference").glob(f"{split}-*.parquet"))
          for r in pq.read_table(path).to_pylist() if r["pair_kind"] == "population"]
  assert rows, "the build made no population pair"
  for row in rows:
    assert extract_kernel(row["chosen"][-1]["content"]) == SOURCE.rstrip() + "\n"


@pytest.mark.parametrize("source", [
    "x = 1\n```\ny = 2\n",                          # a bare fence line
    '"""\n````python\nreturn x\n````\n"""\n',       # a longer fence, tagged
    "s = '''\n    ```\n'''\n",                      # an indented fence
    "doc = '''\n~~~\n```\n~~~~\n'''\n",             # tildes beside backticks
    "a = '`````' + '``'\n```` \n",                  # a run inside a line, then a fence and a space
], ids=["bare", "longer_tagged", "indented", "tildes", "inline_run"])
def test_every_fenced_source_reads_back_as_itself(source):
  """Class 17, the published text: whatever fence-like lines a source holds, the answer the
  builder publishes for it reads back (reward.extract_kernel, a trainer's rule) as the source."""
  assert extract_kernel(training.fenced(source)) == source.rstrip() + "\n"
