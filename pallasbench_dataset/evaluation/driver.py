"""The driver: kernel source -> sandboxed exporter -> artifact -> judge process -> record.

The driver is trusted and touches no device. For each item it runs the exporter in the
sandbox (the only place candidate code runs), parses its answer as data, and hands the
judge the bytes. The export of the next item runs while the judge works on the current
one. Any failure of either process becomes a record; the run goes on.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from pallasbench_dataset.evaluation import protocol, sandbox
from pallasbench_dataset.evaluation.judge import EvalOptions, JudgeItem, failure_record as judge_failure
from pallasbench_dataset.evaluation.judge_process import JudgeConfig, JudgeWorker, Limits, death_message
from pallasbench_dataset.kernels import sha256
from pallasbench_dataset.schema import Artifacts, Environment, ErrorType, EvalRecord, Status
from pallasbench_dataset.tasks import Size

EXPORTER: Final = (sys.executable, "-m", "pallasbench_dataset.evaluation.exporter")
MAX_OUTPUT_CHARS: Final = 4000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkItem:
  task: str
  variant: str
  size: str
  source: str
  filename: str
  options: EvalOptions = EvalOptions()


def export_request(item: WorkItem, device: str) -> protocol.ExportRequest:
  """On a GPU the judge runs the cuda export; on a CPU it runs the interpret-mode export and
  reads the structure from the cuda export (or, for kernels that do not lower to Triton,
  the TPU one)."""
  main = ("cuda",) if device == "gpu" else ("cuda", "tpu", "cpu")
  exports = [(item.size, main)]
  if item.options.check_edge and Size(item.size) is not Size.EDGE:
    exports.append((Size.EDGE.value, ("cuda",) if device == "gpu" else ("cpu",)))
  return protocol.ExportRequest(task=item.task, source=item.source, filename=item.filename,
                                exports=tuple(exports), reports=item.options.capture_artifacts)


def _printed(run: sandbox.SandboxRun) -> str:
  text = "\n".join(t for t in (run.stdout.strip(), run.stderr.strip()) if t)
  return text[-MAX_OUTPUT_CHARS:]


def export(item: WorkItem, device: str, limits: Limits) -> protocol.ExportOutcome:
  """Runs the exporter for `item` in the sandbox; every way it can fail is an outcome."""
  request = export_request(item, device)
  with sandbox.run_sandboxed(list(EXPORTER), stdin=request.to_json().encode(),
                             timeout_s=limits.timeout_s, memory_bytes=limits.memory_bytes) as run:
    outcome = dict(report=None, failure=None, message=None, output=_printed(run),
                   layers=run.layers, wall_s=run.wall_s)
    if run.violated:
      refused = run.violations[0] if run.violations else "refused an action (report fd closed)"
      outcome.update(failure="violation", message=f"sandbox violation, {refused} (a kernel may "
                     "not create processes, open sockets, load native code, inspect the "
                     "interpreter or write outside its folder)")
    elif run.timed_out:
      outcome.update(failure="timeout", message=f"export (import, trace, lower) took longer "
                     f"than {limits.timeout_s:.0f} s; the exporter was killed")
    elif run.out_of_memory:
      outcome.update(failure="memory", message=f"the exporter's memory exceeded "
                     f"{limits.memory_bytes / 2**30:.1f} GiB; it was killed")
    elif run.returncode != 0:
      tail = run.stderr.strip().splitlines()[-1:] or ["no error output"]
      outcome.update(failure="crash",
                     message=f"{death_message(run.returncode, 'the exporter')} ({tail[0][:300]})")
    else:
      try:
        answer = run.read_file(protocol.RESULT_FILE, max_bytes=protocol.MAX_RESULT_BYTES)
        outcome["report"] = protocol.decode(answer, request)
      except (protocol.ProtocolError, OSError, ValueError) as e:
        outcome.update(failure="malformed", message=f"the exporter gave no usable answer: {e}")
  return protocol.ExportOutcome(**outcome)


_FAILURES: Final = {
    "timeout": (Status.TIMEOUT, ErrorType.TIMEOUT),
    "crash": (Status.ERROR, ErrorType.CRASH),
    "memory": (Status.ERROR, ErrorType.OUT_OF_MEMORY),
    "harness_error": (Status.ERROR, ErrorType.HARNESS),
}


def _judge_item(item: WorkItem, export: protocol.ExportOutcome) -> JudgeItem:
  return JudgeItem(task=item.task, variant=item.variant, size=item.size,
                   kernel_sha256=sha256(item.source), export=export, options=item.options)


def failure_record(item: WorkItem, environment: Environment, kind: str, message: str,
                   wall_s: float) -> EvalRecord:
  """The record of an evaluation whose judge never reported back."""
  status, error_type = _FAILURES[kind]
  export = protocol.ExportOutcome(report=None, failure=None, message=None, output="",
                                  layers=(), wall_s=wall_s)
  return judge_failure(_judge_item(item, export), environment, status, error_type, message)


def _exports(items: Iterable[WorkItem], device: str, limits: Limits
             ) -> Iterator[tuple[WorkItem, concurrent.futures.Future]]:
  """Each item with its export, started one item ahead."""
  with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
    pending = None
    for item in items:
      future = pool.submit(export, item, device, limits)
      if pending is not None:
        yield pending
      pending = (item, future)
    if pending is not None:
      yield pending


def run_items(items: Iterable[WorkItem], config: JudgeConfig, limits: Limits, *,
              on_result: Callable[[EvalRecord, Artifacts | None], None],
              fresh_process_per: str = "task",
              on_ready: Callable[[Environment, dict], None] | None = None) -> None:
  """Evaluates `items`, calling `on_result` once per item, in order.

  fresh_process_per: "item", "task" or "error" (keep the judge until an error record). The
  first judge measures the ceilings and reports them with its environment through
  `on_ready`; later judges reuse them, so they are measured once per call.
  """
  worker: JudgeWorker | None = None
  env: Environment | None = None
  last_task = None
  try:
    for item, exported in _exports(items, config.device, limits):
      if worker is not None and (fresh_process_per == "item" or
                                 (fresh_process_per == "task" and item.task != last_task)):
        worker.close()
        worker = None
      if worker is None:
        worker = JudgeWorker(config)
        if env is None and on_ready is not None:
          on_ready(worker.environment, worker.ceilings)
        env = worker.environment
        config = dataclasses.replace(config, ceilings=worker.ceilings)
      last_task = item.task
      outcome = exported.result()
      start = time.monotonic()
      kind, payload = worker.run(_judge_item(item, outcome), limits)
      if kind == "result":
        record, artifacts = payload
        on_result(record, artifacts)
        if record.status is Status.ERROR:
          worker.close()
          worker = None
        continue
      on_result(failure_record(item, env, kind, payload,
                               time.monotonic() - start + outcome.wall_s), None)
      worker.close()
      worker = None
  finally:
    if worker is not None:
      worker.close()
