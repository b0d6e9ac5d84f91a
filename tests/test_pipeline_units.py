"""The pipeline's pieces without processes: the cluster plan, the stages' bookkeeping, the run
folder's reconciliation and manifest. Fast, so that mutation testing can use them
(`tests/test_suite.py` runs the real thing)."""

import dataclasses
import json
import types

import pytest

from pallasbench_dataset.evaluation import cluster, driver, protocol, stages, suite
from pallasbench_dataset.evaluation.judge import Precompiled
from pallasbench_dataset.evaluation.judge_process import JudgeConfig, Limits
from pallasbench_dataset.schema import (
    Artifacts, CompileProfile, ErrorType, RunInfo, StageTimes, Status, to_json_dict)

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
  assert all(spec["cls"] is cluster.distributed.Nanny for spec in specs.values())


def test_worker_specs_on_a_cpu_host():
  specs = cluster.worker_specs(cluster.WorkerPlan(gpus=(), cpu_workers=1), "/s")
  assert list(specs) == ["judge-cpu", "cpu-0"]
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
  """A compiler or judge process: answers from a list, records what it was sent."""

  def __init__(self, config, answers):
    self.config, self.answers, self.sent, self.closed = config, list(answers), [], False
    self.environment = runfixtures.ENV
    self.ceilings = {"copy_gbps": 4000.0, "read_gbps": 4500.0, "matmul_tflops": 400.0,
                     "bandwidth_gbps": 4500.0, "method": "cupti"}

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
  assert notes["edge"].message == ("the compile (XLA, Triton, ptxas) did not finish within the "
                                   "60 s compile budget; it was killed")
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


def test_processes_are_kept_while_alive_and_judges_reuse_the_first_ceilings(processes):
  first = stages._process(stages.JUDGE, SETTINGS.judge)  # pylint: disable=protected-access
  assert stages._process(stages.JUDGE, SETTINGS.judge) is first  # pylint: disable=protected-access
  assert first.config.role == "judge" and first.config.ceilings is None
  first.closed = True  # died between tasks
  second = stages._process(stages.JUDGE, SETTINGS.judge)  # pylint: disable=protected-access
  assert second is not first and second.config.ceilings == first.ceilings
  compiler = stages._process(stages.COMPILE, SETTINGS.judge)  # pylint: disable=protected-access
  assert compiler.config.role == "compiler" and compiler.config.ceilings is None
  stages.shutdown()
  assert second.closed and compiler.closed and stages._PROCESSES == {}  # pylint: disable=protected-access


def _record(**overrides):
  trees = types.SimpleNamespace(source=lambda v, t: "x")
  return runfixtures.record(trees, "relu", kernel_sha256="0" * 64, **overrides)


def test_judge_stage_adds_the_run_and_keeps_a_healthy_judge(processes, monkeypatch):
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
  artifacts = driver.empty_artifacts(ITEM)
  processes.answers += [("result", (_record(), artifacts))]
  record, got = stages.judge_stage(ITEM, _outcome(), {}, SETTINGS)
  assert got is artifacts
  assert record.run == RunInfo(command="regen", run_id="run-1", gpu_index=1,
                               ceiling_copy_gbps=4000.0, ceiling_read_gbps=4500.0,
                               ceiling_matmul_tflops=400.0)
  (judge,) = processes.started
  assert not judge.closed and judge.sent[0][0].precompiled == {}


@pytest.mark.parametrize("error_type, compiled, retired", [
    (ErrorType.RUNTIME, True, True), (ErrorType.OUT_OF_MEMORY, True, True),
    (ErrorType.OUT_OF_MEMORY, False, False), (ErrorType.COMPILE, False, False),
    (ErrorType.LOWERING, False, False), (ErrorType.HARNESS, False, True),
    (ErrorType.TIMEOUT, False, False)])
