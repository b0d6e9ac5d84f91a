"""Two behaviours of the pipeline that a plausible one-line edit could break with every other test
green: one writer per run folder, and twin evaluations that differ in size measured apart."""

import types

import pytest

from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.pipeline import suite, verdicts
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem
from pallasbench_dataset.kernels import sha256
from pallasbench_dataset.schema import Artifacts

from tests import runfixtures as rf

OPTIONS = EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1)


def test_a_run_folder_has_one_writer_at_a_time(tmp_path):
  """While one run holds the folder, a second is refused (a shared lock would let both append
  to one records.jsonl); once the first ends, the folder is free again."""
  with suite._single_writer(tmp_path):  # pylint: disable=protected-access
    with pytest.raises(FileExistsError, match="being written by another run"):
      with suite._single_writer(tmp_path):  # pylint: disable=protected-access
        pass
  with suite._single_writer(tmp_path):  # pylint: disable=protected-access
    pass


def _item(size: str) -> WorkItem:
  return WorkItem(task="relu", variant="candidate", size=size, source="the same source",
                  filename="c.py", options=OPTIONS, candidate=f"relu/at-{size}")


def _measured(item: WorkItem):
  record = rf.record(types.SimpleNamespace(), "relu", "candidate", item.size,
                     kernel_sha256=sha256(item.source), candidate=item.candidate)
  return item, record, Artifacts(task="relu", variant="candidate", size=item.size, jaxpr="j",
                                 stablehlo=None, triton_ir=None, ptx=None,
                                 candidate=item.candidate)


def test_twin_evaluations_at_two_sizes_are_each_measured(tmp_path):
  """One kernel source at two sizes is two measurements: neither size may get the other's
  record."""
  small, medium = _item("small"), _item("medium")
  measured = []

  def measure(items):
    measured.extend(item.size for item in items)
    return [_measured(item) for item in items]
  out = list(verdicts.evaluate([small, medium], verdicts.VerdictCache(tmp_path), None, measure))
  assert sorted(measured) == ["medium", "small"]
  assert sorted((r.candidate, r.size, r.cached) for r, _ in out) == [
      ("relu/at-medium", "medium", False), ("relu/at-small", "small", False)]
  assert sorted((a.candidate, a.size) for _, a in out) == [
      ("relu/at-medium", "medium"), ("relu/at-small", "small")]
