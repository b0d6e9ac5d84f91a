"""The three stages of an evaluation, as functions that Dask workers run.

    export  (a CPU worker)  the sandboxed exporter: candidate source -> artifacts (bytes)
    compile (a CPU worker)  each artifact compiled, within a budget, into the run's
                            persistent compilation cache
    judge   (a GPU worker)  the sealed judge: loads from the cache, checks, times -> record

Workers are trusted: none imports candidate code. A worker keeps its compiler or judge
process between tasks (starting CUDA and measuring the ceilings costs seconds) and replaces
it after any failure. Those processes die with the worker (PR_SET_PDEATHSIG), and the
worker dies with the driver's cluster, so a killed driver leaves nothing running.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Final

from pallasbench_dataset.evaluation.pipeline import driver
from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.judge.compile_profile import compile_progress
from pallasbench_dataset.evaluation.judge.core import CompileItem, Precompiled
from pallasbench_dataset.evaluation.judge.process import JudgeConfig, JudgeWorker, Limits
from pallasbench_dataset.evaluation.protocol import ExportOutcome
from pallasbench_dataset.schema import Artifacts, Environment, EvalRecord, RunIdentity
from pallasbench_dataset.tasks import Size

COMPILE: Final = "compile"
JUDGE: Final = "judge"
# Worker resources: tasks of a stage run only on workers that declare its resource.
CPU_RESOURCE: Final = "cpu"
GPU_RESOURCE: Final = "judge"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
  """What every stage of one run shares."""
  device: str
  limits: Limits               # per export and per judge evaluation
  compile_budget_s: float      # per artifact in the compile stage
  judge: JudgeConfig           # the judge's config; compilers use it with role "compiler"
  command: str
  run_id: str


# This worker's long-lived processes, by role, and the ceilings its judge measured.
_PROCESSES: dict[str, JudgeWorker] = {}
_CEILINGS: dict[str, dict] = {}


def _process(role: str, settings: RunSettings) -> JudgeWorker:
  """This worker's process of `role`, started when none runs. A judge is told the run, which
  it names on its records with the ceilings it measured."""
  worker = _PROCESSES.get(role)
  if worker is not None and worker.alive():
    return worker
  config = dataclasses.replace(settings.judge, role="compiler")
  if role == JUDGE:
    config = dataclasses.replace(settings.judge, role="judge", run=RunIdentity(
        command=settings.command, run_id=settings.run_id, gpu_index=_gpu_index()))
  if role == JUDGE and JUDGE in _CEILINGS:  # a replacement judge reuses the first one's ceilings
    config = dataclasses.replace(config, ceilings=_CEILINGS[JUDGE])
  worker = JudgeWorker(config)
  if role == JUDGE:
    _CEILINGS.setdefault(JUDGE, worker.ceilings)
  _PROCESSES[role] = worker
  return worker


def _retire(role: str) -> None:
  worker = _PROCESSES.pop(role, None)
  if worker is not None:
    worker.close()


def export_stage(item: driver.WorkItem, settings: RunSettings) -> ExportOutcome:
  return driver.export(item, settings.device, settings.limits)


def _compile_sizes(item: driver.WorkItem, exported: ExportOutcome, platform: str):
  report = exported.report
  if report is None or report.load_error:
    return
  sizes = [item.size]
  if item.options.checks_edge(item.size):
    sizes.append(Size.EDGE.value)
  for size in sizes:
    entry = report.size(size)
    if entry is not None and platform in entry.artifacts:
      yield size, entry.artifacts[platform]


@contextlib.contextmanager
def _counted(folder: pathlib.Path | None) -> Iterator[Callable[[], int | None]]:
  """Marks a compile as running in `folder` (shared by the run's compile workers) while the
  block runs; yields a function that, after the block, gives how many compiles ran while
  this one did, itself included: those still running at its end, and those that finished
  after it started (each finished compile logs its end). None without a folder."""
  if folder is None:
    yield lambda: None
    return
  folder.mkdir(parents=True, exist_ok=True)
  start = time.time()
  marker = folder / f"running-{os.getpid()}-{uuid.uuid4().hex}"
  marker.touch()
  count: list[int] = []
  try:
    yield lambda: count[0] if count else None
  finally:
    marker.unlink(missing_ok=True)
    log = folder / "finished.log"
    ends = [float(t) for t in log.read_text().split()] if log.is_file() else []
    count.append(1 + sum(1 for _ in folder.glob("running-*")) + sum(e >= start for e in ends))
    with log.open("a", encoding="ascii") as f:
      f.write(f"{time.time()!r}\n")


def _compiling_folder(settings: RunSettings) -> pathlib.Path | None:
  """Where the run's compile workers mark their running compiles: beside the shared cache."""
  cache = settings.judge.cache_dir
  return cache.with_name(cache.name + ".compiling") if cache is not None else None


def compile_stage(item: driver.WorkItem, exported: ExportOutcome,
                  settings: RunSettings) -> dict[str, Precompiled]:
  """Compiles the item's artifacts (evaluated size, edge size) into the run's cache; each
  compile has the budget on its own, and a compile that runs out kills its process. Each note
  says how many compiles ran at once (the run's compile workers share the machine)."""
  platform = "cuda" if settings.device == "gpu" else "cpu"
  notes = {}
  budget = Limits(timeout_s=settings.compile_budget_s, memory_bytes=settings.limits.memory_bytes)
  for size, blob in _compile_sizes(item, exported, platform):
    start = time.monotonic()
    compiler = _process(COMPILE, settings)
    with _counted(_compiling_folder(settings)) as concurrent:
      kind, payload = compiler.run(CompileItem(task=item.task, size=size, blob=blob,
                                                 precision=item.precision), budget)
    wall_s = time.monotonic() - start
    if kind == "result":
      notes[size] = dataclasses.replace(payload, wall_s=wall_s, concurrent=concurrent())
      continue
    if kind in ("timeout", "over_budget"):  # over the stage's budget, or one of its parts'
      message = payload if kind == "over_budget" else _timeout_message(budget.timeout_s, compiler)
      notes[size] = Precompiled(outcome="timeout", wall_s=wall_s, concurrent=concurrent(),
                                message=message)
    else:  # the compiler died or broke: the judge compiles it itself, within its own limit
      notes[size] = Precompiled(outcome="skipped", wall_s=wall_s, message=str(payload))
    _retire(COMPILE)  # after the message: retiring removes the compiler's dump folder
  return notes


def _timeout_message(budget_s: float, compiler: JudgeWorker) -> str:
  """Which step of the compile ran out of the budget, read from what the killed compiler's
  XLA dump folder holds."""
  folder = compiler.dump_folder
  where = compile_progress(folder) if folder is not None else None
  return budgets.compile_overrun(budget_s, where)


def _gpu_index() -> int | None:
  visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
  return int(visible) if visible.isdigit() else None


def judge_stage(item: driver.WorkItem, exported: ExportOutcome, notes: dict[str, Precompiled],
                settings: RunSettings) -> tuple[EvalRecord, Artifacts]:
  """The verdict on one item from this worker's judge; every failure is a record. The judge
  builds the record whole, the run it belongs to included; the record of an evaluation it
  never reported names the run as the judge does."""
  start = time.monotonic()
  judge = _process(JUDGE, settings)
  kind, payload = judge.run(driver.judge_item(item, exported, notes), settings.limits)
  if kind == "result":
    record, artifacts = payload
    if driver.device_suspect(record):
      _retire(JUDGE)
  else:
    _retire(JUDGE)
    record = driver.failure_record(item, judge.environment, judge.run_info, kind, payload,
                                   time.monotonic() - start + exported.wall_s)
    artifacts = driver.empty_artifacts(item)
  return record, artifacts


def judge_environment(settings: RunSettings) -> Environment:
  """The machine this worker's judge records on every record (its judge starts now if none
  runs): what the driver's verdict cache is keyed by."""
  return _process(JUDGE, settings).environment


def shutdown() -> None:
  """Closes this worker's processes (a worker plugin calls it when the worker stops)."""
  for role in list(_PROCESSES):
    _retire(role)
