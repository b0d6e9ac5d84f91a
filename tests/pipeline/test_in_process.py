"""The pipeline's pieces without processes: the cluster plan, the stages' bookkeeping, the run
folder's reconciliation and manifest, and the scheduler and the whole run on an in-process Dask
cluster (worker threads) with stand-in stages. Fast (about 2 s), so that mutation testing can
use them (`tests/pipeline/test_end_to_end.py` runs the real thing, with processes)."""

import dataclasses
import fcntl
import functools
import io
import json
import logging
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from multiprocessing.connection import Connection

import dask
import distributed
import pytest

from pallasbench_dataset import autotune
from pallasbench_dataset.evaluation import protocol
from pallasbench_dataset.evaluation.judge import budgets, environment
from pallasbench_dataset.evaluation.pipeline import cluster, driver, run_options, stages, suite, verdicts
from pallasbench_dataset.evaluation.judge.ceilings import Ceilings
from pallasbench_dataset.evaluation.judge.core import JUDGE_VERSION, Precompiled
from pallasbench_dataset.evaluation.judge.process import JudgeConfig, JudgeWorker, Limits
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.population import run as pop_run
from pallasbench_dataset.population.candidates import (
    CANDIDATES, Candidate, PopulationError, to_jsonl)
from pallasbench_dataset.schema import (
    Artifacts, CompileProfile, ErrorType, RunIdentity, RunInfo, StageTimes, Status, to_json_dict)

from tests import runfixtures

# ---------------------------------------------------------------------------------------------
# cluster


@pytest.mark.parametrize("device, gpus, cpu_workers, cores, listed, want", [
    ("cpu", None, None, 2, 4, ((), 1)),          # a CPU host: one judge, the other core
    ("cpu", None, None, 64, 0, ((), 16)),         # at most 16 CPU workers
    ("gpu", None, None, 32, 2, ((0, 1), 16)),     # every GPU the driver lists
    ("gpu", 1, 3, 32, 2, ((0,), 3)),              # what the user asked for
    ("gpu", None, None, 8, 0, ((0,), 7)),         # a GPU host whose list is unreadable: one
    ("gpu", None, None, 1, 1, ((0,), 1)),         # never fewer than one CPU worker
])
def test_default_plan(monkeypatch, device, gpus, cpu_workers, cores, listed, want):
  monkeypatch.setattr(cluster.os, "cpu_count", lambda: cores)
  monkeypatch.setattr(cluster, "gpu_count", lambda: listed)
  plan = cluster.default_plan(device, gpus, cpu_workers)
  assert (plan.gpus, plan.cpu_workers) == want


def test_gpu_count_reads_the_drivers_list(tmp_path, monkeypatch):
  for name in ("0000:01:00.0", "0000:02:00.0", "0000:03:00.0"):
    (tmp_path / name).mkdir()
  monkeypatch.setattr(cluster, "NVIDIA_GPUS", tmp_path)
  assert cluster.gpu_count() == 3
  monkeypatch.setattr(cluster, "NVIDIA_GPUS", tmp_path / "absent")
  assert cluster.gpu_count() == 0


def test_worker_specs_pin_judges_and_spread_compilers():
  specs = cluster.worker_specs(cluster.WorkerPlan(gpus=(0, 1), cpu_workers=3), "/scratch")
  assert list(specs) == ["judge-gpu0", "judge-gpu1", "cpu-0", "cpu-1", "cpu-2"]
  options = {name: spec["options"] for name, spec in specs.items()}
  assert [o["env"] for o in options.values()] == [
      {"CUDA_VISIBLE_DEVICES": v} for v in ("0", "1", "0", "1", "0")]
  assert [o["resources"] for o in options.values()] == (
      [{stages.GPU_RESOURCE: 1}] * 2 + [{stages.CPU_RESOURCE: 1}] * 3)
  for name, o in options.items():
    assert (o["name"], o["nthreads"], o["host"], o["memory_limit"], o["dashboard"],
            o["local_directory"]) == (name, 1, "127.0.0.1", 0, False, "/scratch")
  assert all(spec["cls"] is cluster.NannyProgram for spec in specs.values())  # its own program


def test_worker_specs_on_a_cpu_host():
  specs = cluster.worker_specs(cluster.WorkerPlan(gpus=(), cpu_workers=1), "/s")
  assert list(specs) == ["judge-cpu", "cpu-0"]
  assert [s["options"]["name"] for s in specs.values()] == ["judge-cpu", "cpu-0"]
  assert [s["options"]["env"] for s in specs.values()] == [{}, {}]


def _client(*resources):
  workers = {f"w{i}": {"resources": r} for i, r in enumerate(resources)}
  return types.SimpleNamespace(scheduler_info=lambda: {"workers": workers})


def test_an_existing_cluster_must_declare_both_resources():
  cluster._check_resources(_client({"judge": 1}, {"cpu": 1}), "tcp://h:1")  # pylint: disable=protected-access
  with pytest.raises(RuntimeError, match=r"tcp://h:1 has no worker with the resource\(s\) \['cpu'\]"):
    cluster._check_resources(_client({"judge": 1}, None), "tcp://h:1")  # pylint: disable=protected-access
  with pytest.raises(RuntimeError, match=r"\['cpu', 'judge'\]"):
    cluster._check_resources(_client(), "tcp://h:1")  # pylint: disable=protected-access


def test_judge_slots_count_judge_workers():
  assert suite._judge_slots(_client({"judge": 1}, {"cpu": 1}, {"judge": 1})) == 2  # pylint: disable=protected-access
  assert suite._judge_slots(_client({"cpu": 1})) == 1  # pylint: disable=protected-access

# ---------------------------------------------------------------------------------------------
# stages


ITEM = driver.WorkItem(task="relu", variant="gpu", size="medium", source="src", filename="k.py")


def _report(sizes, load_error=None):
  entries = tuple(protocol.SizeExport(size=size, artifacts=artifacts, errors={}, stage=None,
                                      trace_s=None, lower_s=None)
                  for size, artifacts in sizes.items())
  return protocol.ExportReport(exports=entries, load_error=load_error, jaxpr=None, input_writes=(),
                               pallas_calls=(), triton_ir=(), lowers_tpu=None, tpu_error=None)


def _outcome(report=None, wall_s=1.5):
  return protocol.ExportOutcome(report=report, failure=None, message=None, output="",
                                layers=(), wall_s=wall_s)


def test_compile_sizes_are_the_evaluated_and_edge_artifacts_of_the_platform():
  report = _report({"medium": {"cuda": b"m", "cpu": b"c"}, "edge": {"cuda": b"e"}})
  assert list(stages._compile_sizes(ITEM, _outcome(report), "cuda")) == [  # pylint: disable=protected-access
      ("medium", b"m"), ("edge", b"e")]
  assert list(stages._compile_sizes(ITEM, _outcome(report), "cpu")) == [("medium", b"c")]  # pylint: disable=protected-access
  no_edge = dataclasses.replace(ITEM, options=dataclasses.replace(ITEM.options, check_edge=False))
  assert list(stages._compile_sizes(no_edge, _outcome(report), "cuda")) == [("medium", b"m")]  # pylint: disable=protected-access
  assert list(stages._compile_sizes(ITEM, _outcome(None), "cuda")) == []  # pylint: disable=protected-access
  broken = _report({"medium": {"cuda": b"m"}}, load_error="SyntaxError")
  assert list(stages._compile_sizes(ITEM, _outcome(broken), "cuda")) == []  # pylint: disable=protected-access


@pytest.mark.parametrize("visible, index", [("1", 1), ("0", 0), ("", None), ("0,1", None)])
def test_gpu_index_of_the_worker(monkeypatch, visible, index):
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
  assert stages._gpu_index() == index  # pylint: disable=protected-access


class _FakeProcess:
  """A compiler or judge process: answers from a list, records what it was sent; names the
  run its config tells it with its ceilings, as a judge does."""

  def __init__(self, config, answers):
    self.config, self.answers, self.sent, self.closed = config, list(answers), [], False
    self.dump_folder = None
    self.environment = runfixtures.ENV
    self.ceilings = {"copy_gbps": 4000.0, "read_gbps": 4500.0, "matmul_tflops": 400.0,
                     "bandwidth_gbps": 4500.0, "method": "cupti"}
    measured = Ceilings(copy_gbps=4000.0, read_gbps=4500.0, matmul_tflops=400.0, method="cupti")
    self.run_info = measured.run_info(config.run) if config.run else None

  def alive(self):
    return not self.closed

  def run(self, item, limits):
    self.sent.append((item, limits))
    return self.answers.pop(0)

  def close(self):
    self.closed = True


@pytest.fixture
def processes(monkeypatch):
  """stages' process table, emptied, with fake processes answering `answers` in turn."""
  started = []
  answers = []
  monkeypatch.setattr(stages, "_PROCESSES", {})
  monkeypatch.setattr(stages, "_CEILINGS", {})

  def start(config):
    started.append(_FakeProcess(config, answers))
    return started[-1]
  monkeypatch.setattr(stages, "JudgeWorker", start)
  return types.SimpleNamespace(started=started, answers=answers)


SETTINGS = stages.RunSettings(
    device="gpu", limits=Limits(timeout_s=300, memory_bytes=1 << 30), compile_budget_s=60,
    judge=JudgeConfig(device="gpu", git_commit="c0ffee", dump_dir=None), command="regen",
    run_id="run-1")


def test_compile_stage_notes_each_artifact(processes):
  report = _report({"medium": {"cuda": b"m"}, "edge": {"cuda": b"e"}})
  processes.answers += [("result", Precompiled(outcome="compiled", compile_s=2.0)),
                        ("timeout", "no answer")]
  notes = stages.compile_stage(ITEM, _outcome(report), SETTINGS)
  assert notes["medium"].outcome == "compiled" and notes["medium"].compile_s == 2.0
  assert notes["medium"].wall_s >= 0
  assert notes["edge"].outcome == "timeout"
  assert notes["edge"].message == ("the compile did not finish within the 60 s compile budget; "
                                   "it was killed")  # no dump folder to say where it hung
  (compiler,) = processes.started
  assert compiler.config.role == "compiler" and compiler.closed  # killed with its compile
  assert [(i.size, i.blob, lim.timeout_s) for i, lim in compiler.sent] == [
      ("medium", b"m", 60), ("edge", b"e", 60)]
  assert stages._PROCESSES == {}  # pylint: disable=protected-access


def test_a_compiler_that_died_leaves_the_compile_to_the_judge(processes):
  processes.answers += [("crash", "the judge process died with SIGSEGV")]
  notes = stages.compile_stage(ITEM, _outcome(_report({"medium": {"cuda": b"m"}})), SETTINGS)
  assert notes["medium"].outcome == "skipped"
  assert notes["medium"].message == "the judge process died with SIGSEGV"


def test_processes_are_kept_while_alive_and_judges_reuse_the_first_ceilings(processes,
                                                                           monkeypatch):
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
  first = stages._process(stages.JUDGE, SETTINGS)  # pylint: disable=protected-access
  assert stages._process(stages.JUDGE, SETTINGS) is first  # pylint: disable=protected-access
  assert first.config.role == "judge" and first.config.ceilings is None
  assert first.config.run == RunIdentity(command="regen", run_id="run-1", gpu_index=1)
  first.closed = True  # died between tasks
  second = stages._process(stages.JUDGE, SETTINGS)  # pylint: disable=protected-access
  assert second is not first and second.config.ceilings == first.ceilings
  assert second.config.run == first.config.run
  compiler = stages._process(stages.COMPILE, SETTINGS)  # pylint: disable=protected-access
  assert compiler.config.role == "compiler" and compiler.config.ceilings is None
  assert compiler.config.run is None  # a compiler builds no record
  stages.shutdown()
  assert second.closed and compiler.closed and stages._PROCESSES == {}  # pylint: disable=protected-access


def _record(**overrides):
  trees = types.SimpleNamespace(source=lambda v, t: "x")
  return runfixtures.record(trees, "relu", kernel_sha256="0" * 64, **overrides)


