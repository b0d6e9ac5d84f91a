"""Running many evaluations: the measuring half of `python -m builder.regenerate`.

A run writes one folder: `manifest.json` (command, commit, environment and ceilings per
GPU, plan, where the time went), `records.jsonl` (one EvalRecord per line) and
`artifacts.jsonl` (the IR, one line per record). The driver, this module, is the folder's
only writer (a lock keeps a second run out) and schedules each evaluation's three stages
(export, compile, judge; see `stages`) on a Dask cluster. A record and its artifacts are one
unit: the artifacts line is written first and the record line commits it, so a kill between
the two leaves an orphan artifacts line that `resume` removes. `resume=True` repairs a torn
last line, re-measures what was lost or killed from outside (crash and harness records), and
skips the rest, so an interrupted run continues where it stopped. With a verdict cache
(`verdicts`), what was judged before is not judged again: a population run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import logging
import pathlib
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from typing import Final, TextIO

import distributed

from pallasbench_dataset import jsonlines
from pallasbench_dataset.evaluation import sandbox
from pallasbench_dataset.evaluation.pipeline import cluster
from pallasbench_dataset.evaluation.judge import budgets, environment
from pallasbench_dataset.evaluation.pipeline import stages, verdicts
from pallasbench_dataset.evaluation.pipeline.driver import (
    WorkItem, empty_artifacts, failure_record, has_verdict)
from pallasbench_dataset.evaluation.judge.ceilings import MATMUL_CEILINGS
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import JudgeConfig, Limits
from pallasbench_dataset.kernels import kernel_path
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.precision import DEFAULT_PRECISION, precision_order
from pallasbench_dataset.schema import (
    ARTIFACTS_FILE, MANIFEST_FILE, RECORDS_FILE, Artifacts, Environment, EvalRecord,
    from_json_dict, to_json_dict)
from pallasbench_dataset.tasks import TaskSpec

logger = logging.getLogger(__name__)

MANIFEST: Final = MANIFEST_FILE
LOCK: Final = ".lock"
RECORDS: Final = RECORDS_FILE
ARTIFACTS: Final = ARTIFACTS_FILE


def plan(specs: Sequence[TaskSpec], variants: Sequence[str], sizes: Sequence[str],
         options: EvalOptions, precisions: Sequence[str] = (DEFAULT_PRECISION,)
         ) -> list[WorkItem]:
  """Every (task, size, variant) evaluation at each precision: precision by precision, each
  size by size, each in task-id order, so an interrupted run holds whole precisions and sizes
  first. Seeds are drawn by the judge, fresh per evaluation."""
  items = []
  for precision in precisions:
    for size in sizes:
      for spec in specs:
        for variant in variants:
          path = kernel_path(variant, spec.name)
          items.append(WorkItem(task=spec.name, variant=variant, size=size,
                                source=path.read_text(), precision=precision,
                                filename=f"kernels_{variant}/{spec.name}.py", options=options))
  return items


def _planned_precisions(manifest: Mapping) -> list[str]:
  """The precisions a run's manifest (or one of its resumes) planned: float32 for a manifest
  that names none."""
  return list(manifest.get("precisions") or (DEFAULT_PRECISION,))


def _precisions(items: Sequence[WorkItem]) -> list[str]:
  return sorted({i.precision for i in items}, key=precision_order)


def _read_lines(path: pathlib.Path, cls: type) -> list[tuple[str, object]]:
  """(line, parsed) for each valid line; an invalid one is skipped with a warning."""
  if not path.exists():
    return []
  out = []
  for n, line in enumerate(jsonlines.lines(path.read_text()), 1):
    try:
      out.append((line, from_json_dict(cls, json.loads(line))))
    except (json.JSONDecodeError, ValueError) as e:
      logger.warning("%s line %d is not valid (%s); it will be re-measured", path, n, e)
  return out


def read_records(run_dir: pathlib.Path) -> list[EvalRecord]:
  """The records of a run folder; a torn last line (a killed run) is skipped with a warning."""
  return [record for _, record in _read_lines(run_dir / RECORDS, EvalRecord)]


def _repair_tail(path: pathlib.Path) -> None:
  """Cuts a torn last line (a run killed mid-write, a full disk) so that the next append
  starts on a line of its own instead of being glued to the fragment and lost with it."""
  if not path.exists():
    return
  with path.open("rb+") as f:
    data = f.read()
    if not data or data.endswith(b"\n"):
      return
    f.truncate(data.rfind(b"\n") + 1)
  logger.warning("%s ended in a torn line (%d bytes); it was cut and will be re-measured",
                 path, len(data) - data.rfind(b"\n") - 1)


@contextlib.contextmanager
def _single_writer(run_dir: pathlib.Path) -> Iterator[None]:
  """Holds the run folder's lock: two runs appending to one folder would duplicate every key."""
  with (run_dir / LOCK).open("w") as lock:
    try:
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise FileExistsError(f"{run_dir} is being written by another run (its {LOCK} is held): "
                            "wait for that run to end, or choose another folder") from None
    try:
      yield
    finally:
      fcntl.flock(lock, fcntl.LOCK_UN)


