"""The judge as a process: started as a program, fed items over a private socket.

    python -m pallasbench_dataset.evaluation.judge.process --fd N --device gpu ...

The parent (the driver) never touches the device. It starts the judge as a program (not
by re-importing the caller's main module, so `evaluate()` works from a plain script),
sends `JudgeItem`s and reads back records. A judge that hangs, dies or grows past the
memory limit is killed and the parent writes the record (`timeout`, `crash`,
`out_of_memory`); a fresh judge takes the next item. The judge dies with its parent
(PR_SET_PDEATHSIG), so a killed driver leaves nothing running on the device.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Final

from pallasbench_dataset.evaluation import sandbox
from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.judge.children import death_message, process_rss_bytes
from pallasbench_dataset.schema import (Artifacts, Environment, EvalRecord, RunIdentity, RunInfo,
                                        from_json_dict, to_json_dict)

POLL_S: Final = 0.1
STARTUP_TIMEOUT_S: Final = 300.0
# Evaluations between two jax.clear_caches(): until then a task's next evaluation reuses the
# reference, filter, input and eager-baseline executables (no candidate's code is among them:
# each artifact is a fresh function); clearing bounds what many evaluations' executables hold.
CLEAR_CACHES_EVERY: Final = 256


# Seconds per export and per judge evaluation unless told, by device.
DEFAULT_TIMEOUT_S: Final = {"gpu": 300.0, "cpu": 900.0}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
  timeout_s: float
  memory_bytes: int  # resident host memory of one process (exporter or judge)


def default_memory_limit() -> int:
  """Three quarters of this machine's RAM."""
  return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.75)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JudgeConfig:
  device: str                      # "gpu" or "cpu"
  git_commit: str | None
  dump_dir: pathlib.Path | None    # where XLA dumps the candidate's PTX (GPU only)
  ceilings: dict | None = None     # measured once per run; None: the judge measures them
  visible_device: str | None = None  # CUDA_VISIBLE_DEVICES for the judge (one GPU per worker)
  role: str = "judge"              # "judge", or "compiler": the compile stage, no ceilings
  cache_dir: pathlib.Path | None = None  # JAX's persistent compilation cache, shared by a run
  run: RunIdentity | None = None   # a suite's run, named on each record; None: records name none


def dump_folder(dump_dir: pathlib.Path, pid: int) -> pathlib.Path:
  """The XLA dump folder of judge or compiler process `pid`: XLA numbers dumped modules per
  process, so each process has a folder of its own."""
  return dump_dir / f"judge-{pid}"


def make_dump_dir(device: str) -> pathlib.Path | None:
  return pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-xla-")) if device == "gpu" else None


# ---------------------------------------------------------------------------------------------
# The judge's side.