def test_judge_stage_keeps_the_judges_record_whole_and_a_healthy_judge(processes, monkeypatch):
  """The judge names the run on the record it builds (the stage told it the run when it
  started it): the stage passes the record on as it came, stamping nothing."""
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
  artifacts = driver.empty_artifacts(ITEM)
  judged = _record(run=runfixtures.run_info(gpu_index=1, run_id="run-1"))
  processes.answers += [("result", (judged, artifacts))]
  record, got = stages.judge_stage(ITEM, _outcome(), {}, SETTINGS)
  assert got == artifacts and record == judged
  (judge,) = processes.started
  assert judge.config.run == RunIdentity(command="regen", run_id="run-1", gpu_index=1)
  assert not judge.closed and judge.sent[0][0].precompiled == {}


def test_the_record_of_a_judge_that_died_names_the_run_as_the_judge_does(processes,
                                                                          monkeypatch):
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
  processes.answers += [("crash", "the judge process died with SIGSEGV")]
  record, _ = stages.judge_stage(ITEM, _outcome(), {}, SETTINGS)
  assert record.run == RunInfo(command="regen", run_id="run-1", gpu_index=1,
                               ceiling_copy_gbps=4000.0, ceiling_read_gbps=4500.0,
                               ceiling_matmul_tflops=400.0, ceiling_method="cupti")
  assert record.run == processes.started[0].run_info


@pytest.mark.parametrize("status, error_type, compiled, retired", [
    (Status.ERROR, ErrorType.RUNTIME, True, True), (Status.ERROR, ErrorType.OUT_OF_MEMORY, True, True),
    (Status.ERROR, ErrorType.OUT_OF_MEMORY, False, False),
    (Status.ERROR, ErrorType.COMPILE, False, False), (Status.ERROR, ErrorType.LOWERING, False, False),
    (Status.ERROR, ErrorType.HARNESS, False, True), (Status.ERROR, ErrorType.TIMEOUT, False, False),
    # the edge artifact's analysis helper outgrew its memory after the compile: no device's fault
    (Status.REJECTED, ErrorType.OUT_OF_MEMORY, True, False)])
def test_judge_is_replaced_only_when_its_device_is_suspect(processes, status, error_type, compiled,
                                                           retired):
  profile = runfixtures.record(types.SimpleNamespace(), "relu", kernel_sha256="0" * 64).compile
  record = _record(status=status, error_type=error_type, error="boom", correct=False,
                   rel_l2_error=None,  # no output of the kernel was compared
                   compile=dataclasses.replace(profile, compile_s=0.5 if compiled else None))
  assert driver.device_suspect(record) is retired
  processes.answers += [("result", (record, driver.empty_artifacts(ITEM)))]
  stages.judge_stage(ITEM, _outcome(), {}, SETTINGS)
  assert processes.started[0].closed is retired


@pytest.mark.parametrize("status, correct, device, retired", [
    (Status.REJECTED, True, "gpu", True),    # memcheck, after the unwatched correctness runs
    (Status.INCORRECT, False, "gpu", True),  # never watched
    (Status.PASS, True, "gpu", False),
    (Status.INCORRECT, False, "cpu", False)])  # interpret mode: no device memory to reach
def test_a_judge_whose_gpu_ran_a_kernel_that_did_not_pass_is_replaced(status, correct, device,
                                                                      retired):
  record = _record(status=status, correct=correct, device=device, rel_l2_error=0.5,
                   reasons=() if status is Status.PASS else ("seed 1: not allclose",))
  assert driver.device_suspect(record) is retired


def test_a_judge_that_never_answered_is_a_record_with_empty_artifacts(processes):
  processes.answers += [("timeout", "the judge found no verdict within the 300 s limit")]
  record, artifacts = stages.judge_stage(ITEM, _outcome(wall_s=2.0), {}, SETTINGS)
  assert record.status is Status.TIMEOUT and record.error_type is ErrorType.TIMEOUT
  assert record.error == "the judge found no verdict within the 300 s limit"
  assert record.eval_wall_s >= 2.0 and record.run.run_id == "run-1"
  assert artifacts == Artifacts(task="relu", variant="gpu", size="medium", jaxpr=None,
                                stablehlo=None, triton_ir=None, ptx=None)
  assert processes.started[0].closed

def test_a_stage_over_its_budget_is_a_rejection_the_cache_keeps_out_and_a_crash_no_verdict(
    processes, tmp_path):
  """A stage that ran past its budget is `rejected`, naming the stage and the budget, but the
  host's load may have decided it (red team round 14), so the verdict cache does not keep it.
  A judge that died says nothing about the kernel: its record is measured again, never
  cached."""
  cache = verdicts.VerdictCache(tmp_path)
  over = budgets.overrun(budgets.CORRECTNESS, 120)
  processes.answers += [("over_budget", over)]
  rejected, _ = stages.judge_stage(ITEM, _outcome(), {}, SETTINGS)
  assert (rejected.status, rejected.error_type) == (Status.REJECTED, ErrorType.TIMEOUT)
  assert rejected.reasons == ("the correctness runs stage ran past its 120 s budget; its "
                              "process was killed",)
  assert processes.started[0].closed  # killed mid-stage: the next item gets a fresh judge
  processes.answers[:] = [("crash", "killed by SIGKILL in its timing stage")]  # the next judge's
  crashed, _ = stages.judge_stage(ITEM, _outcome(), {}, SETTINGS)
  assert crashed.error_type is ErrorType.CRASH
  cache.put(ITEM, rejected, driver.empty_artifacts(ITEM))
  assert cache.get(verdicts.key_of(ITEM, rejected)) is None
  crashed_item = dataclasses.replace(ITEM, source="another source")
  cache.put(crashed_item, crashed, driver.empty_artifacts(crashed_item))
  assert cache.get(verdicts.key_of(crashed_item, crashed)) is None


def _sleeping_worker():
  """A CPU JudgeWorker around a process that never answers, and the judge's end of its socket."""
  worker = JudgeWorker.__new__(JudgeWorker)
  worker._proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # pylint: disable=protected-access
  ours, theirs = socket.socketpair()
  worker._conn = Connection(ours.detach())  # pylint: disable=protected-access
  worker._dump_dir, worker._device = None, "cpu"  # pylint: disable=protected-access
  return worker, Connection(theirs.detach())


@pytest.mark.parametrize("stage, kind, after_s", [
    ("correctness runs", "over_budget", 0.3), ("timing", "timeout", 1.5),
    ("copy check", "harness_error", 1.5), ("eager baseline", "harness_error", 1.5)])
def test_a_judge_is_killed_at_its_stages_budget_and_its_own_stages_are_no_verdict(
    monkeypatch, stage, kind, after_s):
  """A stage of the candidate's is cut at its budget (over_budget: a cached rejection) or at
  the limit where it has no budget under it (timeout); the judge's own stages that run out of
  the limit are the judge's failure (a harness error: no verdict, measured again)."""
  monkeypatch.setattr(budgets, "STAGE_BUDGETS_S", {"cpu": {budgets.CORRECTNESS: 0.3}})
  worker, judge_end = _sleeping_worker()
  judge_end.send(("stage", stage))
  start = time.monotonic()
  got, message = worker.run("an item", Limits(timeout_s=1.5, memory_bytes=1 << 40))
  assert got == kind and after_s <= time.monotonic() - start < after_s + 1.0, message
  assert worker._proc.returncode is not None  # pylint: disable=protected-access
  assert stage in message
  record = driver.failure_record(ITEM, runfixtures.ENV, None, got, message, 0.0)
  assert driver.has_verdict(record) is (kind != "harness_error")
  judge_end.close()


def test_a_compile_stage_part_over_its_budget_is_noted_as_run_out(processes):
  """The compiler's own stages have budgets too: one run out is the compile stage's word
  (not tried again on the device), with the stage's reason."""
  over = budgets.overrun(budgets.MODULE_ANALYSIS, 210)
  processes.answers += [("over_budget", over)]
  notes = stages.compile_stage(ITEM, _outcome(_report({"medium": {"cuda": b"m"}})), SETTINGS)
  assert (notes["medium"].outcome, notes["medium"].message) == ("timeout", over)
  assert processes.started[0].closed


# ---------------------------------------------------------------------------------------------
# suite: the run folder


def _line(obj):
  return json.dumps(to_json_dict(obj))


def _write(run_dir, records, artifacts):
  (run_dir / suite.RECORDS).write_text("".join(_line(r) + "\n" for r in records))
  (run_dir / suite.ARTIFACTS).write_text("".join(_line(a) + "\n" for a in artifacts))


def _artifacts(task, variant="gpu"):
  return Artifacts(task=task, variant=variant, size="medium", jaxpr=None, stablehlo=None,
                   triton_ir=None, ptx=None)


def test_reconcile_keeps_whole_units_and_drops_the_rest(tmp_path):
  done = _record()
  crashed = _record(status=Status.ERROR, error_type=ErrorType.CRASH, error="died with SIGKILL",
                    variant="tpu")
  harness = dataclasses.replace(_record(), task="gelu", status=Status.ERROR,
                                error_type=ErrorType.HARNESS, error="bug")
  failed = dataclasses.replace(_record(), task="silu", status=Status.ERROR,
                               error_type=ErrorType.COMPILE, error="ptxas")
  no_artifacts = dataclasses.replace(_record(), task="tanh")
  _write(tmp_path, [done, crashed, harness, failed, no_artifacts, done],
         [_artifacts("relu"), _artifacts("relu", "tpu"), _artifacts("gelu"), _artifacts("silu"),
          _artifacts("exp"), _artifacts("relu")])
  with (tmp_path / suite.RECORDS).open("a") as f:
    f.write('{"task": "relu", "va')  # torn
  assert suite.reconcile(tmp_path) == {EvalKey("relu", "gpu", "medium"),
                                       EvalKey("silu", "gpu", "medium")}
  records = [json.loads(line) for line in (tmp_path / suite.RECORDS).read_text().splitlines()]
  artifacts = [json.loads(line) for line in (tmp_path / suite.ARTIFACTS).read_text().splitlines()]
  assert [(r["task"], r["variant"]) for r in records] == [("relu", "gpu"), ("silu", "gpu")]
  assert [(a["task"], a["variant"]) for a in artifacts] == [("relu", "gpu"), ("silu", "gpu")]
  assert not list(tmp_path.glob("*.tmp"))


def test_reconcile_leaves_a_clean_folder_untouched(tmp_path):
  _write(tmp_path, [_record()], [_artifacts("relu")])
  before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
  assert suite.reconcile(tmp_path) == {EvalKey("relu", "gpu", "medium")}
  assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before


def test_only_errors_of_a_killed_or_broken_evaluation_have_no_verdict():
  assert not driver.has_verdict(_record(status=Status.ERROR, error_type=ErrorType.CRASH, error="x"))
  assert not driver.has_verdict(_record(status=Status.ERROR, error_type=ErrorType.HARNESS, error="x"))
  assert driver.has_verdict(_record(status=Status.ERROR, error_type=ErrorType.COMPILE, error="x"))
  assert driver.has_verdict(_record(status=Status.TIMEOUT, error_type=ErrorType.TIMEOUT, error="x"))
  assert driver.has_verdict(_record())


def test_pipeline_report_says_where_the_time_went():
  timed = lambda e, c, j, hit: _record(stages=StageTimes(  # noqa: E731
      export_s=e, compile_s=c, judge_s=j, compile_cache_hit=hit))
  records = [timed(1.0, 2.0, 3.0, True), timed(1.5, None, 1.0, None), timed(0.5, 1.0, 2.0, False),
             _record(stages=None)]
  cached = dataclasses.replace(records[0], cached=True)  # measured elsewhere: costs nothing here
  report = suite._pipeline_report([*records, cached], 4.0, 2)  # pylint: disable=protected-access
  assert report == {"evaluations": 4, "cached": 1, "wall_s": 4.0, "judges": 2, "export_s": 3.0,
                    "compile_s": 3.0, "judge_s": 6.0, "judge_busy": 0.75,
                    "per_judge_minute": 30.0, "compile_cache_hits": 1,
                    "compile_cache_lookups": 2}
  cpu = suite._pipeline_report(records[:1], 6.0, 1)  # pylint: disable=protected-access
  assert cpu["judge_busy"] == 0.5 and cpu["per_judge_minute"] == 10.0
  empty = suite._pipeline_report([], 0.0, 1)  # pylint: disable=protected-access
  assert empty["judge_busy"] is None and empty["per_judge_minute"] is None