def _replace(path: pathlib.Path, text: str) -> None:
  """Writes `path` whole or not at all: a temporary beside it, renamed over it."""
  tmp = path.with_name(path.name + ".tmp")
  try:
    tmp.write_text(text)
    tmp.replace(path)
  finally:
    tmp.unlink(missing_ok=True)


def _rewrite(path: pathlib.Path, lines: Sequence[str]) -> None:
  _replace(path, "".join(line + "\n" for line in lines))


def reconcile(run_dir: pathlib.Path) -> set[EvalKey]:
  """Before a resume: keeps each record whose artifacts line exists and that is not to be
  retried, drops the rest of both files (orphans, duplicates, invalid lines), and returns
  the keys that are done."""
  for name in (RECORDS, ARTIFACTS):
    _repair_tail(run_dir / name)
  records = _read_lines(run_dir / RECORDS, EvalRecord)
  artifacts = _read_lines(run_dir / ARTIFACTS, Artifacts)
  with_artifacts = {EvalKey.of(a) for _, a in artifacts}
  kept: dict[EvalKey, str] = {}
  for line, record in records:
    key = EvalKey.of(record)
    if key not in with_artifacts:
      logger.warning("%s has a record but no artifacts (the write was cut): re-measured",
                     key.label(" "))
    elif not has_verdict(record):  # killed from outside, or a harness bug: measured again
      logger.info("%s was %s (%s): re-measured", key.label(" "), record.error_type.value,
                  record.error)
    else:
      kept.setdefault(key, line)
  kept_artifacts: dict[EvalKey, str] = {}
  for line, item in artifacts:
    if EvalKey.of(item) in kept:
      kept_artifacts.setdefault(EvalKey.of(item), line)
  if len(kept) != len(records) or len(kept_artifacts) != len(artifacts):
    _rewrite(run_dir / RECORDS, list(kept.values()))
    _rewrite(run_dir / ARTIFACTS, [kept_artifacts[k] for k in kept])
  return set(kept)


