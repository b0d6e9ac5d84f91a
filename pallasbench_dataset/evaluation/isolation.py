"""Evaluations in spawned child processes, with a wall-clock limit and a memory limit.

The parent never imports a candidate and never touches the device. A child starts,
captures the environment, measures the ceilings (or takes them from the parent), then
evaluates the items it is sent one at a time. A child that hangs, dies or grows past the
memory limit is killed and the parent writes the record (`timeout`, `crash`,
`out_of_memory`); a fresh child takes the next item. Children are also replaced after
any error record (a failed kernel may leave the device in a bad state) and, by default,
at every new task, so each task's compile is measured in a fresh process.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import pathlib
import signal
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Final

from pallasbench_dataset.evaluation.ceilings import Ceilings
from pallasbench_dataset.evaluation.core import Context, WorkItem, failure_record
from pallasbench_dataset.schema import (
    Artifacts, Environment, ErrorType, EvalRecord, Status, from_json_dict, to_json_dict)

POLL_S: Final = 0.1
STARTUP_TIMEOUT_S: Final = 300.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
  timeout_s: float
  memory_bytes: int  # resident host memory of the child


def default_memory_limit() -> int:
  """Three quarters of this machine's RAM."""
  return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.75)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChildConfig:
  device: str                      # "gpu" or "cpu"
  git_commit: str | None
  dump_dir: pathlib.Path | None    # where XLA dumps the candidate's PTX (GPU only)
  ceilings: dict | None = None     # measured once per run; None: the child measures them
  visible_device: str | None = None  # CUDA_VISIBLE_DEVICES for the child (one GPU per worker)


def _child_main(conn, config: ChildConfig) -> None:
  """Entry point of the child process (spawned: a fresh interpreter)."""
  os.environ["JAX_PLATFORMS"] = "cuda" if config.device == "gpu" else "cpu"
  if config.visible_device is not None:
    os.environ["CUDA_VISIBLE_DEVICES"] = config.visible_device
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
  dump_dir = None
  if config.device == "gpu" and config.dump_dir is not None:
    from pallasbench_dataset.evaluation.compile_profile import xla_dump_flags  # pylint: disable=import-outside-toplevel
    # XLA numbers dumped modules per process: a folder per child keeps names from colliding.
    dump_dir = config.dump_dir / f"child-{os.getpid()}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla_dump_flags(dump_dir)}"
  warnings.filterwarnings("ignore", message="The Pallas Triton backend is deprecated")
  import jax  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation import ceilings, environment, timing  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.core import evaluate_item  # pylint: disable=import-outside-toplevel
  try:
    env = environment.capture(config.git_commit)
    method = timing.available_method()
    ceil = (Ceilings(**{k: v for k, v in config.ceilings.items() if k != "bandwidth_gbps"})
            if config.ceilings else ceilings.measure(method))
    ctx = Context(environment=env, ceilings=ceil, timing_method=method,
                  l2_bytes=environment.l2_bytes(env), dump_dir=dump_dir)
  except Exception:  # the device itself is unusable: report and stop
    conn.send(("startup_failed", traceback.format_exc()))
    return
  conn.send(("ready", to_json_dict(env), ceil.to_json()))
  while (item := conn.recv()) is not None:
    try:
      record, artifacts = evaluate_item(item, ctx)
      conn.send(("result", to_json_dict(record), to_json_dict(artifacts)))
    except Exception:  # a bug in the evaluator, not in the kernel
      conn.send(("harness_error", traceback.format_exc()))
    jax.clear_caches()