def test_manifest_records_each_gpu_once_and_how_the_run_ended(tmp_path):
  segment = {"command": "regen", "ceilings": None, "finished_at": None}
  manifest = suite._Manifest(tmp_path, dict(segment), resume=False)  # pylint: disable=protected-access
  run = lambda gpu: RunInfo(command="c", run_id="r", gpu_index=gpu, ceiling_copy_gbps=1.0,  # noqa: E731
                            ceiling_read_gbps=2.0, ceiling_matmul_tflops=3.0)
  for gpu in (1, 0, 1):
    manifest.record_seen(_record(run=run(gpu)))
  unknown = dataclasses.replace(runfixtures.ENV, hardware="unknown")
  manifest.record_seen(_record(run=None, environment=unknown))
  manifest.end(complete=False, pipeline={"evaluations": 3})
  data = json.loads((tmp_path / suite.MANIFEST).read_text())
  assert [d["device"] for d in data["per_device"]] == ["1", "0"]
  assert data["ceilings"] == {"copy_gbps": 1.0, "read_gbps": 2.0, "matmul_tflops": 3.0,
                              "matmul_bf16_tflops": None, "method": None}
  assert data["environment"]["hardware"] == "h200"
  assert data["finished_at"] is None and data["interrupted_at"]
  assert data["pipeline"] == {"evaluations": 3}
  resumed = suite._Manifest(tmp_path, dict(segment), resume=True)  # pylint: disable=protected-access
  resumed.end(complete=True, pipeline={})
  data = json.loads((tmp_path / suite.MANIFEST).read_text())
  assert data["finished_at"] and data["resumes"][0]["finished_at"] == data["finished_at"]
  assert [d["device"] for d in data["per_device"]] == ["1", "0"]


def test_a_cpu_record_is_seen_as_device_cpu(tmp_path):
  manifest = suite._Manifest(tmp_path, {"ceilings": None}, resume=False)  # pylint: disable=protected-access
  manifest.record_seen(_record(run=None))
  assert json.loads((tmp_path / suite.MANIFEST).read_text())["per_device"][0]["ceilings"] is None
  assert manifest.data["per_device"][0]["device"] == "cpu"


# ---------------------------------------------------------------------------------------------
# Details a plausible slip would break (from mutation testing of these modules).

class _Log:
  """Stands in for a module's logger: keeps each message, formatted."""

  def __init__(self):
    self.lines = []

  def warning(self, message, *args):
    self.lines.append(message % args)

  info = warning


def test_repair_tail_cuts_only_the_torn_fragment(tmp_path, monkeypatch):
  log = _Log()
  monkeypatch.setattr(suite, "logger", log)
  path = tmp_path / "records.jsonl"
  suite._repair_tail(path)  # pylint: disable=protected-access  (absent: nothing to do)
  assert not path.exists()
  for intact in (b"", b'{"a": 1}\n{"b": 2}\n'):
    path.write_bytes(intact)
    suite._repair_tail(path)  # pylint: disable=protected-access
    assert path.read_bytes() == intact
  path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": ')
  suite._repair_tail(path)  # pylint: disable=protected-access
  assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
  path.write_bytes(b'{"only": ')
  suite._repair_tail(path)  # pylint: disable=protected-access
  assert path.read_bytes() == b""
  assert log.lines == [f"{path} ended in a torn line (6 bytes); it was cut and will be re-measured",
                       f"{path} ended in a torn line (9 bytes); it was cut and will be re-measured"]


def test_read_lines_names_the_bad_line(tmp_path, monkeypatch):
  log = _Log()
  monkeypatch.setattr(suite, "logger", log)
  path = tmp_path / suite.ARTIFACTS
  path.write_text(_line(_artifacts("relu")) + "\nnot json\n" + _line(_artifacts("gelu")) + "\n")
  got = suite._read_lines(path, Artifacts)  # pylint: disable=protected-access
  assert [a.task for _, a in got] == ["relu", "gelu"] and got[0][0] == _line(_artifacts("relu"))
  assert log.lines == [f"{path} line 2 is not valid (Expecting value: line 1 column 1 (char 0)); "
                       "it will be re-measured"]


def test_reconcile_says_what_it_measures_again_and_drops_lone_artifacts(tmp_path, monkeypatch):
  log = _Log()
  monkeypatch.setattr(suite, "logger", log)
  crashed = _record(status=Status.ERROR, error_type=ErrorType.CRASH, error="died")
  lost = dataclasses.replace(_record(), task="gelu")
  _write(tmp_path, [crashed, lost], [_artifacts("relu")])
  assert suite.reconcile(tmp_path) == set()
  assert log.lines == ["relu gpu medium was crash (died): re-measured",
                       "gelu gpu medium has a record but no artifacts (the write was cut): "
                       "re-measured"]
  _write(tmp_path, [_record()], [_artifacts("relu"), _artifacts("exp")])  # records all kept
  assert suite.reconcile(tmp_path) == {EvalKey("relu", "gpu", "medium")}
  assert len((tmp_path / suite.ARTIFACTS).read_text().splitlines()) == 1


def test_a_new_manifest_and_a_resumed_old_one(tmp_path):
  manifest = suite._Manifest(tmp_path, {"command": "a", "finished_at": None}, resume=False)  # pylint: disable=protected-access
  text = (tmp_path / suite.MANIFEST).read_text()
  assert json.loads(text) == {"command": "a", "finished_at": None, "environment": None,
                              "ceilings": None, "per_device": [], "resumes": []}
  assert text == json.dumps(manifest.data, indent=1, sort_keys=True) + "\n"
  (tmp_path / suite.MANIFEST).write_text(json.dumps({"command": "old", "environment": {"x": 1}}))
  resumed = suite._Manifest(tmp_path, {"command": "b"}, resume=True)  # pylint: disable=protected-access
  resumed.record_seen(_record(run=None))
  data = json.loads((tmp_path / suite.MANIFEST).read_text())
  assert data["command"] == "old" and data["environment"] == {"x": 1}  # the first segment's
  assert data["resumes"][0]["command"] == "b"
  assert [d["device"] for d in data["resumes"][0]["per_device"]] == ["cpu"]
  assert "per_device" not in data and not list(tmp_path.glob("*.tmp"))


def test_rewrite_replaces_the_file_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "records.jsonl"
  path.write_text("old\n")
  suite._rewrite(path, ["a", "b"])  # pylint: disable=protected-access
  assert path.read_text() == "a\nb\n" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_compile_stage_details(processes, monkeypatch):
  clock = iter([10.0, 12.5, 20.0, 21.0])
  monkeypatch.setattr(stages.time, "monotonic", lambda: next(clock))
  cpu = dataclasses.replace(SETTINGS, device="cpu",
                            limits=Limits(timeout_s=300, memory_bytes=12345))
  report = _report({"medium": {"cpu": b"c", "cuda": b"g"}, "edge": {"cuda": b"e", "cpu": b"ce"}})
  processes.answers += [("result", Precompiled(outcome="compiled")), ("crash", "died")]
  notes = stages.compile_stage(ITEM, _outcome(report), cpu)
  assert (notes["medium"].wall_s, notes["edge"].wall_s) == (2.5, 1.0)
  sent = processes.started[0].sent
  assert [(i.task, i.size, i.blob, lim.memory_bytes) for i, lim in sent] == [
      ("relu", "medium", b"c", 12345), ("relu", "edge", b"ce", 12345)]
  assert processes.started[0].closed and len(processes.started) == 1
  clock = iter([30.0, 34.5])
  processes.answers[:] = [("timeout", "no answer")]  # the next compiler's only answer
  timed_out = stages.compile_stage(ITEM, _outcome(_report({"medium": {"cpu": b"c"}})), cpu)
  assert (timed_out["medium"].outcome, timed_out["medium"].wall_s) == ("timeout", 4.5)


def test_export_stage_runs_the_sandboxed_exporter(monkeypatch):
  calls = []
  monkeypatch.setattr(stages.driver, "export", lambda *args: calls.append(args) or "outcome")
  assert stages.export_stage(ITEM, SETTINGS) == "outcome"
  assert calls == [(ITEM, "gpu", SETTINGS.limits)]


def test_judge_stage_sends_the_item_and_limits_and_times_a_failure(processes, monkeypatch):
  clock = iter([100.0, 104.0])
  monkeypatch.setattr(stages.time, "monotonic", lambda: next(clock))
  notes = {"medium": Precompiled(outcome="compiled")}
  processes.answers += [("crash", "the judge process died with SIGSEGV")]
  exported = _outcome(wall_s=2.0)
  record, _ = stages.judge_stage(ITEM, exported, notes, SETTINGS)
  (item, limits), = processes.started[0].sent
  assert item.export is exported and item.precompiled == notes and limits is SETTINGS.limits
  assert record.error_type is ErrorType.CRASH and record.eval_wall_s == 6.0


def test_small_defaults(monkeypatch):
  monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
  assert stages._gpu_index() is None  # pylint: disable=protected-access
  monkeypatch.setattr(stages, "_PROCESSES", {})
  stages._retire(stages.JUDGE)  # pylint: disable=protected-access  (none running: nothing to do)
  monkeypatch.setattr(cluster.os, "cpu_count", lambda: None)
  assert cluster.default_plan("cpu").cpu_workers == 1  # unknown cores count as 2
  spec = cluster.worker_specs(cluster.WorkerPlan(gpus=(), cpu_workers=1), "/d")["judge-cpu"]
  assert spec["options"]["resources"] == {stages.GPU_RESOURCE: 1}
  assert spec["options"]["local_directory"] == "/d"
  assert spec["options"]["silence_logs"] == cluster.logging.WARNING


def test_pipeline_report_rounds_to_tenths():
  record = _record(stages=StageTimes(export_s=1.26, compile_s=0.04, judge_s=2.0,
                                     compile_cache_hit=True))
  report = suite._pipeline_report([record], 4.26, 1)  # pylint: disable=protected-access
  assert (report["wall_s"], report["export_s"], report["compile_s"], report["judge_busy"]) == (
      4.3, 1.3, 0.0, 0.469)
  short = suite._pipeline_report([record], 0.5, 1)  # pylint: disable=protected-access
  assert (short["wall_s"], short["judge_busy"]) == (0.5, 4.0)


def test_plan_orders_sizes_then_tasks_then_variants():
  from pallasbench_dataset.tasks import get_task  # pylint: disable=import-outside-toplevel
  options = suite.EvalOptions(num_seeds=2)
  items = suite.plan([get_task("relu"), get_task("gelu")], ["tpu", "gpu"], ["medium", "large"],
                     options)
  assert [(i.size, i.task, i.variant) for i in items] == [
      ("medium", "relu", "tpu"), ("medium", "relu", "gpu"), ("medium", "gelu", "tpu"),
      ("medium", "gelu", "gpu"), ("large", "relu", "tpu"), ("large", "relu", "gpu"),
      ("large", "gelu", "tpu"), ("large", "gelu", "gpu")]
  first = items[1]
  assert first.filename == "kernels_gpu/relu.py" and first.options is options
  assert first.source == suite.kernel_path("gpu", "relu").read_text()


def test_check_resumable(tmp_path):
  assert suite._check_resumable(tmp_path, resume=False) == set()  # pylint: disable=protected-access
  with pytest.raises(FileNotFoundError) as info:
    suite._check_resumable(tmp_path, resume=True)  # pylint: disable=protected-access
  assert str(info.value) == (
      f"{tmp_path} holds 0 records but no manifest.json: the run's command, commit and "
      "environment are lost, so it cannot be resumed (start a new run in another folder)")
  _write(tmp_path, [_record()], [_artifacts("relu")])
  with pytest.raises(FileExistsError) as info:
    suite._check_resumable(tmp_path, resume=False)  # pylint: disable=protected-access
  assert str(info.value) == (f"{tmp_path} already holds 1 records: pass --resume to continue "
                             "that run, or choose another folder")
  with pytest.raises(FileNotFoundError, match="holds 1 records but no manifest.json"):
    suite._check_resumable(tmp_path, resume=True)  # pylint: disable=protected-access
  (tmp_path / suite.MANIFEST).write_text("{}")
  assert suite._check_resumable(tmp_path, resume=True) == {EvalKey("relu", "gpu", "medium")}  # pylint: disable=protected-access
  assert [r.task for r in suite.read_records(tmp_path)] == ["relu"]
  assert suite.read_records(tmp_path / "absent") == []