def test_judge_is_replaced_only_when_its_device_is_suspect(processes, error_type, compiled,
                                                           retired):
  profile = runfixtures.record(types.SimpleNamespace(), "relu", kernel_sha256="0" * 64).compile
  record = _record(status=Status.ERROR, error_type=error_type, error="boom",
                   compile=dataclasses.replace(profile, compile_s=0.5 if compiled else None))
  assert driver.device_suspect(record) is retired
  processes.answers += [("result", (record, driver.empty_artifacts(ITEM)))]
  stages.judge_stage(ITEM, _outcome(), {}, SETTINGS)
  assert processes.started[0].closed is retired


def test_a_judge_that_never_answered_is_a_record_with_empty_artifacts(processes):
  processes.answers += [("timeout", "the judge found no verdict within the 300 s limit")]
  record, artifacts = stages.judge_stage(ITEM, _outcome(wall_s=2.0), {}, SETTINGS)
  assert record.status is Status.TIMEOUT and record.error_type is ErrorType.TIMEOUT
  assert record.error == "the judge found no verdict within the 300 s limit"
  assert record.eval_wall_s >= 2.0 and record.run.run_id == "run-1"
  assert artifacts == Artifacts(task="relu", variant="gpu", size="medium", jaxpr=None,
                                stablehlo=None, triton_ir=None, ptx=None)
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
  assert suite.reconcile(tmp_path) == {("relu", "gpu", "medium"), ("silu", "gpu", "medium")}
  records = [json.loads(line) for line in (tmp_path / suite.RECORDS).read_text().splitlines()]
  artifacts = [json.loads(line) for line in (tmp_path / suite.ARTIFACTS).read_text().splitlines()]
  assert [(r["task"], r["variant"]) for r in records] == [("relu", "gpu"), ("silu", "gpu")]
  assert [(a["task"], a["variant"]) for a in artifacts] == [("relu", "gpu"), ("silu", "gpu")]
  assert not list(tmp_path.glob("*.tmp"))


def test_reconcile_leaves_a_clean_folder_untouched(tmp_path):
  _write(tmp_path, [_record()], [_artifacts("relu")])
  before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
  assert suite.reconcile(tmp_path) == {("relu", "gpu", "medium")}
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
  assert data["ceilings"] == {"copy_gbps": 1.0, "read_gbps": 2.0, "matmul_tflops": 3.0}
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
  assert len(log.lines) == 1 and log.lines[0].startswith(f"{path} line 2 is not valid (")
  assert log.lines[0].endswith("); it will be re-measured")


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
  assert suite.reconcile(tmp_path) == {("relu", "gpu", "medium")}
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
  report = suite._pipeline_report([record], 4.04, 1)  # pylint: disable=protected-access
  assert (report["wall_s"], report["export_s"], report["compile_s"], report["judge_busy"]) == (
      4.0, 1.3, 0.0, 0.495)


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
  with pytest.raises(FileNotFoundError, match="holds 0 records but no manifest.json"):
    suite._check_resumable(tmp_path, resume=True)  # pylint: disable=protected-access
  _write(tmp_path, [_record()], [_artifacts("relu")])
  with pytest.raises(FileExistsError, match="already holds 1 records: pass --resume"):
    suite._check_resumable(tmp_path, resume=False)  # pylint: disable=protected-access
  with pytest.raises(FileNotFoundError, match="holds 1 records but no manifest.json"):
    suite._check_resumable(tmp_path, resume=True)  # pylint: disable=protected-access
  (tmp_path / suite.MANIFEST).write_text("{}")
  assert suite._check_resumable(tmp_path, resume=True) == {("relu", "gpu", "medium")}  # pylint: disable=protected-access
  assert [r.task for r in suite.read_records(tmp_path)] == ["relu"]
  assert suite.read_records(tmp_path / "absent") == []


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
  assert stream.getvalue() == ("[############............] 1/2 0:00:00 relu gpu medium: pass  "
                               "0.5 ms (3.5 s gpu1)\n")  # no throughput: no time has passed


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
