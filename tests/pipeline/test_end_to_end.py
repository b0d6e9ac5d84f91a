"""The measuring pipeline end to end on the CPU: Dask scheduling, the run folder's one writer,
faults injected (torn lines, cut writes, killed drivers and workers, SIGTERM), resume.

Runs `run_suite` and `python -m builder.regenerate` with the real exporter, compile stage and
judge on a local Dask cluster (cheap evaluations of `relu` at the small size). The tests that
start from a finished run and then tear, cut or resume it start from a copy of one run
measured once per module (`finished`: relu's gpu and tpu variants), or from a copy of it
without its tpu lines (`gpu_only`: one evaluation left to measure).
"""

import fcntl
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from pallasbench_dataset.evaluation.pipeline import cluster, suite
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.schema import ErrorType, Status
from pallasbench_dataset.tasks import get_task

from tests import pipeline_stages
from tests.paths import REPO

OPTIONS = EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1)
LIMITS = Limits(timeout_s=300, memory_bytes=8 << 30)
CLUSTER = suite.ClusterOptions(plan=cluster.WorkerPlan(gpus=(), cpu_workers=1), compile_budget_s=300)


def _items(*variants, tasks=("relu",)):
  return suite.plan([get_task(t) for t in tasks], variants, ["small"], OPTIONS)


def _run(run_dir, items, **kw):
  return suite.run_suite(items, run_dir, device="cpu", limits=LIMITS, git_commit="abc",
                         command="test", cluster_options=kw.pop("cluster_options", CLUSTER), **kw)


def _lines(path):
  return path.read_text().splitlines()


def _records(run_dir):
  return suite.read_records(run_dir)


def _manifest(run_dir):
  return json.loads((run_dir / suite.MANIFEST).read_text())


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
  """A fresh run of relu's gpu and tpu variants, measured once: tests read it or copy it."""
  run_dir = tmp_path_factory.mktemp("finished")
  _run(run_dir, _items("gpu", "tpu"))
  return run_dir


def _copy(run_dir, tmp_path):
  """The finished run as a folder of this test's own, to tear, cut or resume."""
  return pathlib.Path(shutil.copytree(run_dir, tmp_path / "run"))


@pytest.fixture
def gpu_only(finished, tmp_path):
  """A copy of the finished run whose tpu evaluation has no record and no artifacts line:
  a resume of both variants has that one to measure."""
  run_dir = _copy(finished, tmp_path)
  for name in (suite.RECORDS, suite.ARTIFACTS):
    lines = [line for line in _lines(run_dir / name) if json.loads(line)["variant"] == "gpu"]
    (run_dir / name).write_text("".join(line + "\n" for line in lines))
  return run_dir


def test_a_run_measures_every_item_through_the_three_stages(finished):
  records = _records(finished)
  assert sorted(r.variant for r in records) == ["gpu", "tpu"]
  for r in records:
    assert r.status is Status.PASS, r.reasons
    assert r.stages.export_s > 0 and r.stages.compile_s > 0 and r.stages.judge_s > 0
    assert r.stages.compile_cache_hit is True  # the judge loaded what the compile stage built
    assert r.run.command == "test" and r.run.run_id == finished.name and r.run.gpu_index is None
    assert r.eager_baseline_ms > 0 and r.speedup_eager == pytest.approx(
        r.eager_baseline_ms / r.runtime_ms)
  artifacts = [json.loads(line) for line in _lines(finished / suite.ARTIFACTS)]
  assert sorted(a["variant"] for a in artifacts) == ["gpu", "tpu"]
  manifest = _manifest(finished)
  assert manifest["finished_at"] and "interrupted_at" not in manifest
  assert manifest["pipeline"]["evaluations"] == 2
  assert manifest["pipeline"]["compile_cache_hits"] == 2
  assert [d["device"] for d in manifest["per_device"]] == ["cpu"]


def test_a_compile_over_its_budget_is_a_rejection_naming_the_stage(tmp_path):
  tight = suite.ClusterOptions(plan=CLUSTER.plan, compile_budget_s=0.01)
  _run(tmp_path, _items("gpu"), cluster_options=tight)
  (record,) = _records(tmp_path)
  # rejected, typed as a time limit's: the verdict cache never keeps it (verdicts.load_decided)
  assert record.status is Status.REJECTED and record.error_type is ErrorType.TIMEOUT
  assert record.reasons[0].startswith("compile stage:") and "0 s compile budget" in record.reasons[0]


def test_resume_measures_only_what_is_missing(gpu_only):
  tmp_path = gpu_only
  before = _lines(tmp_path / suite.RECORDS)
  _run(tmp_path, _items("gpu", "tpu"), resume=True)
  after = _lines(tmp_path / suite.RECORDS)
  assert after[0] == before[0]  # the finished evaluation is not measured again
  assert [json.loads(line)["variant"] for line in after] == ["gpu", "tpu"]
  assert _manifest(tmp_path)["resumes"][0]["resumed_with"] == 1