def test_a_fresh_run_starts_on_clean_files(tmp_path):
  """A run killed while writing its first record leaves no valid record, so a new run (no
  --resume) may use the folder: the torn line and the orphan artifacts line are cut first,
  so that the new run's first record starts a line of its own instead of being glued to the
  fragment and lost."""
  (tmp_path / suite.MANIFEST).write_text("{}")
  (tmp_path / suite.RECORDS).write_text('{"task": "relu", "va')
  (tmp_path / suite.ARTIFACTS).write_text(_line(_artifacts("relu")) + "\n")
  assert suite._check_resumable(tmp_path, resume=False) == set()  # pylint: disable=protected-access
  assert (tmp_path / suite.RECORDS).read_text() == ""
  assert (tmp_path / suite.ARTIFACTS).read_text() == ""


def test_sink_writes_the_artifacts_line_before_the_record_line(tmp_path, monkeypatch):
  import io  # pylint: disable=import-outside-toplevel
  stream = io.StringIO()
  monkeypatch.setattr(suite.time, "monotonic", lambda: 100.0)
  sink = suite._Sink(tmp_path, suite._Progress(2, 1, stream))  # pylint: disable=protected-access
  sink(_record(run=RunInfo(command="c", run_id="r", gpu_index=1, ceiling_copy_gbps=None,
                           ceiling_read_gbps=None, ceiling_matmul_tflops=None)),
       _artifacts("relu"))
  assert (tmp_path / suite.ARTIFACTS).read_text() == _line(_artifacts("relu")) + "\n"
  assert json.loads((tmp_path / suite.RECORDS).read_text())["task"] == "relu"
  sink._records.write = lambda _: (_ for _ in ()).throw(OSError("disk full"))  # pylint: disable=protected-access
  with pytest.raises(OSError):
    sink(dataclasses.replace(_record(), task="gelu"), _artifacts("gelu"))
  sink.close()
  assert len((tmp_path / suite.ARTIFACTS).read_text().splitlines()) == 2  # an orphan: resume drops it
  assert len((tmp_path / suite.RECORDS).read_text().splitlines()) == 1
  assert stream.getvalue() == ("[############............] 1/2 0:00:00 ETA 0:00:00 relu gpu "
                               "medium: pass  0.5 ms (3.5 s gpu1)\n")  # no throughput: no time has passed


def test_progress_line_without_a_time_or_a_gpu():
  import io  # pylint: disable=import-outside-toplevel
  stream = io.StringIO()
  progress = suite._Progress(0, 1, stream)  # pylint: disable=protected-access
  progress.finished(_record(runtime_ms=None, status=Status.ERROR, error_type=ErrorType.COMPILE,
                            error="x", run=None))
  line = stream.getvalue()
  assert line.startswith("[########################] 1/0 0:00:") and line.endswith(
      "/judge-min\n") and " relu gpu medium: error (3.5 s)  " in line


def test_progress_counts_throughput_over_measured_evaluations_and_names_candidates(monkeypatch):
  import io  # pylint: disable=import-outside-toplevel
  clock = iter([0.0, 60.0, 90.0])
  monkeypatch.setattr(suite.time, "monotonic", lambda: next(clock))
  stream = io.StringIO()
  progress = suite._Progress(2, 2, stream)  # pylint: disable=protected-access
  record = _record(run=None, variant="candidate", candidate="relu/a")
  progress.finished(record)
  progress.finished(dataclasses.replace(record, candidate="relu/b", cached=True))
  first, second = stream.getvalue().splitlines()
  assert first.endswith("relu candidate medium relu/a: pass  0.5 ms (3.5 s)  0.5/judge-min")
  assert second.endswith("relu candidate medium relu/b: pass  0.5 ms (cached)  0.33/judge-min")


def test_progress_lines_are_flushed_as_written():
  """A run's stderr may be a file (the GPU machine's logs): each line must reach it at once."""
  import io  # pylint: disable=import-outside-toplevel

  class Stream(io.StringIO):
    def __init__(self):
      super().__init__()
      self.flushed = []

    def flush(self):
      self.flushed.append(self.getvalue().count("\n"))
  stream = Stream()
  progress = suite._Progress(2, 1, stream)  # pylint: disable=protected-access
  progress.finished(_record())
  progress.finished(_record())
  assert stream.flushed == [1, 2]


# ---------------------------------------------------------------------------------------------
# suite: the scheduler and the run, on an in-process Dask cluster (threads, no processes) with
# stand-in stages. Dask pickles module-level functions by reference, so the stand-ins below
# share this module's state with the test that drives them.

class _Stage:
  """What the stand-in stages do and what they saw: `hold[(stage, slug)]` is an event a stage
  waits for before it returns, `done[(stage, slug)]` one it sets when it returns, `raises[slug]`
  an exception the judge raises, `judge_keys` the judge tasks the scheduler held as each judge
  started."""

  def __init__(self, cluster_=None):
    self.cluster = cluster_
    self.lock = threading.Lock()
    self.events, self.judge_keys, self.settings, self.placed = [], [], [], []
    self.hold, self.done, self.raises = {}, {}, {}
    self.on_judge = None  # called as the judge of an item starts: on_judge(slug)

  def log(self, stage, item, settings=None):
    worker = distributed.get_worker()
    with self.lock:
      self.events.append((stage, suite._slug(item)))  # pylint: disable=protected-access
      self.placed.append((worker.name, _untagged(worker.get_current_task()), settings))

  def wait(self, stage, slug):
    if (stage, slug) in self.hold:
      assert self.hold[(stage, slug)].wait(10), f"{stage} {slug} was never released"

  def finished(self, stage, slug):
    self.done.setdefault((stage, slug), threading.Event()).set()


_STAGE = _Stage()


def _untagged(key: str) -> str:
  """A stage's key without the tag its `_schedule` call drew (`export-relu-gpu-medium`)."""
  return str(key).rsplit("-", 1)[0]


def _export_stand_in(item, settings):
  _STAGE.log("export", item, settings)
  slug = suite._slug(item)  # pylint: disable=protected-access
  return dataclasses.replace(_outcome(wall_s=0.25), output=slug)  # what it exported, by name


def _compile_stand_in(item, exported, settings):
  slug = suite._slug(item)  # pylint: disable=protected-access
  assert exported == dataclasses.replace(_outcome(wall_s=0.25), output=slug)
  _STAGE.wait("compile", slug)
  _STAGE.log("compile", item, settings)
  _STAGE.finished("compile", slug)
  return {"notes": slug}


def _judge_stand_in(item, exported, notes, settings):
  slug = suite._slug(item)  # pylint: disable=protected-access
  assert exported.output == slug and notes == {"notes": slug}
  with _STAGE.lock:
    _STAGE.settings.append(settings)
    _STAGE.judge_keys.append(sorted(_untagged(k) for k in _STAGE.cluster.scheduler.tasks
                                    if str(k).startswith("judge-")))
  _STAGE.log("judge", item, settings)
  if _STAGE.on_judge is not None:
    _STAGE.on_judge(slug)
  _STAGE.wait("judge", slug)
  if slug in _STAGE.raises:
    raise _STAGE.raises[slug]
  record = dataclasses.replace(
      _record(), task=item.task, variant=item.variant, size=item.size,
      kernel_sha256=item.kernel_sha256, candidate=item.candidate, precision=item.precision,
      stages=StageTimes(export_s=1.0, compile_s=2.0, judge_s=3.0, compile_cache_hit=True),
      run=RunInfo(command=settings.command, run_id=settings.run_id, gpu_index=0,
                  ceiling_copy_gbps=1.0, ceiling_read_gbps=2.0, ceiling_matmul_tflops=3.0))
  return record, dataclasses.replace(_artifacts(item.task, item.variant), size=item.size)


def _signal_when_the_driver_waits(signum):
  """Sends `signum` to this process once the main thread waits for the next judge (so that
  every record before is written and counted)."""
  main = threading.main_thread().ident
  deadline = time.monotonic() + 10
  while time.monotonic() < deadline:
    frame, names = sys._current_frames().get(main), set()  # pylint: disable=protected-access
    while frame is not None:
      names.add(frame.f_code.co_name)
      frame = frame.f_back
    if "__next__" in names:
      os.kill(os.getpid(), signum)
      return
    time.sleep(0.005)
  raise AssertionError("the driver never waited for a judge")


@pytest.fixture(scope="module")
def dask_cluster():
  """One judge slot and two CPU slots in threads of this process."""
  with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=4,
                                resources={stages.CPU_RESOURCE: 2, stages.GPU_RESOURCE: 1},
                                dashboard_address="127.0.0.1:0",
                                worker_dashboard_address="127.0.0.1:0") as local:
    yield local


@pytest.fixture
def stand_ins(monkeypatch, dask_cluster):
  """The stand-in stages in place of the real ones; returns their shared state."""
  state = _Stage(dask_cluster)
  monkeypatch.setattr(sys.modules[__name__], "_STAGE", state)
  monkeypatch.setattr(stages, "export_stage", _export_stand_in)
  monkeypatch.setattr(stages, "compile_stage", _compile_stand_in)
  monkeypatch.setattr(stages, "judge_stage", _judge_stand_in)
  yield state
  for event in state.hold.values():  # let nothing wait on into the next test
    event.set()


def _items(*keys):
  return [driver.WorkItem(task=task, variant=variant, size="medium", source="src",
                          filename=f"kernels_{variant}/{task}.py") for task, variant in keys]


def _settings(**overrides):
  return dataclasses.replace(SETTINGS, **{"device": "cpu", **overrides})


def _client_knows_done(client, key, timeout_s=10.0):
  """Waits until `client` has heard that the task `key` finished."""
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    states = [state for k, state in list(client.futures.items()) if _untagged(k) == key]
    if states and states[0].status == "finished":
      return
    time.sleep(0.01)
  raise AssertionError(f"{key} did not finish")


def test_schedule_judges_the_first_item_whose_compile_is_done(stand_ins, dask_cluster):
  """One judge slot: the judge goes to the first compiled item in plan order, so a long
  compile (gelu's, released only by silu's judge) does not hold up the item behind it."""
  items = _items(("relu", "gpu"), ("gelu", "gpu"), ("silu", "gpu"))
  stand_ins.hold[("compile", "gelu-gpu-medium")] = threading.Event()
  with distributed.Client(dask_cluster.scheduler_address) as client:
    def on_judge(slug):
      if slug == "relu-gpu-medium":  # returns once the client knows silu is compiled
        _client_knows_done(client, "compile-silu-gpu-medium")
      if slug == "silu-gpu-medium":
        stand_ins.hold[("compile", "gelu-gpu-medium")].set()
    stand_ins.on_judge = on_judge
    run = suite._schedule(client, items, _settings(), "c0ffee")  # pylint: disable=protected-access
    got = [(record.task, artifacts.task) for _, record, artifacts in run]
  assert got == [("relu", "relu"), ("silu", "silu"), ("gelu", "gelu")]
  judged = [slug for stage, slug in stand_ins.events if stage == "judge"]
  assert judged == ["relu-gpu-medium", "silu-gpu-medium", "gelu-gpu-medium"]
  # one judge submitted at a time: each judge was the only judge task the scheduler held
  assert stand_ins.judge_keys == [["judge-relu-gpu-medium"], ["judge-silu-gpu-medium"],
                                  ["judge-gelu-gpu-medium"]]
  assert all(s.command == "regen" and s.run_id == "run-1" for s in stand_ins.settings)


def test_schedule_gives_a_freed_judge_a_task_it_has_judged(stand_ins, dask_cluster):
  """Every compile done: after relu's gpu kernel the judge takes relu's tpu kernel (its
  process holds relu's reference executables) before gelu, which plan order puts first."""
  items = _items(("relu", "gpu"), ("gelu", "gpu"), ("relu", "tpu"))
  with distributed.Client(dask_cluster.scheduler_address) as client:
    def on_judge(slug):
      if slug == "relu-gpu-medium":
        for other in ("gelu-gpu-medium", "relu-tpu-medium"):
          _client_knows_done(client, f"compile-{other}")
    stand_ins.on_judge = on_judge
    run = suite._schedule(client, items, _settings(), "c0ffee")  # pylint: disable=protected-access
    got = [(record.task, record.variant) for _, record, _ in run]
  assert got == [("relu", "gpu"), ("relu", "tpu"), ("gelu", "gpu")]


