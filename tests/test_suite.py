"""The measuring pipeline's run folder: one writer, torn lines repaired, nothing resumed blind.

Runs `run_suite` on the CPU with the real exporter and judge (one cheap evaluation each).
"""

import fcntl
import json

import pytest

from pallasbench_dataset.evaluation import suite
from pallasbench_dataset.evaluation.judge import EvalOptions
from pallasbench_dataset.evaluation.judge_process import Limits
from pallasbench_dataset.tasks import get_task

OPTIONS = EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1)
LIMITS = Limits(timeout_s=300, memory_bytes=8 << 30)


def _items(*variants):
  return suite.plan([get_task("relu")], variants, ["small"], OPTIONS)


def _run(run_dir, items, **kw):
  return suite.run_suite(items, run_dir, device="cpu", limits=LIMITS, git_commit="abc",
                         command="test", **kw)


def _lines(path):
  return path.read_text().splitlines()


def test_a_torn_last_line_is_cut_and_remeasured_on_resume(tmp_path):
  _run(tmp_path, _items("gpu"))
  records = tmp_path / suite.RECORDS
  with records.open("a") as f:
    f.write('{"task": "relu", "variant": "tpu", "si')  # killed mid-write
  _run(tmp_path, _items("gpu", "tpu"), resume=True)
  rows = [json.loads(line) for line in _lines(records)]  # every line parses: nothing glued
  assert [(r["task"], r["variant"]) for r in rows] == [("relu", "gpu"), ("relu", "tpu")]
  assert all(json.loads(line) for line in _lines(tmp_path / suite.ARTIFACTS))
  manifest = json.loads((tmp_path / suite.MANIFEST).read_text())
  assert manifest["resumes"][0]["resumed_with"] == 1 and manifest["finished_at"]


def test_a_second_writer_is_refused(tmp_path):
  with (tmp_path / suite.LOCK).open("w") as held:
    fcntl.flock(held, fcntl.LOCK_EX)
    with pytest.raises(FileExistsError, match="being written by another run"):
      _run(tmp_path, _items("gpu"))
  assert not (tmp_path / suite.RECORDS).exists()


def test_resume_refuses_a_missing_folder_or_manifest(tmp_path):
  with pytest.raises(FileNotFoundError, match="does not exist"):
    _run(tmp_path / "nowhere", _items("gpu"), resume=True)
  folder = tmp_path / "run"
  _run(folder, _items("gpu"))
  (folder / suite.MANIFEST).unlink()
  with pytest.raises(FileNotFoundError, match="no manifest.json"):
    _run(folder, _items("gpu", "tpu"), resume=True)
  assert len(_lines(folder / suite.RECORDS)) == 1