def test_a_torn_last_line_is_cut_and_remeasured_on_resume(gpu_only):
  tmp_path = gpu_only
  records = tmp_path / suite.RECORDS
  with records.open("a") as f:
    f.write('{"task": "relu", "variant": "tpu", "si')  # killed mid-write
  _run(tmp_path, _items("gpu", "tpu"), resume=True)
  rows = [json.loads(line) for line in _lines(records)]  # every line parses: nothing glued
  assert [(r["task"], r["variant"]) for r in rows] == [("relu", "gpu"), ("relu", "tpu")]
  assert all(json.loads(line) for line in _lines(tmp_path / suite.ARTIFACTS))
  manifest = _manifest(tmp_path)
  assert manifest["resumes"][0]["resumed_with"] == 1 and manifest["finished_at"]


def test_a_record_and_its_artifacts_are_one_unit(finished, tmp_path):
  """A write cut after the artifacts line (an orphan) or a record whose artifacts line was
  lost: resume drops the half and measures the evaluation again, one line each."""
  tmp_path = _copy(finished, tmp_path)
  records, artifacts = tmp_path / suite.RECORDS, tmp_path / suite.ARTIFACTS
  by_variant = {json.loads(line)["variant"]: line for line in _lines(artifacts)}
  rec_lines = _lines(records)
  keep = [line for line in rec_lines if json.loads(line)["variant"] == "gpu"]
  records.write_text(keep[0] + "\n")                        # tpu: artifacts only (an orphan)
  artifacts.write_text(by_variant["tpu"] + "\n")            # gpu: record only (artifacts lost)
  _run(tmp_path, _items("gpu", "tpu"), resume=True)
  rec = [json.loads(line) for line in _lines(records)]
  art = [json.loads(line) for line in _lines(artifacts)]
  assert sorted(r["variant"] for r in rec) == sorted(a["variant"] for a in art) == ["gpu", "tpu"]
  assert all(r["measured_at"] for r in rec) and keep[0] not in _lines(records)


def test_evaluations_killed_from_outside_are_retried_on_resume(finished, tmp_path):
  tmp_path = _copy(finished, tmp_path)
  records = tmp_path / suite.RECORDS
  rows = [json.loads(line) for line in _lines(records)]
  for row in rows:
    if row["variant"] == "tpu":  # as if its judge had been killed by someone
      row.update(status="error", error_type="crash", error="the judge process died with SIGKILL")
  records.write_text("".join(json.dumps(r) + "\n" for r in rows))
  _run(tmp_path, _items("gpu", "tpu"), resume=True)
  final = _records(tmp_path)
  assert sorted((r.variant, r.status) for r in final) == [("gpu", Status.PASS), ("tpu", Status.PASS)]
  assert len(_lines(tmp_path / suite.ARTIFACTS)) == 2


def test_a_second_writer_is_refused(tmp_path):
  with (tmp_path / suite.LOCK).open("w") as held:
    fcntl.flock(held, fcntl.LOCK_EX)
    with pytest.raises(FileExistsError, match="being written by another run"):
      _run(tmp_path, _items("gpu"))
  assert not (tmp_path / suite.RECORDS).exists()


def test_a_fresh_run_refuses_a_folder_with_records(gpu_only):
  tmp_path = gpu_only
  with pytest.raises(FileExistsError, match="pass --resume"):
    _run(tmp_path, _items("gpu", "tpu"))
  assert len(_lines(tmp_path / suite.RECORDS)) == 1


def test_resume_refuses_a_missing_folder_or_manifest(gpu_only, tmp_path):
  with pytest.raises(FileNotFoundError, match="does not exist"):
    _run(tmp_path / "nowhere", _items("gpu"), resume=True)
  folder = gpu_only
  (folder / suite.MANIFEST).unlink()
  with pytest.raises(FileNotFoundError, match="no manifest.json"):
    _run(folder, _items("gpu", "tpu"), resume=True)
  assert len(_lines(folder / suite.RECORDS)) == 1


@pytest.fixture
def faults(tmp_path, monkeypatch):
  """Stages that misbehave as FAULT says; the workers inherit the variables."""
  monkeypatch.setattr(suite, "stages", _FaultyStages())
  monkeypatch.setenv("FAULT_DIR", str(tmp_path))
  return monkeypatch


class _FaultyStages:
  def __getattr__(self, name):
    return getattr(pipeline_stages, name, None) or getattr(suite.cluster.stages, name)


def test_a_worker_lost_once_is_retried(tmp_path, faults):
  faults.setenv("FAULT", "die_once")
  _run(tmp_path / "run", _items("gpu"))
  (record,) = _records(tmp_path / "run")
  assert record.status is Status.PASS
  assert (tmp_path / "died-gpu").exists()  # it did die once