@pytest.fixture
def two_judges(stand_ins):
  """Two workers of one judge slot and one CPU slot each, for the stand-ins."""
  with distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=2,
                                resources={stages.CPU_RESOURCE: 1, stages.GPU_RESOURCE: 1},
                                dashboard_address="127.0.0.1:0",
                                worker_dashboard_address="127.0.0.1:0") as local:
    stand_ins.cluster = local
    yield local


def test_schedule_keeps_every_judge_slot_busy(stand_ins, two_judges):
  items = _items(("relu", "gpu"), ("relu", "tpu"), ("gelu", "gpu"))
  both = threading.Barrier(2, timeout=10)
  concurrent = []

  def on_judge(slug):
    if slug != "gelu-gpu-medium":
      concurrent.append(both.wait() is not None)  # both judges run at once
  stand_ins.on_judge = on_judge
  with distributed.Client(two_judges.scheduler_address) as client:
    assert suite._judge_slots(client) == 2  # pylint: disable=protected-access
    got = {(r.task, r.variant) for _, r, _ in suite._schedule(client, items, _settings(), "c0ffee")}  # pylint: disable=protected-access
  assert got == {("relu", "gpu"), ("relu", "tpu"), ("gelu", "gpu")}
  assert concurrent == [True, True]
  assert max(len(keys) for keys in stand_ins.judge_keys) == 2  # never a judge queued behind


def test_choose_prefers_own_tasks_then_unclaimed_tasks_then_plan_order():
  """The freed judge's choice among waiting items (plan order) by which are compiled."""
  waiting = _items(("relu", "gpu"), ("gelu", "gpu"), ("silu", "gpu"), ("relu", "tpu"))
  relu, gelu, silu = (("relu", "medium"), ("gelu", "medium"), ("silu", "medium"))
  choose = functools.partial(suite._choose, waiting)  # pylint: disable=protected-access
  everything = [True] * 4
  assert choose(everything, mine=set(), theirs=set()) == 0
  assert choose(everything, mine={silu}, theirs={relu}) == 2            # its own task first
  assert choose(everything, mine={gelu, silu}, theirs=set()) == 1       # the first of its own
  assert choose(everything, mine=set(), theirs={relu, gelu}) == 2       # then no one's
  assert choose(everything, mine=set(), theirs={relu, gelu, silu}) == 0  # then plan order
  assert choose([False, False, True, True], mine={relu}, theirs={silu}) == 3  # compiled only
  assert choose([False, True, True, False], mine=set(), theirs={gelu, silu}) == 1
  assert choose([False] * 4, mine={gelu}, theirs=set()) == 0            # none compiled: first


def test_held_by_others_is_what_the_other_judges_judged_and_what_runs():
  judged_on = {"a": {("relu", "medium")}, "b": {("gelu", "medium")}, "c": {("exp", "large")}}
  running = _items(("silu", "gpu"))
  held = suite._held_by_others("a", judged_on, running)  # pylint: disable=protected-access
  assert held == {("gelu", "medium"), ("exp", "large"), ("silu", "medium")}
  assert suite._held_by_others(None, {}, []) == set()  # pylint: disable=protected-access


@pytest.fixture
def judges_apart(stand_ins):
  """Two judge workers (one judge slot each) and a CPU worker, as in a real cluster: the
  compiled items live on the CPU worker, so Dask places a judge on the free judge worker."""
  worker = lambda resources, threads: {"cls": distributed.Worker,
                                       "options": {"nthreads": threads, "resources": resources}}
  specs = {"judge-0": worker({stages.GPU_RESOURCE: 1}, 1),
           "judge-1": worker({stages.GPU_RESOURCE: 1}, 1),
           "cpu": worker({stages.CPU_RESOURCE: 2}, 2)}
  with distributed.SpecCluster(workers=specs, scheduler={
      "cls": distributed.Scheduler,
      "options": {"host": "127.0.0.1", "port": 0, "dashboard_address": None}}) as local:
    stand_ins.cluster = local
    yield local


def test_schedule_leaves_a_task_another_judge_holds_to_that_judge(stand_ins, judges_apart):
  """Judge A frees up while judge B judges gelu's gpu kernel and both gelu's tpu kernel and
  silu's are compiled: A takes silu (plan order puts gelu's tpu kernel first), so gelu's
  executables are built in one judge process, and B then takes gelu's tpu kernel."""
  items = _items(("relu", "gpu"), ("relu", "tpu"), ("gelu", "gpu"), ("gelu", "tpu"),
                 ("silu", "gpu"))
  later = ("gelu-gpu-medium", "gelu-tpu-medium", "silu-gpu-medium")
  for slug in later:  # so both judges start on relu
    stand_ins.hold[("compile", slug)] = threading.Event()
  gelu_started, silu_started, gelu_tpu_started = (threading.Event() for _ in range(3))
  workers = {}
  with distributed.Client(judges_apart.scheduler_address) as client:
    def on_judge(slug):
      workers[slug] = distributed.get_worker().name
      if slug == "relu-tpu-medium":  # frees its judge once the three others are compiled
        for other in later:  # all released first: two CPU threads cannot hold three compiles
          stand_ins.hold[("compile", other)].set()
        for other in later:
          _client_knows_done(client, f"compile-{other}")
      elif slug == "relu-gpu-medium":  # frees its judge while gelu's gpu kernel is judged
        assert gelu_started.wait(10)
      elif slug == "gelu-gpu-medium":  # frees its judge while silu's is judged
        gelu_started.set()
        assert silu_started.wait(10)
      elif slug == "silu-gpu-medium":  # and silu's only once gelu's tpu kernel has a judge
        silu_started.set()
        assert gelu_tpu_started.wait(10)
      else:
        gelu_tpu_started.set()
    stand_ins.on_judge = on_judge
    got = {(r.task, r.variant) for _, r, _ in suite._schedule(client, items, _settings(), "c0ffee")}  # pylint: disable=protected-access
  assert len(got) == 5
  assert workers["gelu-tpu-medium"] == workers["gelu-gpu-medium"]
  assert workers["silu-gpu-medium"] == workers["relu-gpu-medium"] != workers["gelu-gpu-medium"]


def test_schedule_with_more_judge_slots_than_items(stand_ins, two_judges):
  with distributed.Client(two_judges.scheduler_address) as client:
    (_, record, artifacts), = suite._schedule(client, _items(("relu", "gpu")), _settings(), "c0ffee")  # pylint: disable=protected-access
  assert (record.task, artifacts.task) == ("relu", "relu")
  assert [stage for stage, _ in stand_ins.events] == ["export", "compile", "judge"]


class _LostWorker:
  address = "inproc://lost-worker"


def test_schedule_records_a_stage_that_raised_or_lost_its_worker(stand_ins, dask_cluster,
                                                                  caplog):
  """Each becomes an error record with empty artifacts and the others go on; a failure's
  environment is the last one a judge reported, or the driver's own before any did."""
  items = _items(("relu", "tpu"), ("relu", "gpu"), ("gelu", "tpu"), ("gelu", "gpu"))
  lost = distributed.KilledWorker("judge-x", _LostWorker(), 1)
  stand_ins.raises.update({"relu-tpu-medium": RuntimeError("a bug in a stage"),
                           "gelu-tpu-medium": lost})
  with distributed.Client(dask_cluster.scheduler_address) as client:
    got = [(r, a) for _, r, a in suite._schedule(client, items, _settings(), "c0ffee")]  # pylint: disable=protected-access
  assert [(r.task, r.variant, r.status, r.error_type) for r, _ in got] == [
      ("relu", "tpu", Status.ERROR, ErrorType.HARNESS), ("relu", "gpu", Status.PASS, None),
      ("gelu", "tpu", Status.ERROR, ErrorType.CRASH), ("gelu", "gpu", Status.PASS, None)]
  (raised, _), _, (died, _), _ = got
  assert raised.error == "a pipeline stage raised RuntimeError: a bug in a stage"
  assert died.error == (f"the worker running a stage of it was lost twice ({lost}); retried "
                        "once, then given up")
  assert raised.eval_wall_s == 0.0 and died.eval_wall_s == 0.0
  # before any judge reported: the driver's environment; after: the last judge's
  assert raised.environment == environment.unmeasured("cpu", "c0ffee")
  assert died.environment == runfixtures.ENV
  for record, artifacts in (got[0], got[2]):
    assert artifacts == Artifacts(task=record.task, variant=record.variant, size="medium",
                                  jaxpr=None, stablehlo=None, triton_ir=None, ptx=None)
  logged = [r for r in caplog.records if r.name == suite.__name__]
  assert [r.getMessage() for r in logged] == ["relu-tpu-medium: a stage raised"]
  assert logged[0].exc_info[0] is RuntimeError


def test_schedule_with_a_gpu_environment_before_any_judge(stand_ins, dask_cluster):
  stand_ins.raises["relu-gpu-medium"] = RuntimeError("x")
  with distributed.Client(dask_cluster.scheduler_address) as client:
    (_, record, _), = suite._schedule(client, _items(("relu", "gpu")), _settings(device="gpu"),  # pylint: disable=protected-access
                                   None)
  assert record.environment == environment.unmeasured("gpu", None)


def _options(dask_cluster, **overrides):
  return suite.ClusterOptions(**{
      "plan": cluster.WorkerPlan(gpus=(), cpu_workers=2),
      "scheduler": dask_cluster.scheduler_address, "compile_budget_s": 30.0, **overrides})


def _run_suite(run_dir, items, options, **overrides):
  kwargs = {"device": "cpu", "limits": Limits(timeout_s=120, memory_bytes=1 << 30),
            "git_commit": "abc1234", "command": "regen --test", "cluster_options": options,
            "stream": io.StringIO(), **overrides}
  return suite.run_suite(items, run_dir, **kwargs)


def _lines_of(path):
  return [json.loads(line) for line in path.read_text().splitlines()]


_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")


