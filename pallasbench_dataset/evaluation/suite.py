"""Running many evaluations: the measuring half of `python -m builder.regenerate`.

A run writes one folder: `manifest.json` (command, commit, environment, ceilings, plan),
`records.jsonl` (one EvalRecord per line, appended and flushed as each evaluation
finishes) and `artifacts.jsonl` (the IR). `resume=True` skips what the folder already
holds, so an interrupted run continues where it stopped. Work is grouped by (task, size):
one judge process per group (an exporter per evaluation), and with several GPUs one queue feeds one worker thread
per GPU, each pinned to its device.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import functools
import json
import logging
import pathlib
import queue
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Final, TextIO

from pallasbench_dataset.evaluation.driver import WorkItem, run_items
from pallasbench_dataset.evaluation.judge import EvalOptions
from pallasbench_dataset.evaluation.judge_process import JudgeConfig, Limits, make_dump_dir
from pallasbench_dataset.kernels import kernel_path
from pallasbench_dataset.schema import Artifacts, EvalRecord, from_json_dict, to_json_dict
from pallasbench_dataset.tasks import TaskSpec

logger = logging.getLogger(__name__)

MANIFEST: Final = "manifest.json"
LOCK: Final = ".lock"
RECORDS: Final = "records.jsonl"
ARTIFACTS: Final = "artifacts.jsonl"


def plan(specs: Sequence[TaskSpec], variants: Sequence[str], sizes: Sequence[str],
         options: EvalOptions) -> list[WorkItem]:
  """Every (task, size, variant) evaluation: size by size, each in task-id order, so an
  interrupted run holds whole sizes first. Seeds are drawn by the judge, fresh per evaluation."""
  items = []
  for size in sizes:
    for spec in specs:
      for variant in variants:
        path = kernel_path(variant, spec.name)
        items.append(WorkItem(task=spec.name, variant=variant, size=size, source=path.read_text(),
                              filename=f"kernels_{variant}/{spec.name}.py", options=options))
  return items


def read_records(run_dir: pathlib.Path) -> list[EvalRecord]:
  """The records of a run folder; a torn last line (a killed run) is skipped with a warning."""
  path = run_dir / RECORDS
  if not path.exists():
    return []
  records = []
  for n, line in enumerate(path.read_text().splitlines(), 1):
    try:
      records.append(from_json_dict(EvalRecord, json.loads(line)))
    except (json.JSONDecodeError, ValueError) as e:
      logger.warning("%s line %d is not a valid record (%s); it will be re-measured", path, n, e)
  return records


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


def _key(x) -> tuple[str, str, str]:
  return (x.task, x.variant, str(x.size))


class _Progress:
  """One line per finished evaluation: a bar, the counts, elapsed time and the outcome."""

  def __init__(self, total: int, stream: TextIO):
    self.total, self.done, self.stream = total, 0, stream
    self.start = time.monotonic()

  def finished(self, record: EvalRecord) -> None:
    self.done += 1
    width = 24
    filled = width * self.done // max(self.total, 1)
    elapsed = datetime.timedelta(seconds=int(time.monotonic() - self.start))
    speed = "" if record.runtime_ms is None else f"  {record.runtime_ms:.4g} ms"
    print(f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {elapsed} "
          f"{record.task} {record.variant} {record.size}: {record.status.value}{speed} "
          f"({record.eval_wall_s:.1f} s)", file=self.stream, flush=True)


class _Sink:
  """Appends records and artifacts to the run folder, one line each, flushed immediately."""

  def __init__(self, run_dir: pathlib.Path, progress: _Progress):
    self._records = (run_dir / RECORDS).open("a", encoding="utf-8")
    self._artifacts = (run_dir / ARTIFACTS).open("a", encoding="utf-8")
    self._lock = threading.Lock()
    self._progress = progress

  def __call__(self, record: EvalRecord, artifacts: Artifacts | None) -> None:
    with self._lock:
      if self._records.closed:  # the run was interrupted; this record is not kept
        return
      self._records.write(json.dumps(to_json_dict(record)) + "\n")
      self._records.flush()
      if artifacts is not None:
        self._artifacts.write(json.dumps(to_json_dict(artifacts)) + "\n")
        self._artifacts.flush()
      self._progress.finished(record)

  def close(self) -> None:
    with self._lock:
      self._records.close()
      self._artifacts.close()


def _groups(items: Sequence[WorkItem]) -> list[list[WorkItem]]:
  groups: dict[tuple[str, str], list[WorkItem]] = {}
  for item in items:
    groups.setdefault((item.task, str(item.size)), []).append(item)
  return list(groups.values())


def _drain(work: queue.Queue):
  while True:
    try:
      group = work.get_nowait()
    except queue.Empty:
      return
    yield from group


def _worker_thread(work: queue.Queue, config: JudgeConfig, limits: Limits, sink: _Sink,
                   on_ready, isolation: str) -> None:
  """Takes (task, size) groups off the queue until it is empty.

  isolation "task": a fresh judge per (task, size) group; "run": one judge for the whole
  queue, replaced only after an error (faster where starting the device costs seconds).
  """
  run_items(_drain(work), config, limits, on_result=sink, on_ready=on_ready,
            fresh_process_per="task" if isolation == "task" else "error")


class _Manifest:
  """manifest.json: the run's command, commit, plan, environment and ceilings.

  Written at the start, as soon as each device reports its environment and ceilings, and
  at the end. A resumed run keeps the original manifest and appends a `resumes` entry.
  """

  def __init__(self, run_dir: pathlib.Path, segment: dict, resume: bool):
    self._path = run_dir / MANIFEST
    self._lock = threading.Lock()
    old = json.loads(self._path.read_text()) if resume and self._path.exists() else None
    if old is None:
      self.data = {**segment, "environment": None, "ceilings": segment.pop("ceilings"),
                   "per_device": [], "resumes": []}
      self._segment = self.data
    else:
      segment.pop("ceilings")
      self.data = old
      self.data.setdefault("resumes", []).append(segment)
      self._segment = segment
    self.write()

  def device_ready(self, device: str, env, ceilings: dict | None) -> None:
    with self._lock:
      entry = {"device": device, "environment": to_json_dict(env), "ceilings": ceilings}
      self._segment.setdefault("per_device", []).append(entry)
      if self.data.get("environment") is None:
        self.data["environment"], self.data["ceilings"] = entry["environment"], ceilings
      self.write()

  def finish(self) -> None:
    with self._lock:
      self._segment["finished_at"] = _now()
      self.data["finished_at"] = self._segment["finished_at"]
      self.write()

  def write(self) -> None:
    tmp = self._path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True) + "\n")
    tmp.replace(self._path)


def run_suite(items: Sequence[WorkItem], run_dir: pathlib.Path, *, device: str, limits: Limits,
              git_commit: str | None, command: str, resume: bool = False, devices: int = 1,
              ceilings: dict | None = None, isolation: str = "task",
              stream: TextIO = sys.stderr) -> pathlib.Path:
  """Evaluates `items` into `run_dir`; returns the folder. Refuses to mix with an old run, to
  share the folder with a running one, and to resume what cannot be resumed."""
  if resume and not run_dir.is_dir():
    raise FileNotFoundError(f"--resume: {run_dir} does not exist; leave out --resume to start "
                            "a new run there")
  run_dir.mkdir(parents=True, exist_ok=True)
  with _single_writer(run_dir):
    return _run_locked(items, run_dir, device=device, limits=limits, git_commit=git_commit,
                       command=command, resume=resume, devices=devices, ceilings=ceilings,
                       isolation=isolation, stream=stream)


def _run_locked(items: Sequence[WorkItem], run_dir: pathlib.Path, *, device: str, limits: Limits,
                git_commit: str | None, command: str, resume: bool, devices: int,
                ceilings: dict | None, isolation: str, stream: TextIO) -> pathlib.Path:
  if resume:
    for name in (RECORDS, ARTIFACTS):
      _repair_tail(run_dir / name)
  done = {_key(r) for r in read_records(run_dir)}
  if done and not resume:
    raise FileExistsError(f"{run_dir} already holds {len(done)} records: pass --resume to "
                          "continue that run, or choose another folder")
  if done and not (run_dir / MANIFEST).exists():
    raise FileNotFoundError(f"{run_dir} holds {len(done)} records but no {MANIFEST}: the run's "
                            "command, commit and environment are lost, so it cannot be resumed "
                            "(start a new run in another folder)")
  todo = [item for item in items if _key(item) not in done]
  manifest = _Manifest(run_dir, {
      "command": command, "argv": sys.argv, "git_commit": git_commit, "device": device,
      "started_at": _now(), "finished_at": None, "ceilings": ceilings,
      "sizes": sorted({str(i.size) for i in items}), "variants": sorted({i.variant for i in items}),
      "tasks": sorted({i.task for i in items}, key=[i.task for i in items].index),
      "devices": devices, "isolation": isolation, "resumed_with": len(done)}, resume)
  sink = _Sink(run_dir, _Progress(len(todo), stream))
  work: queue.Queue = queue.Queue()
  for group in _groups(todo):
    work.put(group)
  threads = []
  for i in range(max(devices, 1)):
    visible = str(i) if devices > 1 else None
    config = JudgeConfig(device=device, git_commit=git_commit, dump_dir=make_dump_dir(device),
                         ceilings=ceilings, visible_device=visible)
    ready = functools.partial(manifest.device_ready, visible or "0")
    threads.append(threading.Thread(target=_worker_thread, daemon=True,
                                    args=(work, config, limits, sink, ready, isolation)))
  try:
    for t in threads:
      t.start()
    for t in threads:
      t.join()
  finally:
    sink.close()
    manifest.finish()
  return run_dir


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