def test_a_worker_lost_twice_is_an_error_record_and_the_others_go_on(tmp_path, faults):
  faults.setenv("FAULT", "die_always")
  _run(tmp_path / "run", _items("gpu", "tpu"))
  by_variant = {r.variant: r for r in _records(tmp_path / "run")}
  assert by_variant["gpu"].status is Status.PASS
  lost = by_variant["tpu"]
  assert lost.status is Status.ERROR and lost.error_type is ErrorType.CRASH
  assert "lost twice" in lost.error
  assert len(_lines(tmp_path / "run" / suite.ARTIFACTS)) == 2


def test_stage_processes_slow_to_close_are_closed_before_the_nanny_kills(tmp_path, faults, capfd):
  """A GPU judge can take longer to end than the 4 s a nanny gives its worker: the driver
  closes the stage processes first, so no worker is killed (and no "still alive" is logged)."""
  faults.setenv("FAULT", "slow_close")
  _run(tmp_path / "run", _items("gpu"))
  assert [r.status for r in _records(tmp_path / "run")] == [Status.PASS]
  err = capfd.readouterr().err
  assert "still alive" not in err and "killing" not in err


def test_a_stage_that_raises_is_a_harness_record(tmp_path, faults):
  faults.setenv("FAULT", "raise")
  _run(tmp_path / "run", _items("gpu", "tpu"))
  by_variant = {r.variant: r for r in _records(tmp_path / "run")}
  assert by_variant["gpu"].status is Status.PASS
  assert by_variant["tpu"].error_type is ErrorType.HARNESS
  assert "RuntimeError: a bug in a stage" in by_variant["tpu"].error


# ---------------------------------------------------------------------------------------------
# The CLI as a process: signals and a killed driver.

def _descendants(pid: int) -> set[int]:
  children: dict[int, list[int]] = {}
  for name in os.listdir("/proc"):
    if name.isdigit():
      try:
        stat = pathlib.Path(f"/proc/{name}/stat").read_text()
      except OSError:
        continue
      ppid = int(stat.rsplit(")", 1)[1].split()[1])
      children.setdefault(ppid, []).append(int(name))
  found, todo = set(), [pid]
  while todo:
    for child in children.get(todo.pop(), ()):
      found.add(child)
      todo.append(child)
  return found


def _alive(pids) -> set[int]:
  out = set()
  for pid in pids:
    try:
      state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
      continue
    if state != "Z":
      out.add(pid)
  return out


def _start_regenerate(run_dir, *tasks):
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  return subprocess.Popen(
      [sys.executable, "-m", "builder.regenerate", "--device", "cpu", "--measure-only",
       "--tasks", *tasks, "--variants", "gpu", "--cpu-workers", "1", "--results", str(run_dir)],
      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_stage_processes(proc, timeout_s=120) -> set[int]:
  """Waits until a judge process runs under the driver; returns the driver's descendants."""
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    below = _descendants(proc.pid)
    cmdlines = []
    for pid in below:
      try:
        cmdlines.append(pathlib.Path(f"/proc/{pid}/cmdline").read_bytes())
      except OSError:
        pass
    if any(b"evaluation.judge.process" in c for c in cmdlines):
      return below
    time.sleep(0.2)
  proc.kill()
  pytest.fail(f"no judge process started: {proc.communicate()[0][-2000:]}")


def _gone(pids, timeout_s=20) -> set[int]:
  deadline = time.monotonic() + timeout_s
  while _alive(pids) and time.monotonic() < deadline:
    time.sleep(0.2)
  left = _alive(pids)
  for pid in left:
    os.kill(pid, signal.SIGKILL)
  return left


# The run the SIGTERM stops at its first judge: three evaluations on one judge worker, so the
# resume has some left to measure.
SIGTERM_TASKS = ("relu", "sigmoid", "tanh")


def test_sigterm_stops_the_run_cleanly_and_it_resumes(tmp_path):
  run_dir = tmp_path / "run"
  proc = _start_regenerate(run_dir, *SIGTERM_TASKS)
  below = _wait_for_stage_processes(proc)
  proc.send_signal(signal.SIGTERM)
  output, _ = proc.communicate(timeout=60)
  assert proc.returncode == 130, output
  assert "interrupted" in output and "--resume" in output
  assert not _gone(below), "processes of the run outlived it"
  manifest = _manifest(run_dir)
  assert manifest["finished_at"] is None and manifest["interrupted_at"]
  done = len(_records(run_dir))
  assert done < len(SIGTERM_TASKS)
  resumed = subprocess.run(
      [sys.executable, "-m", "builder.regenerate", "--device", "cpu", "--measure-only", "--tasks",
       *SIGTERM_TASKS, "--variants", "gpu", "--cpu-workers", "1", "--results", str(run_dir),
       "--resume"],
      cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
      timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert sorted(r.task for r in _records(run_dir)) == sorted(SIGTERM_TASKS)
  assert _manifest(run_dir)["finished_at"]


def test_a_killed_driver_leaves_no_process_behind(tmp_path):
  proc = _start_regenerate(tmp_path / "run", "relu", "sigmoid", "tanh")
  below = _wait_for_stage_processes(proc)
  proc.kill()
  proc.communicate()
  assert below and not _gone(below), "workers, judges or exporters outlived the driver"