def test_run_suite_writes_each_record_with_its_artifacts_and_the_manifest(
    stand_ins, dask_cluster, tmp_path, monkeypatch):
  run_dir = tmp_path / "runs" / "run-a"
  items = _items(("relu", "gpu"), ("relu", "tpu"), ("gelu", "gpu"))
  items.append(dataclasses.replace(items[0], size="large"))
  stream = io.StringIO()
  ticks = iter(range(100))
  monkeypatch.setattr(suite, "time", types.SimpleNamespace(monotonic=lambda: 100.0 + 2 * next(ticks)))
  assert _run_suite(run_dir, items, _options(dask_cluster), stream=stream) == run_dir
  keys = [(i.task, i.variant, i.size) for i in items]
  records = _lines_of(run_dir / suite.RECORDS)
  assert [(r["task"], r["variant"], r["size"]) for r in records] == keys
  assert [(a["task"], a["variant"], a["size"]) for a in _lines_of(run_dir / suite.ARTIFACTS)] == keys
  assert {r["run"]["run_id"] for r in records} == {"run-a"}
  manifest = json.loads((run_dir / suite.MANIFEST).read_text())
  started, finished, pipeline = (manifest.pop(k) for k in ("started_at", "finished_at", "pipeline"))
  assert _STAMP.match(started) and _STAMP.match(finished) and started <= finished
  ceilings = {"copy_gbps": 1.0, "read_gbps": 2.0, "matmul_tflops": 3.0,
              "matmul_bf16_tflops": None, "method": None}
  assert manifest == {
      "command": "regen --test", "git_commit": "abc1234", "device": "cpu",
      "sizes": ["large", "medium"], "variants": ["gpu", "tpu"], "tasks": ["relu", "gelu"],
      "precisions": ["float32"], "scheduler": dask_cluster.scheduler_address, "gpus": [],
      "cpu_workers": 2,
      "compile_budget_s": 30.0, "timeout_s": 120, "resumed_with": 0, "candidates": 0,
      "verdict_cache": None, "environment": to_json_dict(runfixtures.ENV), "ceilings": ceilings,
      "per_device": [{"device": "0", "environment": to_json_dict(runfixtures.ENV),
                      "ceilings": ceilings}], "resumes": []}
  # the clock: 100 s at the run's start, then 2 s a reading: the run took 12 s
  assert pipeline == {"evaluations": 4, "cached": 0, "wall_s": 12.0, "judges": 1,
                      "export_s": 4.0, "compile_s": 8.0, "judge_s": 12.0, "judge_busy": 1.0,
                      "per_judge_minute": 20.0, "compile_cache_hits": 4,
                      "compile_cache_lookups": 4}
  lines = stream.getvalue().splitlines()
  assert [line.split("] ")[1].split(" relu")[0].split(" gelu")[0] for line in lines] == [
      "1/4 0:00:02 ETA 0:00:06", "2/4 0:00:04 ETA 0:00:04", "3/4 0:00:06 ETA 0:00:02",
      "4/4 0:00:08 ETA 0:00:00"]  # 2 s an evaluation, times those left
  assert " relu gpu large: pass  0.5 ms (3.5 s gpu0)" in lines[-1]
  # every stage got the run's settings; the scratch folder is gone after the run
  settings = stand_ins.settings[0]
  scratch = settings.judge.cache_dir.parent
  assert settings == stages.RunSettings(
      device="cpu", limits=Limits(timeout_s=120, memory_bytes=1 << 30), compile_budget_s=30.0,
      command="regen --test", run_id="run-a",
      judge=JudgeConfig(device="cpu", git_commit="abc1234", dump_dir=None,
                        cache_dir=scratch / "compile-cache"))
  assert scratch.name.startswith("pallasbench-run-") and scratch.parent == pathlib.Path(
      tempfile.gettempdir()) and not scratch.exists()
  with (run_dir / suite.LOCK).open("w") as lock:  # the lock was let go
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_run_suite_on_a_gpu_dumps_and_shares_the_named_compile_cache(stand_ins, dask_cluster,
                                                                     tmp_path):
  cache = tmp_path / "cache"
  _run_suite(tmp_path / "run", _items(("relu", "gpu")),
             _options(dask_cluster, compile_cache=cache), device="gpu", git_commit=None)
  (settings,) = stand_ins.settings
  assert settings.device == "gpu" and settings.judge.device == "gpu"
  assert settings.judge.git_commit is None and settings.judge.cache_dir == cache
  assert settings.judge.dump_dir.name == "xla-dump"
  assert settings.judge.dump_dir.parent.name.startswith("pallasbench-run-")
  manifest = json.loads((tmp_path / "run" / suite.MANIFEST).read_text())
  assert (manifest["device"], manifest["git_commit"]) == ("gpu", None)


def test_run_suite_resumes_with_only_what_is_missing(stand_ins, dask_cluster, tmp_path):
  run_dir = tmp_path / "run"
  first = _items(("relu", "gpu"), ("gelu", "gpu"))
  _run_suite(run_dir, first, _options(dask_cluster))
  before = (run_dir / suite.RECORDS).read_text()
  stand_ins.events.clear()
  stream = io.StringIO()
  _run_suite(run_dir, first + _items(("silu", "gpu")), _options(dask_cluster),
             command="regen --resume", resume=True, stream=stream)
  assert {slug for _, slug in stand_ins.events} == {"silu-gpu-medium"}
  assert (run_dir / suite.RECORDS).read_text().startswith(before)
  assert [r["task"] for r in _lines_of(run_dir / suite.RECORDS)] == ["relu", "gelu", "silu"]
  assert stream.getvalue().count("\n") == 1 and "] 3/3 " in stream.getvalue()  # counts the kept 2
  manifest = json.loads((run_dir / suite.MANIFEST).read_text())
  assert manifest["command"] == "regen --test" and manifest["resumed_with"] == 0
  (resumed,) = manifest["resumes"]
  assert (resumed["command"], resumed["resumed_with"]) == ("regen --resume", 2)
  assert resumed["tasks"] == ["relu", "gelu", "silu"]
  assert manifest["finished_at"] == resumed["finished_at"]
  assert resumed["pipeline"]["evaluations"] == 1


def test_run_suite_refuses_to_resume_a_missing_folder(stand_ins, dask_cluster, tmp_path):
  with pytest.raises(FileNotFoundError) as info:
    _run_suite(tmp_path / "nowhere", _items(("relu", "gpu")), _options(dask_cluster),
               resume=True)
  assert str(info.value) == (f"--resume: {tmp_path / 'nowhere'} does not exist; leave out "
                             "--resume to start a new run there")
  assert not (tmp_path / "nowhere").exists() and stand_ins.events == []


def test_run_suite_refuses_a_folder_another_run_writes(stand_ins, dask_cluster, tmp_path):
  with (tmp_path / suite.LOCK).open("w") as held:
    fcntl.flock(held, fcntl.LOCK_EX)
    with pytest.raises(FileExistsError) as info:
      _run_suite(tmp_path, _items(("relu", "gpu")), _options(dask_cluster))
  assert str(info.value) == (f"{tmp_path} is being written by another run (its .lock is held): "
                             "wait for that run to end, or choose another folder")
  assert info.value.__cause__ is None and info.value.__suppress_context__
  assert sorted(p.name for p in tmp_path.iterdir()) == [suite.LOCK] and stand_ins.events == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_run_and_the_manifest_says_so(stand_ins, dask_cluster, tmp_path,
                                                          signum):
  """The signal arrives while the second evaluation is judged: the first is kept, the run
  ends with Interrupted, the manifest says interrupted, and the handlers are put back."""
  caught = []
  previous = signal.signal(signum, lambda *args: caught.append(args))
  stand_ins.hold[("judge", "gelu-gpu-medium")] = threading.Event()
  stand_ins.on_judge = lambda slug: (slug == "gelu-gpu-medium"
                                     and _signal_when_the_driver_waits(signum))
  try:
    with pytest.raises(suite.Interrupted) as info:
      _run_suite(tmp_path, _items(("relu", "gpu"), ("gelu", "gpu")), _options(dask_cluster))
    handler = signal.getsignal(signum)
  finally:
    signal.signal(signum, previous)
  assert str(info.value) == f"stopped by {signal.Signals(signum).name}" and caught == []
  assert handler is not None and handler.__name__ == "<lambda>"  # the test's own, restored
  assert [r["task"] for r in _lines_of(tmp_path / suite.RECORDS)] == ["relu"]
  manifest = json.loads((tmp_path / suite.MANIFEST).read_text())
  assert manifest["finished_at"] is None and _STAMP.match(manifest["interrupted_at"])
  assert manifest["pipeline"]["evaluations"] == 1
  assert not stand_ins.settings[0].judge.cache_dir.parent.exists()


def test_run_suite_outside_the_main_thread_leaves_the_signals_alone(stand_ins, dask_cluster,
                                                                   tmp_path):
  before = signal.getsignal(signal.SIGTERM)
  seen, failed = [], []

  def run():
    try:
      _run_suite(tmp_path, _items(("relu", "gpu")), _options(dask_cluster))
    except Exception as e:  # pylint: disable=broad-except
      failed.append(e)
  stand_ins.on_judge = lambda slug: seen.append(signal.getsignal(signal.SIGTERM))
  thread = threading.Thread(target=run)
  thread.start()
  thread.join(30)
  assert failed == [] and seen == [before]
  assert len(_lines_of(tmp_path / suite.RECORDS)) == 1


class _SpecClusterStandIn:
  """distributed.SpecCluster as `cluster.connect` calls it: records the call and the Dask
  config in force, and runs an in-process cluster instead of worker processes."""

  def __init__(self):
    self.calls, self.clusters = [], []

  def __call__(self, **kwargs):
    self.calls.append((kwargs, dask.config.get("distributed.scheduler.allowed-failures"),
                       dask.config.get("distributed.worker.daemon")))
    self.clusters.append(distributed.LocalCluster(
        processes=False, n_workers=1, threads_per_worker=4, dashboard_address="127.0.0.1:0",
        worker_dashboard_address="127.0.0.1:0",
        resources={stages.CPU_RESOURCE: 2, stages.GPU_RESOURCE: 1}))
    return self.clusters[-1]


@pytest.fixture
def spec_cluster(stand_ins, monkeypatch):
  """distributed.SpecCluster replaced by _SpecClusterStandIn; the stand-in stages see it."""
  stand_in = _SpecClusterStandIn()

  def started(**kwargs):
    stand_ins.cluster = stand_in(**kwargs)
    return stand_ins.cluster
  monkeypatch.setattr(cluster.distributed, "SpecCluster", started)
  return stand_in


def test_the_local_cluster_and_its_plugin(stand_ins, spec_cluster, tmp_path, monkeypatch):
  shutdowns = []
  monkeypatch.setattr(stages, "shutdown", lambda: shutdowns.append(True))
  plugins = []
  stand_ins.on_judge = lambda slug: plugins.append(sorted(distributed.get_worker().plugins))
  plan = cluster.WorkerPlan(gpus=(), cpu_workers=2)
  _run_suite(tmp_path / "run", _items(("relu", "gpu")), suite.ClusterOptions(plan=plan))
  (kwargs, allowed_failures, daemon), = spec_cluster.calls
  scratch = stand_ins.settings[0].judge.cache_dir.parent
  assert (allowed_failures, daemon) == (1, False)
  assert kwargs == {"workers": cluster.worker_specs(plan, str(scratch)),
                    "scheduler": {"cls": distributed.Scheduler, "options": {
                        "host": "127.0.0.1", "port": 0, "dashboard_address": None}},
                    "silence_logs": logging.WARNING, "name": "pallasbench"}
  assert spec_cluster.clusters[0].status.name == "closed" and shutdowns == [True]
  assert plugins == [["pallasbench-stage-processes", "shuffle"]]
  manifest = json.loads((tmp_path / "run" / suite.MANIFEST).read_text())
  assert (manifest["scheduler"], manifest["cpu_workers"]) == ("local", 2)


def test_a_stopped_local_cluster_silences_the_workers_dying(stand_ins, spec_cluster, tmp_path,
                                                           monkeypatch):
  dask_logger = logging.getLogger("distributed")
  monkeypatch.setattr(dask_logger, "level", logging.INFO)
  stand_ins.on_judge = lambda slug: _signal_when_the_driver_waits(signal.SIGTERM)
  with pytest.raises(suite.Interrupted):
    _run_suite(tmp_path, _items(("relu", "gpu")), suite.ClusterOptions(
        plan=cluster.WorkerPlan(gpus=(), cpu_workers=1)))
  assert dask_logger.level == logging.CRITICAL
  assert spec_cluster.clusters[0].status.name == "closed"


def test_the_plugin_closes_the_stage_processes(monkeypatch):
  closed = []
  monkeypatch.setattr(stages, "shutdown", lambda: closed.append(True))
  plugin = cluster._CloseStageProcesses()  # pylint: disable=protected-access
  plugin.teardown(None)
  assert closed == [True] and plugin.name == "pallasbench-stage-processes"


def test_a_fresh_run_after_a_torn_first_line_keeps_its_records(stand_ins, dask_cluster,
                                                                tmp_path):
  """The first run was killed while writing its first record; the next one, started without
  --resume (there is no record to resume), must not glue its first record to the fragment."""
  (tmp_path / suite.MANIFEST).write_text("{}")
  (tmp_path / suite.RECORDS).write_text('{"task": "relu", "va')
  _run_suite(tmp_path, _items(("relu", "gpu"), ("gelu", "gpu")), _options(dask_cluster))
  assert [r.task for r in suite.read_records(tmp_path)] == ["relu", "gelu"]
  assert len(_lines_of(tmp_path / suite.ARTIFACTS)) == 2