def _rss_bytes(pid: int) -> int:
  try:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("VmRSS:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return 0


class Worker:
  """One child process and the pipe to it."""

  def __init__(self, config: ChildConfig):
    ctx = multiprocessing.get_context("spawn")
    self._conn, child_conn = ctx.Pipe()
    self._proc = ctx.Process(target=_child_main, args=(child_conn, config), daemon=True)
    self._proc.start()
    child_conn.close()
    kind, payload = self._wait_startup()
    if kind != "ready":
      self.close()
      raise RuntimeError(f"the evaluation process could not start on {config.device}: {payload}")
    self.environment = from_json_dict(Environment, payload[0])
    self.ceilings = payload[1]

  def _wait_startup(self) -> tuple[str, Any]:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
      if self._conn.poll(POLL_S):
        try:
          kind, *payload = self._conn.recv()
        except EOFError:
          self._proc.join(timeout=10)
          return "died", f"exit code {self._proc.exitcode}"
        return kind, payload if kind == "ready" else payload[0]
      if not self._proc.is_alive():
        return "died", f"exit code {self._proc.exitcode}"
    return "timeout", f"no answer within {STARTUP_TIMEOUT_S:.0f} s"

  def run(self, item: WorkItem, limits: Limits) -> tuple[str, Any]:
    """('result', (record, artifacts)) or (failure kind, message); kills the child on failure."""
    self._conn.send(item)
    start = time.monotonic()
    while True:
      if self._conn.poll(POLL_S):
        try:
          kind, *payload = self._conn.recv()
        except EOFError:  # the child died: poll() reports the closed pipe as readable
          self._proc.join(timeout=10)
          return "crash", _death_message(self._proc.exitcode)
        if kind == "result":
          return kind, (from_json_dict(EvalRecord, payload[0]), from_json_dict(Artifacts, payload[1]))
        return kind, payload[0]
      if not self._proc.is_alive():
        return "crash", _death_message(self._proc.exitcode)
      if time.monotonic() - start > limits.timeout_s:
        self.close()
        return "timeout", f"no result within the {limits.timeout_s:.0f} s limit; the process was killed"
      rss = _rss_bytes(self._proc.pid)
      if rss > limits.memory_bytes:
        self.close()
        return "memory", (f"resident memory {rss / 2**30:.1f} GiB exceeded the "
                          f"{limits.memory_bytes / 2**30:.1f} GiB limit; the process was killed")

  def close(self) -> None:
    if self._proc.is_alive():
      try:
        self._conn.send(None)
        self._proc.join(timeout=5)
      except (OSError, BrokenPipeError):
        pass
    if self._proc.is_alive():
      self._proc.kill()
    self._proc.join(timeout=10)


def _death_message(exitcode: int | None) -> str:
  if exitcode is not None and exitcode < 0:
    try:
      name = signal.Signals(-exitcode).name
    except ValueError:
      name = f"signal {-exitcode}"
    return f"the evaluation process died with {name}"
  return f"the evaluation process exited with code {exitcode} without a result"


_FAILURES: Final = {
    "timeout": (Status.TIMEOUT, ErrorType.TIMEOUT),
    "crash": (Status.ERROR, ErrorType.CRASH),
    "memory": (Status.ERROR, ErrorType.OUT_OF_MEMORY),
    "harness_error": (Status.ERROR, ErrorType.HARNESS),
}


def run_items(items: Iterable[WorkItem], config: ChildConfig, limits: Limits, *,
              on_result: Callable[[EvalRecord, Artifacts | None], None],
              fresh_process_per: str = "task",
              on_ready: Callable[[Environment, dict], None] | None = None
              ) -> None:
  """Evaluates `items` in children, calling `on_result` once per item, in order.

  The first child measures the ceilings and reports them with its environment through
  `on_ready`; later children reuse them, so they are measured once per call.
  """
  worker: Worker | None = None
  env: Environment | None = None
  last_task = None
  try:
    for item in items:
      # fresh_process_per: "item", "task", or "error" (keep the child until an error).
      if worker is not None and (fresh_process_per == "item" or
                                 (fresh_process_per == "task" and item.task != last_task)):
        worker.close()
        worker = None
      if worker is None:
        worker = Worker(config)
        if env is None and on_ready is not None:
          on_ready(worker.environment, worker.ceilings)
        env = worker.environment
        config = dataclasses.replace(config, ceilings=worker.ceilings)  # measured once per run
      last_task = item.task
      start = time.monotonic()
      kind, payload = worker.run(item, limits)
      if kind == "result":
        record, artifacts = payload
        on_result(record, artifacts)
        if record.status is Status.ERROR:
          worker.close()
          worker = None
        continue
      status, error_type = _FAILURES[kind]
      on_result(failure_record(item, env, status, error_type, payload, time.monotonic() - start),
                None)
      worker.close()
      worker = None
  finally:
    if worker is not None:
      worker.close()


def make_dump_dir(device: str) -> pathlib.Path | None:
  return pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-xla-")) if device == "gpu" else None