def serve(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m pallasbench_dataset.evaluation.judge.process")
  p.add_argument("--fd", type=int, required=True)
  p.add_argument("--parent", type=int, required=True)
  p.add_argument("--config", required=True, help="JudgeConfig as JSON")
  args = p.parse_args(argv)
  sandbox.die_with_parent(args.parent)
  raw = json.loads(args.config)
  config = JudgeConfig(**{**raw, **{k: pathlib.Path(raw[k]) if raw[k] else None
                                    for k in ("dump_dir", "cache_dir")},
                          "run": RunIdentity(**raw["run"]) if raw["run"] else None})
  conn = Connection(args.fd)
  dump_dir = None
  if config.device == "gpu" and config.dump_dir is not None:
    from pallasbench_dataset.evaluation.judge.compile_profile import dump_environment  # pylint: disable=import-outside-toplevel
    # XLA numbers dumped modules per process: a folder per judge keeps names from colliding.
    dump_dir = dump_folder(config.dump_dir, os.getpid())
    os.environ.update(dump_environment(dump_dir, os.environ.get("XLA_FLAGS", "")))
  import warnings  # pylint: disable=import-outside-toplevel
  warnings.filterwarnings("ignore", message="The Pallas Triton backend is deprecated")
  import jax  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.judge import ceilings, compile_profile, environment, timing  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.judge.core import CompileItem, Context, evaluate_artifact, precompile  # pylint: disable=import-outside-toplevel
  if config.cache_dir is not None:
    compile_profile.use_persistent_cache(config.cache_dir)
  if config.device == "gpu":
    _load_mosaic_gpu_runtime()
  try:
    env = environment.capture(config.git_commit)
    method = timing.available_method()
    if config.role == "compiler":  # compiles only: the device's ceilings are the judges' job
      ceil = ceilings.NOT_MEASURED
    elif config.ceilings:
      ceil = ceilings.Ceilings(**{k: v for k, v in config.ceilings.items() if k != "bandwidth_gbps"})
    else:
      ceil = ceilings.measure(method)
    if config.role != "compiler":  # the clocks of a GPU that just measured its ceilings
      env = environment.with_gpu_state(env)
    run = ceil.run_info(config.run) if config.run else None
    ctx = Context(environment=env, ceilings=ceil, run=run, timing_method=method,
                  l2_bytes=environment.l2_bytes(env), dump_dir=dump_dir,
                  stage=lambda name: conn.send(("stage", name)))
  except Exception:  # the device itself is unusable: report and stop
    conn.send(("startup_failed", traceback.format_exc()))
    return 1
  conn.send(("ready", to_json_dict(env), ceil.to_json(), to_json_dict(run)))
  served = 0
  while (item := conn.recv()) is not None:
    try:
      if isinstance(item, CompileItem):
        conn.send(("compiled", precompile(item, ctx)))
      else:
        record, artifacts = evaluate_artifact(item, ctx)
        conn.send(("result", to_json_dict(record), to_json_dict(artifacts)))
    except Exception:  # a bug in the judge, not in the kernel
      conn.send(("harness_error", traceback.format_exc()))
    served += 1
    if served % CLEAR_CACHES_EVERY == 0:
      jax.clear_caches()
  return 0


def _load_mosaic_gpu_runtime() -> None:
  """Mosaic GPU kernels (custom call mosaic_gpu_v2) run only in a process that loaded Mosaic
  GPU's runtime: its import loads the bindings and sets MOSAIC_GPU_RUNTIME_LIB_PATH, without
  which XLA's JIT cannot find mosaic_gpu_launch_kernel. The judge imports no kernel, so it
  loads the runtime itself; a jaxlib without it leaves such kernels to fail as errors."""
  try:
    import jax.experimental.mosaic.gpu  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    pass


# ---------------------------------------------------------------------------------------------
# The parent's side.

def _stderr_fd() -> int | None:
  """The judge's stdout goes to our stderr: the CLI's stdout carries only the record."""
  try:
    return sys.stderr.fileno()
  except (AttributeError, OSError, ValueError):
    return None


class JudgeWorker:
  """One judge process and the socket to it."""

  def __init__(self, config: JudgeConfig):
    self._device = config.device
    self._dump_dir = config.dump_dir if config.device == "gpu" else None
    parent_sock, child_sock = socket.socketpair()
    env = dict(os.environ)
    # In the environment, not set by the judge itself: importing the package imports jax,
    # which reads JAX_PLATFORMS once, before the judge's own code runs.
    env["JAX_PLATFORMS"] = "cuda" if config.device == "gpu" else "cpu"
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if config.visible_device is not None:
      env["CUDA_VISIBLE_DEVICES"] = config.visible_device
    raw = {**dataclasses.asdict(config), **{k: str(v) if v else None for k, v in
                                            (("dump_dir", config.dump_dir), ("cache_dir", config.cache_dir))}}
    self._proc = subprocess.Popen(
        [sys.executable, "-m", "pallasbench_dataset.evaluation.judge.process",
         "--fd", str(child_sock.fileno()), "--parent", str(os.getpid()), "--config", json.dumps(raw)],
        pass_fds=(child_sock.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=_stderr_fd(),
        process_group=0)  # the terminal's Ctrl-C goes to the caller, which closes the judge
    child_sock.close()
    self._conn = Connection(parent_sock.detach())
    try:
      kind, payload = self._wait_startup()
    except BaseException:  # interrupted while it starts: no one else would end the process
      self._proc.kill()
      self._proc.wait()
      raise
    if kind != "ready":
      self.close()
      raise RuntimeError(f"the judge process could not start on {config.device}: {payload}")
    self.environment = from_json_dict(Environment, payload[0])
    self.ceilings = payload[1]
    # The run the judge names on its records, for the records of its evaluations that die.
    self.run_info = None if payload[2] is None else from_json_dict(RunInfo, payload[2])

  def _receive(self) -> tuple[str, Any] | None:
    try:
      kind, *payload = self._conn.recv()
    except (EOFError, OSError):  # the judge died: a closed socket polls as readable
      self._proc.wait(timeout=10)
      return "crash", death_message(self._proc.returncode)
    return kind, payload

  def _wait_startup(self) -> tuple[str, Any]:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
      if self._conn.poll(POLL_S):
        kind, payload = self._receive()
        return kind, payload if kind == "ready" else payload if kind == "crash" else payload[0]
      if self._proc.poll() is not None:
        return "died", death_message(self._proc.returncode)
    return "timeout", f"no answer within {STARTUP_TIMEOUT_S:.0f} s"

  def alive(self) -> bool:
    return self._proc.poll() is None

  @property
  def pid(self) -> int:
    return self._proc.pid

  @property
  def dump_folder(self) -> pathlib.Path | None:
    """Where this process's XLA dumps go (`judge-<pid>` under the config's dump_dir)."""
    return None if self._dump_dir is None else dump_folder(self._dump_dir, self.pid)

  def run(self, item, limits: Limits) -> tuple[str, Any]:
    """('result', (record, artifacts)), for a CompileItem ('result', Precompiled), or
    (failure kind, message); kills the judge on failure. A stage (the judge announces each as
    it starts) that runs past its budget (`budgets`) is 'over_budget'; one of the judge's own
    stages that runs out of the limit is a 'harness_error'; a timeout or crash names the
    stage the judge was in."""
    self._conn.send(item)
    start = time.monotonic()
    stage, stage_start = budgets.ARTIFACT_CHECKS, start
    while True:
      if self._conn.poll(POLL_S):
        kind, payload = self._receive()
        if kind == "stage":
          stage, stage_start = payload[0], time.monotonic()
          continue
        if kind == "crash":
          return kind, f"{payload} in its {stage} stage"
        if kind == "result":
          return kind, (from_json_dict(EvalRecord, payload[0]), from_json_dict(Artifacts, payload[1]))
        if kind == "compiled":
          return "result", payload[0]
        return kind, payload[0]
      if self._proc.poll() is not None:
        return "crash", f"{death_message(self._proc.returncode)} in its {stage} stage"
      budget = budgets.budget_s(self._device, stage)
      if budget is not None and time.monotonic() - stage_start > budget:
        self._end()
        return "over_budget", budgets.overrun(stage, budget)
      if time.monotonic() - start > limits.timeout_s:
        self._end()  # its dump folder stays: what it had written says where it hung
        own = stage in budgets.JUDGES_OWN
        return "harness_error" if own else "timeout", (
            f"the judge found no verdict within the {limits.timeout_s:.0f} s limit: its "
            f"{'own ' if own else ''}{stage} stage ran for the last "
            f"{time.monotonic() - stage_start:.0f} s; the process was killed")
      rss = process_rss_bytes(self._proc.pid)
      if rss > limits.memory_bytes:
        self._end()
        return "memory", (f"resident memory {rss / 2**30:.1f} GiB exceeded the "
                          f"{limits.memory_bytes / 2**30:.1f} GiB limit; the process was killed")

  def _end(self, grace_s: float = 0.0) -> None:
    """Ends the process (asks first when `grace_s` > 0, then kills); its dump folder stays."""
    if self._proc.poll() is None and grace_s > 0:
      try:
        self._conn.send(None)
        self._proc.wait(timeout=grace_s)
      except (OSError, subprocess.TimeoutExpired):
        pass
    if self._proc.poll() is None:
      self._proc.kill()
    self._proc.wait(timeout=10)
    self._conn.close()

  def close(self, grace_s: float = 5.0) -> None:
    """Asks the judge to end, kills it after `grace_s` (at once with 0), and removes its dump
    folder (a killed compile leaves what it had dumped: read it before closing)."""
    self._end(grace_s)
    if self.dump_folder is not None:
      shutil.rmtree(self.dump_folder, ignore_errors=True)


if __name__ == "__main__":
  sys.exit(serve())