def unfinished_run(folder: pathlib.Path, items: Sequence[WorkItem], device: str
                   ) -> pathlib.Path | None:
  """The newest run folder in `folder` that planned exactly `items` on `device` and did not
  finish (interrupted, or killed): the run a plain re-run of its command continues."""
  want = ({i.task for i in items}, {str(i.size) for i in items}, {i.variant for i in items},
          {i.precision for i in items})
  for run_dir in sorted(folder.glob("*/"), reverse=True):  # <device>-<UTC time>: newest first
    try:
      manifest = json.loads((run_dir / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError):
      continue
    planned = (*(set(manifest.get(k) or ()) for k in ("tasks", "sizes", "variants")),
               set(_planned_precisions(manifest)))
    if (manifest.get("finished_at") is None and manifest.get("device") == device
        and planned == want):
      return run_dir
  return None


def per_judge_minute(measured: int, wall_s: float, judges: int) -> float | None:
  """Throughput: evaluations measured per minute of the judges' time (wall time x judges)."""
  return measured / (wall_s / 60 * judges) if wall_s > 0 and judges > 0 else None


class _Progress:
  """One line per finished evaluation: a bar, the counts (a resumed run counts from what it
  kept), elapsed time, the estimated time left, the outcome and the throughput so far
  (evaluations per judge-minute; verdicts from the cache cost none)."""

  def __init__(self, total: int, judges: int, stream: TextIO, *, kept: int = 0):
    self.total, self.judges, self.stream, self.kept = total, judges, stream, kept
    self.done, self.measured = kept, 0
    self.start = time.monotonic()

  def finished(self, record: EvalRecord) -> None:
    self.done += 1
    self.measured += not record.cached
    width = 24
    filled = width * self.done // max(self.total, 1)
    wall_s = time.monotonic() - self.start
    elapsed = datetime.timedelta(seconds=int(wall_s))
    left = datetime.timedelta(seconds=round(wall_s / (self.done - self.kept)
                                            * max(self.total - self.done, 0)))
    speed = "" if record.runtime_ms is None else f"  {record.runtime_ms:.4g} ms"
    gpu = "" if record.run is None or record.run.gpu_index is None else f" gpu{record.run.gpu_index}"
    how = "cached" if record.cached else f"{record.eval_wall_s:.1f} s{gpu}"
    rate = per_judge_minute(self.measured, wall_s, self.judges)
    rate_text = f"  {rate:.2g}/judge-min" if rate is not None and self.measured else ""
    print(f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {elapsed} "
          f"ETA {left} {EvalKey.of(record).label(' ')}: {record.status.value}{speed} ({how})"
          f"{rate_text}",
          file=self.stream, flush=True)


class _Sink:
  """Appends each record with its artifacts: the artifacts line first, flushed, then the
  record line, flushed. The record line is the commit: without it the artifacts line is an
  orphan that resume removes."""

  def __init__(self, run_dir: pathlib.Path, progress: _Progress):
    self._artifacts = (run_dir / ARTIFACTS).open("a", encoding="utf-8")
    self._records = (run_dir / RECORDS).open("a", encoding="utf-8")
    self._progress = progress

  def __call__(self, record: EvalRecord, artifacts: Artifacts) -> None:
    self._artifacts.write(json.dumps(to_json_dict(artifacts)) + "\n")
    self._artifacts.flush()
    self._records.write(json.dumps(to_json_dict(record)) + "\n")
    self._records.flush()
    self._progress.finished(record)

  def close(self) -> None:
    self._records.close()
    self._artifacts.close()


class _Manifest:
  """manifest.json: the run's command, commit, plan, the environment and ceilings of each GPU
  (as its first record reports them) and where the time went.

  Written at the start, when a GPU first reports, and at the end: `finished_at` only when
  every planned evaluation has a record, `interrupted_at` when the run was stopped. A resumed
  run keeps the original manifest and appends a `resumes` entry.
  """

  def __init__(self, run_dir: pathlib.Path, segment: dict, resume: bool):
    self._path = run_dir / MANIFEST
    old = json.loads(self._path.read_text()) if resume else None
    self._seen: set = set()
    if old is None:
      self.data = {**segment, "environment": None, "ceilings": None, "per_device": [],
                   "resumes": []}
      self._segment = self.data
    else:
      self.data = old
      self.data.setdefault("resumes", []).append(segment)
      self._segment = segment
    self.write()

  def record_seen(self, record: EvalRecord) -> None:
    run = record.run
    gpu = run.gpu_index if run else None
    if gpu in self._seen or record.environment.hardware == "unknown":
      return
    self._seen.add(gpu)
    ceilings = None if run is None else {  # as the record's run names them, `ceiling_<name>`
        name: getattr(run, f"ceiling_{name}")
        for name in ("copy_gbps", "read_gbps", *MATMUL_CEILINGS, "method")}
    entry = {"device": "cpu" if gpu is None else str(gpu),
             "environment": to_json_dict(record.environment), "ceilings": ceilings}
    self._segment.setdefault("per_device", []).append(entry)
    if self.data.get("environment") is None:
      self.data["environment"], self.data["ceilings"] = entry["environment"], ceilings
    self.write()

  def end(self, *, complete: bool, pipeline: dict) -> None:
    self._segment["pipeline"] = pipeline
    self._segment["finished_at" if complete else "interrupted_at"] = _now()
    if complete:
      self.data["finished_at"] = self._segment["finished_at"]
    self.write()

  def write(self) -> None:
    _replace(self._path, json.dumps(self.data, indent=1, sort_keys=True) + "\n")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClusterOptions:
  """Where the stages run: a local cluster (`plan`) unless `scheduler` names one."""
  plan: cluster.WorkerPlan
  scheduler: str | None = None
  compile_budget_s: float = budgets.budget_s("gpu", budgets.COMPILE)
  compile_cache: pathlib.Path | None = None  # default: a fresh folder for the run, removed after


class Interrupted(Exception):
  """SIGTERM or SIGINT stopped the run in `run_dir`; what was measured is kept and resumes."""

  def __init__(self, message: str, run_dir: pathlib.Path):
    super().__init__(message)
    self.run_dir = run_dir


@contextlib.contextmanager
def _stop_on_signals(run_dir: pathlib.Path) -> Iterator[None]:
  """SIGTERM (and SIGINT) end the run cleanly: the cluster is closed, the manifest says
  interrupted. A second signal while the run closes is ignored (the first one is being
  answered). Only the main thread can install handlers; elsewhere nothing changes."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def stop(signum, _frame):
    for s in (signal.SIGTERM, signal.SIGINT):
      signal.signal(s, signal.SIG_IGN)
    raise Interrupted(f"stopped by {signal.Signals(signum).name}", run_dir)
  old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
  try:
    yield
  finally:
    for s, handler in old.items():
      signal.signal(s, handler)


def run_suite(items: Sequence[WorkItem], run_dir: pathlib.Path, *, device: str, limits: Limits,
              git_commit: str | None, command: str, cluster_options: ClusterOptions,
              resume: bool = False, stream: TextIO = sys.stderr,
              cache: verdicts.VerdictCache | None = None,
              inputs: Mapping[str, str] | None = None) -> pathlib.Path:
  """Evaluates `items` into `run_dir`; returns the folder. Refuses to mix with an old run, to
  share the folder with a running one, and to resume what cannot be resumed. Raises
  Interrupted on SIGTERM/SIGINT, after closing the cluster and marking the manifest.

  With a verdict `cache`, an item whose verdict it holds is not evaluated (its record is the
  cached one, marked so), and every new verdict is stored in it. `inputs` (file name -> text)
  are written into a new run's folder under its lock: what the run needs beside its records
  (a population's candidates); a resumed run keeps its own."""
  if resume and not run_dir.is_dir():
    raise FileNotFoundError(f"--resume: {run_dir} does not exist; leave out --resume to start "
                            "a new run there")
  run_dir.mkdir(parents=True, exist_ok=True)
  with _single_writer(run_dir), _stop_on_signals(run_dir):
    done = _check_resumable(run_dir, resume)
    if not resume:
      for name, text in (inputs or {}).items():
        _replace(run_dir / name, text)
    return _run_locked(items, run_dir, done, device=device, limits=limits,
                       git_commit=git_commit, command=command, options=cluster_options,
                       resume=resume, stream=stream, cache=cache)


def _check_resumable(run_dir: pathlib.Path, resume: bool) -> set[EvalKey]:
  existing = read_records(run_dir)
  if existing and not resume:
    raise FileExistsError(f"{run_dir} already holds {len(existing)} records: pass --resume to "
                          "continue that run, or choose another folder")
  if (existing or resume) and not (run_dir / MANIFEST).exists():
    raise FileNotFoundError(f"{run_dir} holds {len(existing)} records but no {MANIFEST}: the "
                            "run's command, commit and environment are lost, so it cannot be "
                            "resumed (start a new run in another folder)")
  # Not resuming, the folder holds no valid record, but may hold a torn line or an orphan
  # artifacts line of a run killed in its first write: reconcile cuts them, so that the first
  # record appended starts a line of its own (glued to the fragment it would be lost).
  return reconcile(run_dir)


def _run_locked(items: Sequence[WorkItem], run_dir: pathlib.Path, done: set[EvalKey], *,
                device: str, limits: Limits, git_commit: str | None, command: str,
                options: ClusterOptions, resume: bool, stream: TextIO,
                cache: verdicts.VerdictCache | None) -> pathlib.Path:
  todo = [item for item in items if EvalKey.of(item) not in done]
  if resume:
    logger.info("resuming %s: %d of the %d planned evaluations are done, %d to measure", run_dir,
                len(items) - len(todo), len(items), len(todo))
  manifest = _Manifest(run_dir, {
      "command": command, "git_commit": git_commit, "device": device,
      "started_at": _now(), "finished_at": None,
      "sizes": sorted({str(i.size) for i in items}), "variants": sorted({i.variant for i in items}),
      "precisions": _precisions(items),
      "tasks": sorted({i.task for i in items}, key=[i.task for i in items].index),
      "scheduler": options.scheduler or "local", "gpus": list(options.plan.gpus),
      "cpu_workers": options.plan.cpu_workers, "compile_budget_s": options.compile_budget_s,
      "timeout_s": limits.timeout_s, "resumed_with": len(done),
      "candidates": sum(i.candidate is not None for i in items),
      "verdict_cache": None if cache is None else str(cache.folder)}, resume)
  scratch = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-run-"))
  settings = stages.RunSettings(
      device=device, limits=limits, compile_budget_s=options.compile_budget_s, command=command,
      run_id=run_dir.name,
      judge=JudgeConfig(device=device, git_commit=git_commit,
                        dump_dir=scratch / "xla-dump" if device == "gpu" else None,
                        cache_dir=options.compile_cache or scratch / "compile-cache"))
  start = time.monotonic()
  written: list[EvalRecord] = []
  judges = max(len(options.plan.gpus), 1)
  try:
    with cluster.connect(options.plan, scheduler=options.scheduler, directory=scratch) as client:
      judges = _judge_slots(client)
      with contextlib.closing(_Sink(run_dir, _Progress(len(items), judges, stream,
                                                  kept=len(items) - len(todo)))) as sink:
        for record, artifacts in _outcomes(client, todo, settings, git_commit, cache):
          sink(record, artifacts)
          if not record.cached:  # a cached record was measured elsewhere
            manifest.record_seen(record)
          written.append(record)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
    sandbox.remove_orphaned_scratch()  # the cluster is closed: what its killed processes left
    manifest.end(complete=len(written) == len(todo),
                 pipeline=_pipeline_report(written, time.monotonic() - start, judges))
  return run_dir


def _slug(item: WorkItem) -> str:
  return EvalKey.of(item).label("-")


def _of_its_item(item: WorkItem, record: EvalRecord) -> bool:
  """Whether `record` is a measurement of `item`: its text and its key in the run (a stage's
  result is used only for the item that asked for it)."""
  return record.kernel_sha256 == item.kernel_sha256 and EvalKey.of(record) == EvalKey.of(item)


def _outcomes(client: distributed.Client, todo: Sequence[WorkItem], settings: stages.RunSettings,
              git_commit: str | None, cache: verdicts.VerdictCache | None
              ) -> Iterator[tuple[EvalRecord, Artifacts]]:
  """Each item's record and artifacts: measured on the cluster, or with a verdict cache, taken
  from it where it can be (see `verdicts.evaluate`)."""
  def measure(items: Sequence[WorkItem]):
    return _schedule(client, items, settings, git_commit)
  if cache is None:
    return ((record, artifacts) for _, record, artifacts in measure(todo))
  return verdicts.evaluate(todo, cache, _judge_environment(client, settings) if todo else None,
                           measure)


def _judge_environment(client: distributed.Client, settings: stages.RunSettings
                       ) -> Environment | None:
  """The machine the judges record, asked of a judge worker (its judge starts now instead of
  at its first evaluation); None, with a warning, when no judge could say."""
  future = client.submit(stages.judge_environment, settings,
                         resources={stages.GPU_RESOURCE: 1}, pure=False)
  try:
    return future.result()
  except Exception as e:  # pylint: disable=broad-except  (no judge: every item is measured)
    logger.warning("no judge reported its machine (%s: %s); the verdict cache is not consulted, "
                   "only written", type(e).__name__, e)
    return None
  finally:
    future.release()


def _judge_slots(client: distributed.Client) -> int:
  workers = client.scheduler_info()["workers"].values()
  return max(1, sum(1 for w in workers if stages.GPU_RESOURCE in (w.get("resources") or {})))


def _held_by_others(worker: str | None, judged_on: Mapping[str, Set[tuple[str, str]]],
                    running: Iterable[WorkItem]) -> set[tuple[str, str]]:
  """The (task, size) pairs the judges other than `worker` have judged, and those being judged
  (the freed `worker` runs none)."""
  return {(i.task, i.size) for i in running}.union(
      *(judged for w, judged in judged_on.items() if w != worker))


def _choose(waiting: Sequence[WorkItem], compiled: Sequence[bool], *,
            mine: Set[tuple[str, str]], theirs: Set[tuple[str, str]]) -> int:
  """Which of the `waiting` items (plan order) a freed judge takes: the first compiled one of a
  (task, size) the judge has judged (`mine`), else the first compiled one of a (task, size) no
  other judge has judged or is judging (`theirs`), else the first compiled one (a long compile,
  up to the budget, does not hold up the items behind it), else the first one."""
  ready = [n for n, done in enumerate(compiled) if done]
  task = lambda n: (waiting[n].task, waiting[n].size)
  return next((n for n in ready if task(n) in mine),
              next((n for n in ready if task(n) not in theirs), ready[0] if ready else 0))


def _schedule(client: distributed.Client, todo: Sequence[WorkItem], settings: stages.RunSettings,
              git_commit: str | None) -> Iterator[tuple[WorkItem, EvalRecord, Artifacts]]:
  """Submits every item's export and compile at once, in plan order (Dask runs earlier
  submissions first), and a judge when a judge worker is free, so that each judge worker holds
  one evaluation at a time: a lost worker then takes only its running evaluation down (Dask
  retries it once). The freed judge gets the item `_choose` picks: one of a task and size it
  has judged first, since its process still holds that task's reference, filter and input
  executables, which cost a judge seconds to build; then one of a task and size no other judge
  holds, so that judges split the tasks between them instead of each building every task's
  executables. (It is the one judge worker with a free slot, so Dask places the item there;
  naming the worker would strand the item when that worker is lost and comes back under
  another address.) Yields each (item, record, artifacts) as its judge finishes; a stage that
  raised, or whose worker was lost twice, becomes an error record and the others go on."""
  if not todo:
    return
  cpu, gpu = {stages.CPU_RESOURCE: 1}, {stages.GPU_RESOURCE: 1}
  # Dask answers a key it already holds with the task it holds, whoever submits it: every key
  # of this call carries a tag drawn here, so that no other caller of a shared scheduler (the
  # ranks of a trainer, whose completions share ids) and no other call is given our stages.
  tag = uuid.uuid4().hex[:16]
  upstream = {}
  for item in todo:
    slug = _slug(item)
    exported = client.submit(stages.export_stage, item, settings, resources=cpu,
                             key=f"export-{slug}-{tag}", pure=False)
    compiled = client.submit(stages.compile_stage, item, exported, settings, resources=cpu,
                             key=f"compile-{slug}-{tag}", pure=False)
    upstream[slug] = (item, exported, compiled)
  waiting = list(upstream)
  running = distributed.as_completed()
  items = {}
  judged_on: dict[str, set[tuple[str, str]]] = {}  # judge worker -> (task, size) it judged

  def submit_next(worker: str | None) -> None:
    slug = waiting[_choose([upstream[s][0] for s in waiting],
                           [upstream[s][2].done() for s in waiting],
                           mine=judged_on.get(worker, set()),
                           theirs=_held_by_others(worker, judged_on, items.values()))]
    waiting.remove(slug)
    item, exported, compiled = upstream[slug]
    judged = client.submit(stages.judge_stage, item, exported, compiled, settings,
                           resources=gpu, key=f"judge-{slug}-{tag}", pure=False)
    items[judged] = item
    running.add(judged)

  for _ in range(min(_judge_slots(client), len(waiting))):
    submit_next(None)
  last_env: Environment = environment.unmeasured(settings.device, git_commit)
  for future in running:
    item = items.pop(future)
    # The worker holding the judge's result ran it; none when the judge failed.
    worker = next(iter(client.who_has([future])[future.key]), None)
    try:
      record, artifacts = future.result()
      if not _of_its_item(item, record):
        raise ValueError(f"the judge answered for another item ({record.task}, {record.size},"
                         f" {record.precision}, {record.candidate}, text "
                         f"{record.kernel_sha256[:12]})")
      last_env = record.environment
    except distributed.KilledWorker as e:
      record = failure_record(item, last_env, None, "crash", f"the worker running a stage of it "
                              f"was lost twice ({e}); retried once, then given up", 0.0)
      artifacts = empty_artifacts(item)
    except Exception as e:  # pylint: disable=broad-except  (a stage's bug: recorded, reported)
      logger.exception("%s: a stage raised", _slug(item))
      record = failure_record(item, last_env, None, "harness_error",
                              f"a pipeline stage raised {type(e).__name__}: {e}", 0.0)
      artifacts = empty_artifacts(item)
    if worker is not None:
      judged_on.setdefault(worker, set()).add((item.task, item.size))
    _, exported, compiled = upstream.pop(_slug(item))
    item = _with_its_export(item, record, exported)
    for done in (future, exported, compiled):
      done.release()
    if waiting:
      submit_next(worker)
    yield item, record, artifacts


def _with_its_export(item: WorkItem, record: EvalRecord, exported: distributed.Future
                     ) -> WorkItem:
  """`item`, carrying the program its judge ran where the host's load may have decided its
  record (`verdicts.load_decided`) and its export succeeded: judged again (`verdicts.evaluate`),
  that program is judged, not a new export of the text, whose import may choose another
  (red team round 20: a coin drawn at import). A failed export is exported again: a limit or
  the host may have ended the exporter (round 19)."""
  if not verdicts.load_decided(record) or exported.status != "finished":
    return item
  outcome = exported.result()
  return item if outcome.failure is not None else dataclasses.replace(item, exported=outcome)


def _pipeline_report(records: Sequence[EvalRecord], wall_s: float, judges: int) -> dict:
  """Where the time went: each stage's summed seconds, how busy the judges were and how many
  evaluations they measured per judge-minute (records from the verdict cache cost nothing)."""
  measured = [r for r in records if not r.cached]

  def total(name: str) -> float:
    return round(sum(getattr(r.stages, name) or 0.0 for r in measured if r.stages), 1)
  judge_s = total("judge_s")
  hits = [r.stages.compile_cache_hit for r in measured
          if r.stages and r.stages.compile_cache_hit is not None]
  rate = per_judge_minute(len(measured), wall_s, judges)
  return {"evaluations": len(measured), "cached": len(records) - len(measured),
          "wall_s": round(wall_s, 1), "judges": judges, "export_s": total("export_s"),
          "compile_s": total("compile_s"), "judge_s": judge_s,
          "judge_busy": round(judge_s / (wall_s * judges), 3) if wall_s > 0 else None,
          "per_judge_minute": None if rate is None else round(rate, 2),
          "compile_cache_hits": sum(hits), "compile_cache_lookups": len(hits)}


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