@pytest.fixture
def split_cluster(stand_ins):
  """A judge worker and a CPU worker, as the real plan has them (in this process)."""
  with distributed.SpecCluster(
      workers={name: {"cls": distributed.Worker, "options": {
          "name": name, "nthreads": n, "resources": resources, "host": "127.0.0.1",
          "dashboard": False}}
               for name, n, resources in (("judge-w", 1, {stages.GPU_RESOURCE: 1}),
                                          ("cpu-w", 2, {stages.CPU_RESOURCE: 2}))},
      scheduler={"cls": distributed.Scheduler, "options": {
          "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}}) as local:
    stand_ins.cluster = local
    yield local


def _listening_hosts(local) -> set[str]:
  """Where a cluster's scheduler and workers listen: each HTTP server's host, and each comm
  listener's host ('inproc' for a cluster in this process)."""
  nodes = [local.scheduler, *local.workers.values()]
  hosts = {node.http_server.address for node in nodes if getattr(node, "http_server", None)}
  for listener in (l for node in nodes for l in node.listeners):
    scheme, _, rest = listener.contact_address.partition("://")
    hosts.add("inproc" if scheme == "inproc" else rest.rsplit(":", 1)[0])
  return hosts


def test_the_test_clusters_listen_on_loopback_only(dask_cluster, split_cluster):
  """Tests talk to loopback only: a dashboard given as ":0" listens on every interface."""
  hosts = _listening_hosts(dask_cluster) | _listening_hosts(split_cluster)
  assert hosts and hosts <= {"127.0.0.1", "inproc"}, hosts


def test_each_stage_runs_on_its_workers_under_its_key(stand_ins, split_cluster, tmp_path):
  _run_suite(tmp_path / "run", _items(("relu", "gpu"), ("relu", "tpu")),
             _options(split_cluster))
  placed = sorted((name, key) for name, key, _ in stand_ins.placed)
  assert placed == [("cpu-w", f"{stage}-relu-{v}-medium") for stage in ("compile", "export")
                    for v in ("gpu", "tpu")] + [("judge-w", "judge-relu-gpu-medium"),
                                                ("judge-w", "judge-relu-tpu-medium")]
  settings = {s for *_, s in stand_ins.placed}
  assert len(settings) == 1 and next(iter(settings)).run_id == "run"


def test_a_failure_before_any_judge_reported_names_the_runs_commit(stand_ins, dask_cluster,
                                                                   tmp_path):
  stand_ins.raises["relu-gpu-medium"] = RuntimeError("x")
  _run_suite(tmp_path, _items(("relu", "gpu")), _options(dask_cluster), git_commit="f00d")
  (record,) = suite.read_records(tmp_path)
  assert record.environment == environment.unmeasured("cpu", "f00d")


def test_a_scratch_folder_removed_under_the_run_does_not_fail_it(stand_ins, dask_cluster,
                                                                 tmp_path):
  """A temporary-file cleaner may remove the run's scratch folder: the run still ends and
  says so in its manifest."""
  stand_ins.on_judge = lambda slug: shutil.rmtree(stand_ins.settings[-1].judge.cache_dir.parent)
  _run_suite(tmp_path, _items(("relu", "gpu")), _options(dask_cluster))
  assert json.loads((tmp_path / suite.MANIFEST).read_text())["finished_at"]
  assert len(suite.read_records(tmp_path)) == 1

# ---------------------------------------------------------------------------------------------
# population runs: the suite run of a population, and what it found (run_suite stood in)


def _candidates(*names, task="relu", kind=None):
  return [Candidate(id=f"{task}/{n}", task=task, source=f"# {n}\n", kind=kind) for n in names]


def test_work_items_are_one_candidate_evaluation_each():
  a, b = _candidates("a", "b")
  options = pop_run.EvalOptions(num_seeds=2)
  items = pop_run.work_items([a, b], "small", options)
  assert items == [
      driver.WorkItem(task="relu", variant="candidate", size="small", source="# a\n",
                      filename="relu/a.py", options=options, candidate="relu/a"),
      driver.WorkItem(task="relu", variant="candidate", size="small", source="# b\n",
                      filename="relu/b.py", options=options, candidate="relu/b")]


def _population_folder(run_dir, candidates, sizes=None):
  run_dir.mkdir(parents=True)
  (run_dir / CANDIDATES).write_text(to_jsonl(candidates))
  if sizes is not None:
    (run_dir / suite.MANIFEST).write_text(json.dumps({"sizes": sizes}))
  return run_dir


def test_a_resumed_run_continues_its_own_population(tmp_path):
  kept = _candidates("a", "b")
  run_dir = _population_folder(tmp_path / "run", kept, sizes=["small"])
  assert pop_run._resumed_population(run_dir, None, "small") == kept
  assert pop_run._resumed_population(run_dir, list(kept), "small") == kept
  assert pop_run._resumed_population(run_dir, tuple(kept), "small") == kept
  bare = _population_folder(tmp_path / "bare", kept)  # no manifest yet: any size
  assert pop_run._resumed_population(bare, None, "large") == kept
  (bare / suite.MANIFEST).write_text(json.dumps({"command": "x"}))  # no sizes in it
  assert pop_run._resumed_population(bare, None, "large") == kept
  cases = [
      (tmp_path / "absent", None, "small",
       f"--resume: {tmp_path / 'absent'} does not exist; leave out --resume to start a new run "
       "there"),
      (tmp_path, None, "small",
       f"--resume: {tmp_path} has no candidates.jsonl; it is not a population run"),
      (run_dir, _candidates("a"), "small",
       f"--resume: {run_dir} holds another population (2 candidates in its candidates.jsonl); "
       "resume without --candidates, or start a new run folder for this one"),
      (run_dir, None, "medium",
       f"--resume: {run_dir} was measured at small, not medium; pass --size small"),
  ]
  for folder, candidates, size, message in cases:
    with pytest.raises(PopulationError) as info:
      pop_run._resumed_population(folder, candidates, size)
    assert str(info.value) == message
  (tmp_path / "afile").write_text("")
  with pytest.raises(PopulationError, match="does not exist"):
    pop_run._resumed_population(tmp_path / "afile", None, "small")
  two = _population_folder(tmp_path / "two", kept, sizes=["large", "small"])
  with pytest.raises(PopulationError) as info:
    pop_run._resumed_population(two, None, "small")
  assert str(info.value).endswith("was measured at large, small, not small; pass --size large")


@pytest.fixture
def suite_calls(monkeypatch):
  calls = []

  def run_suite(items, run_dir, **kwargs):
    calls.append((items, run_dir, kwargs))
    return run_dir
  monkeypatch.setattr(pop_run, "run_suite", run_suite)
  return calls


def test_evaluate_population_hands_the_candidates_to_the_suite(tmp_path, suite_calls):
  population = _candidates("a", "b")
  limits, cache, stream = Limits(timeout_s=5.0, memory_bytes=1), object(), io.StringIO()
  cluster_options = suite.ClusterOptions(plan=None, compile_budget_s=1.0)
  kwargs = dict(size="small", device="cpu", options=pop_run.EvalOptions(), limits=limits,
                cluster_options=cluster_options, git_commit="abc", command="cmd", cache=cache)
  assert pop_run.evaluate_population(population, tmp_path / "new", stream=stream,
                                     **kwargs) == tmp_path / "new"
  ((items, run_dir, got),) = suite_calls
  assert items == pop_run.work_items(population, "small", pop_run.EvalOptions())
  assert run_dir == tmp_path / "new"
  assert got == {"device": "cpu", "limits": limits, "git_commit": "abc", "command": "cmd",
                 "cluster_options": cluster_options, "resume": False, "stream": stream,
                 "cache": cache, "inputs": {CANDIDATES: to_jsonl(population)}}
  for empty in (None, []):
    with pytest.raises(PopulationError) as info:
      pop_run.evaluate_population(empty, tmp_path / "x", **kwargs)
    assert str(info.value) == "no candidates: pass --candidates FILE_OR_FOLDER"
  stored = _population_folder(tmp_path / "old", population, sizes=["small"])
  pop_run.evaluate_population(None, stored, resume=True, **kwargs)
  (items, run_dir, got) = suite_calls[-1]
  assert [i.candidate for i in items] == ["relu/a", "relu/b"] and got["resume"] is True
  assert got["stream"] is sys.stderr and got["inputs"] == {CANDIDATES: to_jsonl(population)}
  with pytest.raises(PopulationError, match="holds another population"):
    pop_run.evaluate_population(population[:1], stored, resume=True, **kwargs)
  assert len(suite_calls) == 2


def test_evaluate_as_asked_fills_in_the_defaults(tmp_path, monkeypatch):
  calls = []
  monkeypatch.setattr(pop_run, "evaluate_population",
                      lambda *a, **kw: calls.append((a, kw)))
  monkeypatch.setattr(pop_run, "summarize", lambda run_dir: ("summary", run_dir))
  monkeypatch.setattr(pop_run.environment, "git_commit", lambda: "head")
  monkeypatch.setattr(pop_run.run_options, "limits",
                      lambda args, device: ("limits", args.name, device))
  monkeypatch.setattr(pop_run.run_options, "cluster_options",
                      lambda args, device: ("cluster", args.name, device))
  args = types.SimpleNamespace(size=None, git_commit=None, name="the command line")
  got = pop_run.evaluate_as_asked(args, "gpu", ["c"], tmp_path, command="cmd", cache="cache",
                                  resume=True)
  assert got == ("summary", tmp_path)
  assert calls == [((["c"], tmp_path), {
      "size": "medium", "device": "gpu", "options": pop_run.default_options("gpu"),
      "limits": ("limits", "the command line", "gpu"),
      "cluster_options": ("cluster", "the command line", "gpu"), "git_commit": "head",
      "command": "cmd", "cache": "cache", "resume": True})]
  pop_run.evaluate_as_asked(args, "cpu", None, tmp_path, command="c", cache=None, resume=False)
  assert calls[-1][1]["size"] == "small" and calls[-1][1]["options"] == pop_run.default_options(
      "cpu")
  args = types.SimpleNamespace(size="large", git_commit="mine", name="x")
  pop_run.evaluate_as_asked(args, "cpu", None, tmp_path, command="c", cache=None, resume=False)
  assert (calls[-1][1]["size"], calls[-1][1]["git_commit"]) == ("large", "mine")


def _population_record(trees, candidate, status=Status.PASS, cached=False, device_kind=None):
  record = runfixtures.record(trees, candidate.task, "candidate", "small",
                              kernel_sha256=candidate.sha256, candidate=candidate.id,
                              status=status, cached=cached)
  if device_kind:
    record = dataclasses.replace(record, environment=dataclasses.replace(
        record.environment, device_kind=device_kind))
  return record


def test_summarize_counts_by_status_and_kind_and_names_holes(tmp_path):
  trees = runfixtures.write_tree(tmp_path / "src")
  tuning = _candidates("t1", "t2", kind="tuning")
  cheats = _candidates("c1", "c2", "c3", kind="cheat")
  broken = _candidates("b1", kind="broken")
  plain = _candidates("p")
  population = [*tuning, *cheats, *broken, *plain, *_candidates("unjudged")]
  run_dir = _population_folder(tmp_path / "run", population)
  records = [_population_record(trees, tuning[0], cached=True),
             _population_record(trees, tuning[1], Status.INCORRECT),
             _population_record(trees, cheats[2]),
             _population_record(trees, cheats[1], Status.REJECTED),
             _population_record(trees, cheats[0]),
             _population_record(trees, broken[0], Status.ERROR, cached=True),
             _population_record(trees, plain[0], Status.TIMEOUT, device_kind="cpu")]
  (run_dir / suite.RECORDS).write_text("".join(_line(r) + "\n" for r in records))
  (run_dir / suite.MANIFEST).write_text(json.dumps({
      "pipeline": {"evaluations": 4, "wall_s": 120.0, "judges": 2},
      "resumes": [{"pipeline": {"evaluations": 1, "wall_s": 30.0}}, {}]}))
  summary = pop_run.summarize(run_dir)
  assert summary == pop_run.Summary(
      candidates=8, records=7, cached=2,
      by_status={"pass": 3, "incorrect": 1, "rejected": 1, "error": 1, "timeout": 1},
      by_kind={"broken": {"error": 1}, "cheat": {"pass": 2, "rejected": 1},
               "tuning": {"pass": 1, "incorrect": 1}, "unknown": {"timeout": 1}},
      holes={"broken": (), "cheat": ("relu/c1", "relu/c3")},
      measured=5, judge_minutes=4.5, wall_s=150.0, hardware="NVIDIA H200, cpu")
  assert list(summary.by_status) == ["pass", "incorrect", "rejected", "error", "timeout"]
  assert list(summary.by_kind) == ["broken", "cheat", "tuning", "unknown"]
  assert summary.per_judge_minute == pytest.approx(5 / 4.5)
  assert summary.describe() == (
      "7 of 8 candidates judged on NVIDIA H200, cpu: 5 measured, 2 from the verdict cache\n"
      "  throughput: 5 evaluations in 150 s, 4.5 judge-minutes = 1.11 per judge-minute\n"
      "  status: pass 3, incorrect 1, rejected 1, error 1, timeout 1\n"
      "  broken: error 1\n"
      "  cheat: pass 2, rejected 1\n"
      "  tuning: pass 1, incorrect 1\n"
      "  unknown: timeout 1\n"
      "  broken that passed: none\n"
      "  cheat that passed: relu/c1, relu/c3")


def test_summary_of_a_run_that_judged_nothing(tmp_path):
  run_dir = _population_folder(tmp_path / "run", _candidates("a", kind="cheat"))
  (run_dir / suite.MANIFEST).write_text("{}")
  summary = pop_run.summarize(run_dir)
  assert (summary.records, summary.cached, summary.by_status, summary.by_kind, summary.holes,
          summary.measured, summary.judge_minutes, summary.wall_s, summary.hardware) == (
      0, 0, {}, {}, {"broken": (), "cheat": ()}, 0, 0.0, 0.0, "nothing")
  assert summary.per_judge_minute is None
  assert summary.describe() == (
      "0 of 1 candidates judged on nothing: 0 measured, 0 from the verdict cache\n"
      "  throughput: 0 evaluations in 0 s, 0.0 judge-minutes = - per judge-minute\n"
      "  status: none")

# ---------------------------------------------------------------------------------------------
# suite: a run's inputs and the verdict cache, through the scheduler (stand-in stages)


def _judge_environment_stand_in(settings):
  with _STAGE.lock:
    _STAGE.events.append(("environment", "environment"))
    _STAGE.placed.append(("environment", distributed.get_worker().name, settings))
  if "environment" in _STAGE.raises:
    raise _STAGE.raises["environment"]
  return runfixtures.ENV


def _judge_of_this_version(item, exported, notes, settings):
  record, artifacts = _judge_stand_in(item, exported, notes, settings)
  return dataclasses.replace(record, judge_version=JUDGE_VERSION), artifacts


@pytest.fixture
def cached_stand_ins(stand_ins, monkeypatch):
  monkeypatch.setattr(stages, "judge_environment", _judge_environment_stand_in)
  monkeypatch.setattr(stages, "judge_stage", _judge_of_this_version)
  return stand_ins


def _judged(state):
  return [slug for stage, slug in state.events if stage in ("judge", "environment")]


def test_a_new_run_writes_its_inputs_and_a_resumed_one_keeps_its_own(stand_ins, dask_cluster,
                                                                      tmp_path):
  run_dir = tmp_path / "run"
  _run_suite(run_dir, _items(("relu", "gpu")), _options(dask_cluster),
             inputs={"candidates.jsonl": "first\n", "notes.txt": "n\n"})
  assert (run_dir / "candidates.jsonl").read_text() == "first\n"
  assert (run_dir / "notes.txt").read_text() == "n\n"
  _run_suite(run_dir, _items(("relu", "gpu"), ("gelu", "gpu")), _options(dask_cluster),
             resume=True, inputs={"candidates.jsonl": "second\n"})
  assert (run_dir / "candidates.jsonl").read_text() == "first\n"
  _run_suite(tmp_path / "plain", _items(("relu", "gpu")), _options(dask_cluster))
  assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == [
      ".lock", suite.ARTIFACTS, suite.MANIFEST, suite.RECORDS]


def test_run_suite_reuses_the_verdict_cache_and_fills_it(cached_stand_ins, dask_cluster,
                                                         tmp_path):
  cache = verdicts.VerdictCache(tmp_path / "cache")
  items = _items(("relu", "gpu"), ("gelu", "gpu"))
  _run_suite(tmp_path / "a", items, _options(dask_cluster), cache=cache, device="gpu")
  assert _judged(cached_stand_ins) == ["environment", "relu-gpu-medium", "gelu-gpu-medium"]
  (asked,) = [p[2] for p in cached_stand_ins.placed if p[0] == "environment"]
  assert (asked.run_id, asked.device, asked.judge.device) == ("a", "gpu", "gpu")
  first = _lines_of(tmp_path / "a" / suite.RECORDS)
  assert [r["cached"] for r in first] == [False, False]
  assert len(list(cache.folder.rglob("*.json"))) == 2
  manifest = json.loads((tmp_path / "a" / suite.MANIFEST).read_text())
  assert manifest["verdict_cache"] == str(cache.folder)
  cached_stand_ins.events.clear()
  _run_suite(tmp_path / "b", items + _items(("silu", "gpu")), _options(dask_cluster),
             cache=cache, device="gpu")
  assert _judged(cached_stand_ins) == ["environment", "silu-gpu-medium"]
  second = _lines_of(tmp_path / "b" / suite.RECORDS)
  assert [(r["task"], r["cached"]) for r in second] == [
      ("relu", True), ("gelu", True), ("silu", False)]
  manifest = json.loads((tmp_path / "b" / suite.MANIFEST).read_text())
  assert manifest["pipeline"]["evaluations"] == 1  # the cached records were measured elsewhere
  cached_stand_ins.events.clear()
  _run_suite(tmp_path / "b", items, _options(dask_cluster), cache=cache, device="gpu",
             resume=True)
  assert _judged(cached_stand_ins) == []  # nothing left to do: no judge is asked


def test_without_a_judge_environment_the_cache_is_only_written(cached_stand_ins, dask_cluster,
                                                               tmp_path, caplog):
  cache = verdicts.VerdictCache(tmp_path / "cache")
  items = _items(("relu", "gpu"))
  _run_suite(tmp_path / "a", items, _options(dask_cluster), cache=cache)
  cached_stand_ins.events.clear()
  cached_stand_ins.raises["environment"] = RuntimeError("no GPU worker")
  with caplog.at_level(logging.WARNING, logger=suite.logger.name):
    _run_suite(tmp_path / "b", items, _options(dask_cluster), cache=cache)
  assert _judged(cached_stand_ins) == ["environment", "relu-gpu-medium"]
  assert [r.getMessage() for r in caplog.records if r.name == suite.logger.name] == [
      "no judge reported its machine (RuntimeError: no GPU worker); the verdict cache is not "
      "consulted, only written"]
  assert [r["cached"] for r in _lines_of(tmp_path / "b" / suite.RECORDS)] == [False]
  assert json.loads((tmp_path / "b" / suite.MANIFEST).read_text())["verdict_cache"] == str(
      cache.folder)


def test_judge_environment_starts_the_judge_and_reports_its_machine(processes, monkeypatch):
  machine = dataclasses.replace(runfixtures.ENV, device_kind="NVIDIA B200")

  def start(config):
    process = _FakeProcess(config, [])
    process.environment = machine
    processes.started.append(process)
    return process
  monkeypatch.setattr(stages, "JudgeWorker", start)
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
  assert stages.judge_environment(SETTINGS) == machine
  (judge,) = processes.started
  assert judge.config == dataclasses.replace(SETTINGS.judge, role="judge", run=RunIdentity(
      command="regen", run_id="run-1", gpu_index=0))
  assert stages.judge_environment(SETTINGS) == machine and len(processes.started) == 1
  assert stages._process(stages.JUDGE, SETTINGS.judge) is judge  # pylint: disable=protected-access


def test_pipeline_report_rounds_the_rate_to_hundredths():
  record = _record(stages=StageTimes(export_s=1.0, compile_s=1.0, judge_s=2.0,
                                     compile_cache_hit=True))
  report = suite._pipeline_report([record] * 7, 180.0, 2)  # pylint: disable=protected-access
  assert report["per_judge_minute"] == 1.17  # 7 evaluations / 6 judge-minutes


def test_a_record_of_a_candidate_the_population_lacks_counts_as_unknown(tmp_path):
  trees = runfixtures.write_tree(tmp_path / "src")
  (known,) = _candidates("a", kind="cheat")
  (stray,) = _candidates("stray", kind="cheat")
  run_dir = _population_folder(tmp_path / "run", [known])
  (run_dir / suite.RECORDS).write_text(_line(_population_record(trees, stray)) + "\n")
  (run_dir / suite.MANIFEST).write_text("{}")
  summary = pop_run.summarize(run_dir)
  assert summary.by_kind == {"unknown": {"pass": 1}}
  assert summary.holes == {"broken": (), "cheat": ()}


def test_every_default_compile_budget_is_the_budgets_tables():
  """The suite's, the run options' and the tuner's default compile budgets are read from one
  table: a change there reaches all three (no second copy of the number to drift)."""
  table = {device: budgets.STAGE_BUDGETS_S[device][budgets.COMPILE] for device in ("gpu", "cpu")}
  assert suite.ClusterOptions(plan=None).compile_budget_s == table["gpu"]
  assert autotune.DEFAULT_COMPILE_BUDGET_S == table["gpu"]
  assert run_options.DEFAULT_COMPILE_BUDGET_S == table


# ---------------------------------------------------------------------------------------------
# judged again on its own program (red team round 20, finding 1)

def test_an_item_that_carries_its_export_is_not_exported_again(monkeypatch):
  def never(*args, **kwargs):
    raise AssertionError("the exporter ran again")
  monkeypatch.setattr(driver.sandbox, "run_sandboxed", never)
  first = _outcome(wall_s=0.75)
  item = dataclasses.replace(ITEM, exported=first)
  assert driver.export(item, "cpu", Limits(timeout_s=60.0, memory_bytes=1 << 30)) is first
  assert item == ITEM and item.kernel_sha256 == ITEM.kernel_sha256  # the same item otherwise


def _finished(outcome):
  return types.SimpleNamespace(status="finished", result=lambda: outcome)


@pytest.mark.parametrize("status, error_type, failure, carries", [
    (Status.TIMEOUT, ErrorType.TIMEOUT, None, True),    # the load may have decided it
    (Status.ERROR, ErrorType.CRASH, None, True),
    (Status.PASS, None, None, False),                    # a verdict: never judged again
    (Status.INCORRECT, None, None, False),
    (Status.ERROR, ErrorType.CRASH, "crash", False)])   # the exporter died: exported again
def test_a_record_the_load_may_have_decided_comes_back_with_the_program_its_judge_ran(
    status, error_type, failure, carries):
  outcome = dataclasses.replace(_outcome(), failure=failure)
  record = _record(status=status, error_type=error_type, correct=status is Status.PASS,
                   reasons=() if status is Status.PASS else ("x",))
  item = suite._with_its_export(ITEM, record, _finished(outcome))  # pylint: disable=protected-access
  assert (item.exported is outcome) is carries


def test_schedule_yields_a_timed_out_item_with_its_export(stand_ins, dask_cluster, monkeypatch):
  def export(item, settings):  # pylint: disable=unused-argument
    return _outcome(wall_s=0.5)

  def judge(item, exported, notes, settings):  # pylint: disable=unused-argument
    record = _record(status=Status.TIMEOUT, error_type=ErrorType.TIMEOUT, correct=False,
                     reasons=("the judge found no verdict within the 60 s limit",))
    record = dataclasses.replace(record, task=item.task, variant=item.variant, size=item.size,
                                 kernel_sha256=item.kernel_sha256)
    return record, driver.empty_artifacts(item)
  monkeypatch.setattr(stages, "export_stage", export)
  monkeypatch.setattr(stages, "compile_stage", lambda item, exported, settings: {})
  monkeypatch.setattr(stages, "judge_stage", judge)
  with distributed.Client(dask_cluster.scheduler_address) as client:
    ((item, record, _),) = suite._schedule(client, _items(("relu", "gpu")), _settings(),  # pylint: disable=protected-access
                                          None)
  assert record.status is Status.TIMEOUT and item.exported == _outcome(wall_s=0.5)


def test_the_driver_s_secret_reaches_the_judge():
  """The secret the verdict cache drew for an item is the judge's (its timing draws), and an
  item without one leaves the judge to draw its own."""
  assert driver.judge_item(dataclasses.replace(ITEM, secret=5), _outcome()).secret == 5
  assert driver.judge_item(ITEM, _outcome()).secret is None
