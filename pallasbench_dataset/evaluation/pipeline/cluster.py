"""The Dask cluster a run is scheduled on: a local one by default, or one the user names.

The local cluster binds to 127.0.0.1 and has, on a GPU host, one judge worker per GPU
(pinned with CUDA_VISIBLE_DEVICES, as dask_cuda's LocalCUDACluster does) and CPU workers for
the export and compile stages; on a CPU host, one judge worker and the CPU workers. Every
worker runs one task at a time: its stage's process is the real worker. Each worker's Nanny
runs in a program of its own (`nanny`), started as `python -m`: nothing is spawned from the
caller's process, so a trainer's script or notebook that starts a cluster is never imported
again by a worker and needs no main guard. Dask's scratch space lives in the folder the
caller names, which it removes: nothing is left in the temporary folder.

An existing cluster (`--scheduler ADDRESS`) needs workers that declare the resources the
stages ask for, e.g. on each GPU `CUDA_VISIBLE_DEVICES=i dask worker ADDRESS --nthreads 1
--resources judge=1` and on CPU cores `dask worker ADDRESS --nthreads 1 --resources cpu=1`,
with this package importable and, for the compile stage to help the judges, a compile
cache folder (`--compile-cache`) that all hosts share.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Final

import dask
import distributed
import psutil
from distributed.deploy.spec import ProcessInterface

from pallasbench_dataset.evaluation.pipeline import stages

logger = logging.getLogger(__name__)

MAX_CPU_WORKERS: Final = 16
# A worker lost while running an evaluation (killed, out of memory) is retried once on
# another worker; lost twice, the evaluation is recorded as an error.
ALLOWED_FAILURES: Final = 1
NVIDIA_GPUS: Final = pathlib.Path("/proc/driver/nvidia/gpus")
NANNY_PROGRAM: Final = (sys.executable, "-m", "pallasbench_dataset.evaluation.pipeline.nanny")
# The Dask settings a Nanny program takes from the driver (those `connect` sets).
NANNY_SETTINGS: Final = ("distributed.worker.daemon", "temporary-directory")
NANNY_START_S: Final = 120.0  # a worker that has not joined by then failed to start
NANNY_STOP_S: Final = 30.0  # a Nanny closes its worker within this, or is killed


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkerPlan:
  gpus: tuple[int, ...]  # one judge worker per GPU; empty on a CPU host (one CPU judge)
  cpu_workers: int


def gpu_count() -> int:
  """GPUs the NVIDIA driver lists, read without starting CUDA in the driver process."""
  try:
    return len(list(NVIDIA_GPUS.iterdir()))
  except OSError:
    return 0


def default_plan(device: str, gpus: int | None = None, cpu_workers: int | None = None) -> WorkerPlan:
  """All GPUs (or `gpus`) and, by default, the CPU cores the judges leave, up to 16."""
  n_gpus = (gpus or max(gpu_count(), 1)) if device == "gpu" else 0
  judges = max(n_gpus, 1)
  cpus = cpu_workers or max(1, min((os.cpu_count() or 2) - judges, MAX_CPU_WORKERS))
  return WorkerPlan(gpus=tuple(range(n_gpus)), cpu_workers=cpus)


class NannyProgram(ProcessInterface):
  """A worker of a SpecCluster whose Nanny runs in a program of its own (module `nanny`),
  with the options a `distributed.Nanny` takes. Awaited, it returns once the worker has
  joined the scheduler; closed, it closes the program's standard input (the Nanny then closes
  its worker) and kills what is left after NANNY_STOP_S."""

  def __init__(self, scheduler: str, **options):
    super().__init__()
    self.name = options.get("name")
    self._spec = json.dumps({"scheduler": scheduler, "options": options,
                             "config": {k: dask.config.get(k, None) for k in NANNY_SETTINGS}})
    self._process: asyncio.subprocess.Process | None = None

  async def start(self) -> None:
    self._process = await asyncio.create_subprocess_exec(
        *NANNY_PROGRAM, self._spec, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE)
    try:
      line = await asyncio.wait_for(self._process.stdout.readline(), NANNY_START_S)
    except asyncio.TimeoutError:
      line = b""
    if not line:
      await self.close()
      raise RuntimeError(f"the Dask worker {self.name} did not start within {NANNY_START_S:.0f} "
                         "s (its errors are above)")
    self.address = line.decode().strip()
    await super().start()

  async def close(self) -> None:
    process, self._process = self._process, None
    if process is not None and process.returncode is None:
      process.stdin.close()
      try:
        await asyncio.wait_for(process.wait(), NANNY_STOP_S)
      except asyncio.TimeoutError:
        _kill_tree(process.pid)
        await process.wait()
    await super().close()


def _kill_tree(pid: int) -> None:
  try:
    parent = psutil.Process(pid)
    for process in (*parent.children(recursive=True), parent):
      process.kill()
  except psutil.NoSuchProcess:
    pass


def _worker(name: str, resource: str, env: dict[str, str], directory: str) -> dict:
  return {"cls": NannyProgram, "options": dict(
      name=name, nthreads=1, resources={resource: 1}, env=env, memory_limit=0,
      host="127.0.0.1", dashboard=False, local_directory=directory, silence_logs=logging.WARNING)}


def worker_specs(plan: WorkerPlan, directory: str) -> dict[str, dict]:
  specs = {}
  if plan.gpus:
    for gpu in plan.gpus:
      specs[f"judge-gpu{gpu}"] = _worker(f"judge-gpu{gpu}", stages.GPU_RESOURCE,
                                         {"CUDA_VISIBLE_DEVICES": str(gpu)}, directory)
  else:
    specs["judge-cpu"] = _worker("judge-cpu", stages.GPU_RESOURCE, {}, directory)
  for i in range(plan.cpu_workers):
    # Compilers need a CUDA device to compile for; they spread over the GPUs.
    env = {"CUDA_VISIBLE_DEVICES": str(plan.gpus[i % len(plan.gpus)])} if plan.gpus else {}
    specs[f"cpu-{i}"] = _worker(f"cpu-{i}", stages.CPU_RESOURCE, env, directory)
  return specs


class _CloseStageProcesses(distributed.WorkerPlugin):
  """Leaves Ctrl-C to the driver, and closes a worker's compiler and judge processes when the
  worker stops.

  The terminal sends SIGINT to the whole process group: the driver answers it (it closes the
  cluster and says how to resume), so a worker and the processes it starts (which inherit the
  ignored signal) ignore it instead of dying mid-task with a traceback each."""

  name = "pallasbench-stage-processes"
  # Registered by every client that connects: a second registration would tear the first
  # down, closing judges that a long-lived cluster (the reward function's) keeps warm.
  idempotent = True

  def setup(self, worker) -> None:
    if threading.current_thread() is threading.main_thread():
      signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Tasks cancelled because the driver closes the cluster (an interrupted run) are no news.
    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)

  def teardown(self, worker) -> None:
    stages.shutdown()


def _check_resources(client: distributed.Client, address: str) -> None:
  workers = client.scheduler_info()["workers"].values()
  have = {r for w in workers for r in (w.get("resources") or {})}
  missing = {stages.GPU_RESOURCE, stages.CPU_RESOURCE} - have
  if missing:
    raise RuntimeError(f"the Dask cluster at {address} has no worker with the resource(s) "
                       f"{sorted(missing)}: start judge workers with `--resources "
                       f"{stages.GPU_RESOURCE}=1` (one per GPU) and export/compile workers with "
                       f"`--resources {stages.CPU_RESOURCE}=1`")


@contextlib.contextmanager
def connect(plan: WorkerPlan, *, scheduler: str | None, directory: pathlib.Path
            ) -> Iterator[distributed.Client]:
  """A client of the named scheduler, or of a local cluster that lives as long as the block."""
  if scheduler is not None:
    with distributed.Client(scheduler, timeout="30s") as client:
      _check_resources(client, scheduler)
      client.register_plugin(_CloseStageProcesses())
      yield client
    return
  config = {"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
            "distributed.worker.daemon": False, "temporary-directory": str(directory)}
  with dask.config.set(config):
    cluster = distributed.SpecCluster(
        workers=worker_specs(plan, str(directory)),
        scheduler={"cls": distributed.Scheduler,
                   "options": dict(host="127.0.0.1", port=0, dashboard_address=None)},
        silence_logs=logging.WARNING, name="pallasbench")
    try:
      with distributed.Client(cluster) as client:
        client.register_plugin(_CloseStageProcesses())
        try:
          yield client
        finally:
          _close_stage_processes(client)
    except BaseException:
      # Stopped mid-run (a signal, an error): workers die with tasks in flight, which Dask
      # logs as errors by the dozen. The run's own message says what happened.
      logging.getLogger("distributed").setLevel(logging.CRITICAL)
      raise
    finally:
      cluster.close()


def _close_stage_processes(client: distributed.Client) -> None:
  """Closes every worker's judge and compiler processes before the cluster closes: a nanny
  gives its worker 4 s to stop before it kills it (and logs so), and a GPU judge can take
  longer than that to end. A worker that cannot answer is left to the nanny."""
  try:
    client.run(stages.shutdown)
  except Exception as e:  # pylint: disable=broad-except  (closing: the nanny kills what is left)
    logger.debug("closing the stage processes: %s", e)
