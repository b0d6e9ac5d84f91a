"""The driver: kernel source -> sandboxed exporter -> artifact -> judge process -> record.

The driver is trusted and touches no device. For each item it runs the exporter in the
sandbox (the only place candidate code runs), parses its answer as data, and hands the
judge the bytes. Any failure of either process becomes a record. A run's many items are
scheduled on a Dask cluster by `suite` (through `stages`); `run_items` evaluates a few here,
one after another.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Iterable
from typing import Final

from pallasbench_dataset.evaluation import protocol, sandbox
from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.judge.core import EvalOptions, JudgeItem, Precompiled, failure_record as judge_failure
from pallasbench_dataset.evaluation.judge.children import death_message
from pallasbench_dataset.evaluation.judge.process import JudgeConfig, JudgeWorker, Limits
from pallasbench_dataset.kernels import sha256
from pallasbench_dataset.precision import DEFAULT_PRECISION
from pallasbench_dataset.schema import Artifacts, Environment, ErrorType, EvalRecord, RunInfo, Status
from pallasbench_dataset.tasks import Size, get_task

UNAVAILABLE: Final = "the sandbox cannot run candidate code unprivileged on this host, so nothing ran: "
EXPORTER: Final = (sys.executable, "-m", "pallasbench_dataset.evaluation.exporter.program")
MAX_OUTPUT_CHARS: Final = 4000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkItem:
  task: str
  variant: str
  size: str
  source: str
  filename: str
  options: EvalOptions = EvalOptions()
  candidate: str | None = None  # a population's candidate id: part of the run's key
  precision: str = DEFAULT_PRECISION  # the task's precision (precision.PRECISIONS)
  # The export an evaluation judged again is given instead of exporting the text again: the
  # program its first judgement ran (`suite._schedule` sets it; none: the text is exported).
  exported: protocol.ExportOutcome | None = dataclasses.field(default=None, repr=False,
                                                              compare=False)
  # The secret the judge's unpredictable draws come from (`JudgeItem.secret`): drawn by the
  # verdict cache that judges a failure again, on the same draws (none: the judge's own).
  secret: int | None = dataclasses.field(default=None, repr=False, compare=False)
  # The source's sha256, hashed once here: its record's and its verdict's key's.
  kernel_sha256: str = dataclasses.field(init=False, repr=False, compare=False)

  def __post_init__(self) -> None:
    object.__setattr__(self, "kernel_sha256", sha256(self.source))


def export_request(item: WorkItem, device: str) -> protocol.ExportRequest:
  """On a GPU the judge runs the cuda export; on a CPU it runs the interpret-mode export and
  reads the structure from the cuda export (or, for kernels that do not lower to Triton,
  the TPU one), at the evaluated size and at the edge shape alike."""
  platforms = ("cuda",) if device == "gpu" else ("cuda", "tpu", "cpu")
  exports = [(item.size, platforms)]
  if item.options.checks_edge(item.size):
    exports.append((Size.EDGE.value, platforms))
  spec = get_task(item.task).at_precision(item.precision)
  inputs = tuple((size, tuple((tuple(s.shape), s.dtype.name) for s in spec.input_structs(size)))
                 for size, _ in exports)
  return protocol.ExportRequest(task=item.task, source=item.source, filename=item.filename,
                                exports=tuple(exports), reports=item.options.capture_artifacts,
                                precision=item.precision, inputs=inputs)


def _printed(run: sandbox.SandboxRun) -> str:
  text = "\n".join(t for t in (run.stdout.strip(), run.stderr.strip()) if t)
  return text[-MAX_OUTPUT_CHARS:]


def export(item: WorkItem, device: str, limits: Limits) -> protocol.ExportOutcome:
  """Runs the exporter for `item` in the sandbox; every way it can fail is an outcome. It
  runs within the export stage's budget, or the evaluation's limit where that is lower. An
  item that carries its export (`WorkItem.exported`) is not exported again."""
  if item.exported is not None:
    return item.exported
  request = export_request(item, device)
  budget = budgets.budget_s(device, budgets.EXPORT)
  timeout_s = min(limits.timeout_s, budget)
  try:
    run = sandbox.run_sandboxed(list(EXPORTER), stdin=request.to_json().encode(),
                                timeout_s=timeout_s, memory_bytes=limits.memory_bytes,
                                result_cap=protocol.MAX_RESULT_BYTES)
  except sandbox.WallsUnavailable as e:
    return protocol.ExportOutcome(report=None, failure="unavailable", output="", layers=(),
                                  wall_s=0.0, message=UNAVAILABLE + str(e))
  with run:
    outcome = dict(report=None, failure=None, message=None, output=_printed(run),
                   layers=run.layers, wall_s=run.wall_s)
    if run.violated:
      refused = run.violations[0] if run.violations else "refused an action (report fd closed)"
      outcome.update(failure="violation", message=f"sandbox violation, {refused} (a kernel may "
                     "not create processes, open sockets, load native code, inspect the "
                     "interpreter or write files)")
    elif run.unavailable is not None:
      outcome.update(failure="unavailable", message=UNAVAILABLE + run.unavailable)
    elif run.timed_out and budget < limits.timeout_s:
      outcome.update(failure="over_budget", message=budgets.overrun(
          budgets.EXPORT, budget, "import, trace, lower"))
    elif run.timed_out:
      outcome.update(failure="timeout", message=f"export (import, trace, lower) took longer "
                     f"than {limits.timeout_s:.0f} s; the exporter was killed")
    elif run.out_of_memory:
      outcome.update(failure="memory", message=f"the exporter's memory exceeded "
                     f"{limits.memory_bytes / 2**30:.1f} GiB; it was killed")
    elif run.returncode != 0:
      # Whoever ended it, the candidate's program or the host (a signal from outside, a limit
      # that aborted its start-up: red team round 19), it is no verdict on the text; a reward's
      # verdict cache judges it again alone and holds an ending that recurs (`verdicts`).
      tail = run.stderr.strip().splitlines()[-1:] or ["no error output"]
      outcome.update(failure="crash",
                     message=f"{death_message(run.returncode, 'the exporter')} ({tail[0][:300]})")
    else:
      try:
        if run.result_cut:
          raise protocol.ProtocolError(f"an answer larger than {protocol.MAX_RESULT_BYTES} bytes")
        outcome["report"] = protocol.decode(run.result, request)
      except (protocol.ProtocolError, ValueError) as e:
        outcome.update(failure="malformed", message=f"the exporter gave no usable answer: {e}")
  return protocol.ExportOutcome(**outcome)


_FAILURES: Final = {
    "timeout": (Status.TIMEOUT, ErrorType.TIMEOUT),
    # A verdict on the candidate (`budgets`) whose error type says a time limit ended it: the
    # verdict cache keeps none (`verdicts.load_decided`).
    "over_budget": (Status.REJECTED, ErrorType.TIMEOUT),
    "crash": (Status.ERROR, ErrorType.CRASH),
    "memory": (Status.ERROR, ErrorType.OUT_OF_MEMORY),
    "harness_error": (Status.ERROR, ErrorType.HARNESS),
}


def judge_item(item: WorkItem, export: protocol.ExportOutcome,
               precompiled: dict[str, Precompiled] | None = None) -> JudgeItem:
  return JudgeItem(task=item.task, variant=item.variant, size=item.size,
                   kernel_sha256=item.kernel_sha256, export=export, options=item.options,
                   precompiled=precompiled or {}, candidate=item.candidate,
                   precision=item.precision, secret=item.secret)


def empty_artifacts(item: WorkItem) -> Artifacts:
  """The artifacts line of an evaluation whose judge never reported back: every record has
  exactly one, so a missing line always means a lost write."""
  return Artifacts(task=item.task, variant=item.variant, size=item.size, jaxpr=None,
                   stablehlo=None, triton_ir=None, ptx=None, candidate=item.candidate,
                   precision=item.precision)


def failure_record(item: WorkItem, environment: Environment, run: RunInfo | None, kind: str,
                   message: str, wall_s: float) -> EvalRecord:
  """The record of an evaluation whose judge never reported back, with that judge's
  environment and run (`JudgeWorker.run_info`; None where no judge is known)."""
  status, error_type = _FAILURES[kind]
  export = protocol.ExportOutcome(report=None, failure=None, message=None, output="",
                                  layers=(), wall_s=wall_s)
  return judge_failure(judge_item(item, export), environment, run, status, error_type, message)


# Errors of a kernel that ran, after which the judge's device state is suspect: the next
# evaluation gets a fresh judge. After the others (a kernel that failed to lower or compile
# never ran) the judge is kept: a fresh one costs seconds of first-use setup on a GPU.
DEVICE_FAULTS: Final = frozenset({ErrorType.RUNTIME, ErrorType.OUT_OF_MEMORY})


# Errors from outside the kernel's control: the process running it was killed (a lost worker,
# a kill from outside), or the harness broke. They say nothing about the kernel: a resumed run
# measures them again and the verdict cache keeps none of them.
NO_VERDICT: Final = frozenset({ErrorType.CRASH, ErrorType.HARNESS})


def has_verdict(record: EvalRecord) -> bool:
  return not (record.status is Status.ERROR and record.error_type in NO_VERDICT)


def device_suspect(record: EvalRecord) -> bool:
  """Whether the judge that made `record` is replaced: its harness broke, a kernel it ran
  faulted (an `error`: a `rejected` whose analysis helper outgrew its memory is no device's),
  or a kernel that ran on its GPU did not pass. Such a kernel may have written past its
  buffers in runs no memory checker watched (memcheck watches one call, after the correctness
  runs; an incorrect kernel is never watched), and what it reached must not judge the next
  item (red team round 20)."""
  compiled = record.compile is not None and record.compile.compile_s is not None
  ran = record.correct or record.rel_l2_error is not None  # its outputs were compared
  return record.error_type is ErrorType.HARNESS or (
      compiled and record.status is Status.ERROR and record.error_type in DEVICE_FAULTS) or (
      record.device == "gpu" and ran and record.status is not Status.PASS)


def run_items(items: Iterable[WorkItem], config: JudgeConfig, limits: Limits, *,
              on_result: Callable[[EvalRecord, Artifacts], None]) -> None:
  """Evaluates `items` one after another without a cluster (the `evaluate()` API, tests):
  each export, then one judge process, replaced after a failure that leaves it suspect. The
  judge compiles each artifact itself, within the evaluation's limit."""
  worker: JudgeWorker | None = None
  try:
    for item in items:
      exported = export(item, config.device, limits)
      start = time.monotonic()
      if worker is None:
        worker = JudgeWorker(config)
      kind, payload = worker.run(judge_item(item, exported), limits)
      if kind == "result":
        record, artifacts = payload
      else:
        record = failure_record(item, worker.environment, worker.run_info, kind, payload,
                                time.monotonic() - start + exported.wall_s)
        artifacts = empty_artifacts(item)
      if kind != "result" or device_suspect(record):
        worker.close()
        worker = None
      on_result(record, artifacts)
  except BaseException:  # interrupted (Ctrl-C): the judge's work is lost anyway
    if worker is not None:
      worker.close(grace_s=0)
      worker = None
    raise
  finally:
    if worker is not None:
      worker.close()
    sandbox.remove_orphaned_scratch()  # what a judge killed on an interrupt could not remove
