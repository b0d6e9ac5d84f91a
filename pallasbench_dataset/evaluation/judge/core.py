"""The judge: trusted, never imports candidate code. Artifact in, record out.

    python -m pallasbench_dataset.evaluation.judge.core --fd N --device gpu   (started by the driver)

For each item it deserializes the candidate's `jax.export` artifacts, checks them against
the task (avals, effects, custom calls, the structure of the module), compiles the one for
this device, draws seeds from the OS, runs the candidate on every input the verdict needs
and copies its outputs to the host, and only then computes the references and compares.
Timing interleaves candidate and baseline (and, for a candidate on a GPU, the task's shipped
kernel: `speedup_shipped`) on inputs of their own, drawn for each call just before it (no two
calls given the same input, none alive before its call), and checks a secret sample of the
candidate's timed outputs: on a GPU, every one whose host copy fits the judge's budget.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import logging
import math
import pathlib
import random
import secrets
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import jax
import numpy as np

from pallasbench_dataset.evaluation import sandbox
from pallasbench_dataset.evaluation.judge import (
    artifact_header, budgets, checks, fingerprint, memcheck, module_analysis, timing)
from pallasbench_dataset.evaluation.judge.ceilings import Ceilings, measure as measure_ceilings
from pallasbench_dataset.evaluation.judge.compile_profile import CompiledArtifact, compile_exported
from pallasbench_dataset.evaluation.errors import classify, headline, short_error
from pallasbench_dataset.evaluation.protocol import ExportOutcome, ExportReport, SizeExport
from pallasbench_dataset.kernels import Variant, load_kernel
from pallasbench_dataset.precision import DEFAULT_PRECISION
from pallasbench_dataset.schema import (
    Artifacts, CompileProfile, Environment, ErrorType, EvalRecord, FilterResult, PallasCallInfo,
    Roofline, RunInfo, StageTimes, Status, from_json_dict)
from pallasbench_dataset.tasks import Dims, Size, TaskSpec, get_task
from pallasbench_dataset.tolerance import compare

if TYPE_CHECKING:
  from pallasbench_dataset.evaluation.judge.analysis_process import ModuleAnalyser

logger = logging.getLogger(__name__)

JUDGE_VERSION: Final = "4"
# What jax says when a host callback is lowered for a platform the process has no backend for
# (the exporter runs on the CPU and exports for cuda): a callback, not a lowering bug.
_CALLBACK_PLATFORM_ERROR: Final = "ValueError: the platform for the specified backend"
# The timed outputs checked (timed_outputs_checked): at least three, and on a GPU every timed
# call's where their host copies fit in 4 GiB: all 50 at `medium`, and at `large` of every
# contraction but linear_bias_relu (32 of its 128 MiB outputs); 4 of an elementwise op's
# 1 GiB, where the bandwidth ceiling bounds what a lazy call could gain.
MIN_TIMED_OUTPUTS_CHECKED: Final = 3
KEPT_OUTPUT_BYTES: Final = 4 << 30
# How far above a ceiling a rate may be before it is called impossible: every ceiling is a
# measured rate (a lower bound on the hardware), and an honest kernel a little faster than XLA
# where XLA runs at the measured ceiling must pass (release 4: XLA's reductions ran 0.5% above
# the read ceiling; medians of one kernel differed by 1.1% between runs at the 90th percentile).
CEILING_TOLERANCE: Final = 0.05
MAX_OUTPUT_CHARS: Final = 4000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EvalOptions:
  """How thoroughly to evaluate; the defaults follow docs/design.md's measurement protocol."""
  seeds: tuple[int, ...] = ()      # empty: fresh seeds from the OS, recorded in the record
  num_seeds: int = 5
  check_edge: bool = True          # also run the task's edge shape (general_shapes)
  timing_iterations: int = 50
  timing_rounds: int = 2           # kernel, baseline | baseline, kernel
  warmup: int = 3
  capture_artifacts: bool = True
  memcheck: bool = True            # one call under compute-sanitizer memcheck (a GPU judge)
  reject_copies: bool = False      # reject a candidate whose kernels are a shipped kernel's
  # On a GPU, time the task's shipped kernel beside a candidate (the reward's second reference,
  # `speedup_shipped`): a copy of it, however disguised, is paid parity at most.
  time_shipped: bool = True

  def checks_edge(self, size: str) -> bool:
    """Whether an evaluation at `size` also runs the edge shape (not when it is the edge)."""
    return self.check_edge and Size(size) is not Size.EDGE


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Precompiled:
  """The compile stage's word on one artifact. The compile stage is the project's own
  process (it runs no candidate Python), so its word is trusted: a compile that failed or
  ran out of its budget there is not tried again on the device."""
  outcome: str                  # "compiled", "failed", "timeout" or "skipped" (not compilable)
  compile_s: float | None = None  # the cold compile
  ptx: tuple[str, ...] = ()
  message: str | None = None    # the compiler's error, or what ran out
  wall_s: float = 0.0           # the stage's wall time, process start included
  concurrent: int | None = None  # compiles the stage had running at once, this one included


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompileItem:
  """A request to the compile stage: one artifact, compiled into the persistent cache."""
  task: str
  size: str
  blob: bytes
  precision: str = DEFAULT_PRECISION


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JudgeItem:
  """One evaluation as the judge receives it: the kernel only as exported bytes."""
  task: str
  variant: str
  size: str
  kernel_sha256: str
  export: ExportOutcome
  options: EvalOptions = EvalOptions()
  precompiled: dict[str, Precompiled] = dataclasses.field(default_factory=dict)  # by size
  candidate: str | None = None  # a population's candidate id, copied to the record
  precision: str = DEFAULT_PRECISION  # the task's precision: the inputs drawn, the tolerance
  # What the draws a kernel must not predict come from (each timing call's inputs, the sample
  # of kept outputs): the driver's secret, kept to judge the same draws again; none: OS draws.
  secret: int | None = None

  @property
  def spec(self) -> TaskSpec:
    return get_task(self.task).at_precision(self.precision)


def _shared_analyser() -> ModuleAnalyser:
  """The judge process' analysis helper of candidates' modules. Imported here, not with this
  module: the exporter imports the judge's names, and the helper's process plumbing is no
  business of its."""
  from pallasbench_dataset.evaluation.judge import analysis_process  # pylint: disable=import-outside-toplevel
  return analysis_process.shared()


def _trusted_analyser() -> ModuleAnalyser:
  """The judge process' analysis helper of the shipped kernels' modules (the copy check)."""
  from pallasbench_dataset.evaluation.judge import analysis_process  # pylint: disable=import-outside-toplevel
  return analysis_process.trusted()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Context:
  """What a judge process measures once and shares across its evaluations."""
  environment: Environment
  ceilings: Ceilings
  timing_method: timing.TimingMethod
  l2_bytes: int
  dump_dir: pathlib.Path | None
  # Where modules are read: a helper process, so that a module built to crash MLIR's parser
  # cannot take the judge down; a fresh one for each item (`evaluate_artifact`, `precompile`),
  # and one of its own for the shipped kernels, which never reads a candidate's bytes.
  analyser: ModuleAnalyser = dataclasses.field(default_factory=_shared_analyser)
  trusted_analyser: ModuleAnalyser = dataclasses.field(default_factory=_trusted_analyser)
  stage: Callable[[str], None] = lambda _: None  # told each stage as it starts (for timeouts)
  run: RunInfo | None = None  # each record's `run`: the suite's run and these ceilings

  @property
  def on_gpu(self) -> bool:
    return self.environment.platform == "gpu"

  @property
  def run_platform(self) -> str:
    return "cuda" if self.on_gpu else "cpu"


class Failure(Exception):
  """Ends an evaluation with a status other than pass; the message is the reason."""

  def __init__(self, status: Status, error_type: ErrorType | None, message: str):
    super().__init__(message)
    self.status, self.error_type = status, error_type


class Unanalysable(Failure):
  """An artifact whose module the analysis refused (it cannot be costed, exhausted the
  analysis' budget, or crashed it): rejected, whichever of the candidate's artifacts it is;
  its error type says which limit or signal ended the helper, where one did (`ended_by`)."""

  def __init__(self, error: module_analysis.ModuleAnalysisError):
    super().__init__(Status.REJECTED, error.ended_by,
                     f"the exported module cannot be analysed: {error}")


def _shape_text(shape: Sequence[int]) -> str:
  return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def load_artifact(blob: bytes, spec: TaskSpec, dims: Dims, platform: str) -> jax.export.Exported:
  """Deserializes an artifact and checks its interface against the task; Failure if off. The
  header is read first (`artifact_header`): symbolic shapes never reach jax's parser."""
  try:
    artifact_header.check_header(blob)
  except artifact_header.HeaderError as e:
    raise Failure(Status.REJECTED, None, f"the artifact is refused before it is read: {e}") from None
  try:
    exported = jax.export.deserialize(bytearray(blob))
  except Exception as e:  # hostile bytes may fail in any way
    raise Failure(Status.REJECTED, None, f"the artifact does not deserialize: {short_error(e)}") from None
  want_in = [(tuple(s.shape), np.dtype(s.dtype)) for s in spec.input_structs(dims)]
  got_in = [(tuple(a.shape), np.dtype(a.dtype)) for a in exported.in_avals]
  problems = []
  if platform not in exported.platforms:
    problems.append(f"exported for {list(exported.platforms)}, not {platform}")
  if got_in != want_in:
    problems.append(f"inputs {got_in} differ from the task's {want_in}")
  if exported.nr_devices != 1:
    problems.append(f"{exported.nr_devices} devices")
  if exported.in_tree != jax.tree.structure((tuple(range(len(want_in))), {})):
    problems.append(f"an input structure {exported.in_tree} other than the task's arrays")
  if problems:
    raise Failure(Status.REJECTED, None, "the artifact does not implement the task's interface: "
                  + "; ".join(problems))
  want_out = (tuple(spec.output(dims)), np.dtype(spec.output_dtype))
  got_out = [(tuple(a.shape), np.dtype(a.dtype)) for a in exported.out_avals]
  if got_out != [want_out] or exported.out_tree.num_leaves != 1:
    raise Failure(Status.ERROR, ErrorType.OUTPUT,
                  f"kernel returns {got_out}, expected one array {want_out}")
  return exported


def _export_failure(export: ExportOutcome) -> Failure | None:
  if export.failure is None:
    return None
  status, error_type = {
      "timeout": (Status.TIMEOUT, ErrorType.TIMEOUT),
      "over_budget": (Status.REJECTED, ErrorType.TIMEOUT),  # its budget ended it: never cached
      "violation": (Status.REJECTED, None),
      "memory": (Status.ERROR, ErrorType.OUT_OF_MEMORY),
      "crash": (Status.ERROR, ErrorType.CRASH),
      "malformed": (Status.REJECTED, None),
      "unavailable": (Status.ERROR, ErrorType.HARNESS)}[export.failure]
  return Failure(status, error_type, export.message or export.failure)


@dataclasses.dataclass(slots=True)
class _State:
  """What an evaluation found so far, for the record whatever the outcome."""
  fields: dict[str, Any]
  structure_text: str | None = None
  compiled: CompiledArtifact | None = None
  run_blob: bytes | None = None
  cache_hit: bool | None = None
  seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # checks, timing, eager


NO_DEVICE_EXPORT: Final = ("the kernel exports for no device platform (neither Triton nor TPU "
                           "lowering worked), so its structure cannot be checked")


def _no_device_export(entry: SizeExport) -> str:
  """NO_DEVICE_EXPORT with the first line of why the Triton (cuda) export failed, at most 300
  characters: what a search loop can act on."""
  why = (entry.errors.get("cuda") or "").strip().splitlines()
  return f"{NO_DEVICE_EXPORT} (Triton: {why[0][:300]})" if why else NO_DEVICE_EXPORT


def _structure_platform(entry: SizeExport, ctx: Context) -> str | None:
  """The platform whose export shows a size's structure: cuda (on a CPU host the TPU export
  stands in when the kernel does not lower to Triton), or None."""
  return next((p for p in ("cuda", "tpu") if p in entry.artifacts and
               (ctx.on_gpu is False or p == "cuda")), None)


def _sized_reasons(found: module_analysis.ModuleReport, spec: TaskSpec, dims: Dims) -> list[str]:
  return module_analysis.module_reasons(
      found, task_flops=spec.flops(dims), output_elements=math.prod(spec.output(dims)),
      task_bytes=spec.io_bytes(dims))


def _structure_reasons(report: ExportReport, item: JudgeItem, spec: TaskSpec, dims: Dims,
                       ctx: Context, state: _State) -> list[str]:
  """Rejections read from the module the kernel exports for a device (`_structure_platform`)."""
  main = report.size(item.size)
  platform = _structure_platform(main, ctx)
  if platform is None:
    return [_no_device_export(main)]
  exported = load_artifact(main.artifacts[platform], spec, dims, platform)
  found, state.structure_text = _analyze(exported, ctx)
  state.fields["backends"] = tuple(sorted({k.backend for k in found.kernels}))
  reasons = _sized_reasons(found, spec, dims)
  if item.variant == Variant.CANDIDATE:  # on whichever platform's export the structure is read
    ctx.stage(budgets.COPY_CHECK)  # the shipped kernels exported here: the judge's own work
    try:
      copies = fingerprint.shipped_copies(found.kernels, spec.name, item.size, item.precision,
                                          ctx.trusted_analyser, platform=platform)
    except fingerprint.ShippedAnalysisError as e:  # no verdict without the copy check
      raise Failure(Status.ERROR, ErrorType.HARNESS, f"the copy check cannot run: {e}") from None
    ctx.stage(budgets.ARTIFACT_CHECKS)
    state.fields["copy_of"] = copies
    if copies and item.options.reject_copies:
      reasons.append(fingerprint.copy_reason(copies))
  return reasons


def _analyze(exported: jax.export.Exported, ctx: Context) -> tuple[module_analysis.ModuleReport, str]:
  """The artifact's module, read and analysed in the helper process, and its text."""
  ctx.stage(budgets.MODULE_ANALYSIS)
  try:
    return ctx.analyser.analyse(exported.mlir_module_serialized)
  except module_analysis.ModuleAnalysisError as e:
    raise Unanalysable(e) from None
  except sandbox.WallsUnavailable as e:  # no artifact's fault: this host cannot judge
    raise Failure(Status.ERROR, ErrorType.HARNESS, f"the module analysis cannot run behind "
                  f"its walls here, so no module is read: {e}") from None


def _admit(blob: bytes, spec: TaskSpec, dims: Dims, ctx: Context
           ) -> tuple[jax.export.Exported, module_analysis.ModuleReport]:
  """The artifact this device runs, loaded and analysed (the analysis is returned): the checks
  no compiled program needs to pass, made before anything of the candidate's is compiled."""
  exported = load_artifact(blob, spec, dims, ctx.run_platform)
  found, _ = _analyze(exported, ctx)
  if found.disallowed_custom_calls:
    raise Failure(Status.REJECTED, None, f"the artifact calls {sorted(found.disallowed_custom_calls)}: "
                  "custom calls other than Pallas kernels are not allowed")
  if found.stateful_ops:
    raise Failure(Status.REJECTED, None, f"stateful ops {sorted(found.stateful_ops)} in the "
                  "artifact: an exported kernel must be a pure function of its inputs")
  return exported, found


def _compile(exported: jax.export.Exported, spec: TaskSpec, dims: Dims, ctx: Context,
             note: Precompiled | None) -> CompiledArtifact:
  """Compiles an admitted artifact (`_admit`): what the compile stage could not compile fails
  here without a second try on the device, and what it compiled comes from the persistent
  cache (its cold compile time and PTX are kept)."""
  if note is not None and note.outcome == "failed":
    raise Failure(Status.ERROR, classify(note.message or "", "compile"),
                  short_error(note.message or "compile failed"))
  if note is not None and note.outcome == "timeout":  # over the compile stage's budget
    raise Failure(Status.REJECTED, ErrorType.TIMEOUT, f"compile stage: {note.message}")
  ctx.stage(budgets.COMPILE)
  try:
    compiled = compile_exported(exported, spec.input_structs(dims), ctx.dump_dir,
                                ptx_past_cache=not (note is not None and note.ptx))
  except Exception as e:  # XLA, Triton or ptxas refused the kernel
    raise Failure(Status.ERROR, classify(e, "compile"), short_error(e)) from None
  if note is not None and note.outcome == "compiled":
    compiled = dataclasses.replace(compiled, compile_s=note.compile_s, ptx=note.ptx or compiled.ptx)
  return compiled


def precompile(item: CompileItem, ctx: Context) -> Precompiled:
  """The compile stage: compiles one artifact into the persistent cache that the judges read.

  Runs in a process of its own, killed when the budget runs out. The artifact is admitted
  first (`_admit`: loaded, and analysed in the walled helper), so nothing the analysis refuses
  is ever compiled, here or on the device. One that does not deserialize, does not match the
  task or is refused is "skipped": the judge, admitting it again, says why in the record.
  """
  start = time.perf_counter()
  spec = get_task(item.task).at_precision(item.precision)
  dims = spec.dims(item.size)
  try:
    exported, _ = _admit(item.blob, spec, dims, ctx)
  except Failure as e:  # Unanalysable included
    return Precompiled(outcome="skipped", message=str(e), wall_s=time.perf_counter() - start)
  finally:
    ctx.analyser.fresh()  # the next item's modules go to a helper this one's never touched
  ctx.stage(budgets.COMPILE)
  try:
    compiled = compile_exported(exported, spec.input_structs(dims), ctx.dump_dir)
  except Exception as e:  # XLA, Triton or ptxas refused the kernel
    return Precompiled(outcome="failed", message=str(e), wall_s=time.perf_counter() - start)
  return Precompiled(outcome="compiled", compile_s=compiled.compile_s, ptx=compiled.ptx,
                     wall_s=time.perf_counter() - start)


def _artifact_blob(report: ExportReport, size: str, platform: str) -> bytes:
  entry = report.size(size)
  if entry is None:
    raise Failure(Status.REJECTED, None, f"the exporter returned no export for size {size}")
  if platform not in entry.artifacts:
    stage = entry.stage or "export"
    message = entry.errors.get(platform) or next(iter(entry.errors.values()), "no artifact")
    first = message.splitlines()[0] if message else ""
    if "callback" in first.lower() or first.startswith(_CALLBACK_PLATFORM_ERROR):
      if platform != "cuda" and "cuda" in entry.artifacts:
        raise Failure(Status.ERROR, ErrorType.LOWERING, "not judgeable on this device: the "
                      f"kernel's {platform} export runs on host callbacks (an interpreter's, "
                      "such as Mosaic GPU's) that no export carries, while its cuda export "
                      f"carries none; judge it on a GPU ({first})")
      raise Failure(Status.REJECTED, None, "host callbacks: the kernel calls back into Python "
                    f"on the host, work no exported kernel can carry ({first})")
    raise Failure(Status.ERROR, classify(message, "trace" if stage == "trace" else "lowering"),
                  message)
  return entry.artifacts[platform]


def evaluate_artifact(item: JudgeItem, ctx: Context) -> tuple[EvalRecord, Artifacts]:
  """The verdict on one exported kernel; never raises for the kernel's faults."""
  start = time.perf_counter()
  spec = item.spec
  dims = spec.dims(item.size)
  opts = item.options
  seeds = opts.seeds or tuple(secrets.randbelow(2**31) for _ in range(opts.num_seeds))
  state = _State(fields=_base_fields(item, spec, dims, seeds, ctx.environment))
  try:
    _verdict(item, spec, dims, seeds, ctx, state)
  except Failure as e:
    message = str(e)
    state.fields.update(status=e.status, error_type=e.error_type,
                        error=short_error(message) if e.error_type else None,
                        reasons=(*state.fields.get("reasons", ()), headline(message)))
  except checks.OutputError as e:
    state.fields.update(status=Status.ERROR, error_type=ErrorType.OUTPUT, error=str(e),
                        reasons=(*state.fields.get("reasons", ()), str(e)))
  except Exception as e:  # the candidate's program failed while running
    state.fields.update(status=Status.ERROR, error_type=classify(e, "run"),
                        error=short_error(e),
                        reasons=(*state.fields.get("reasons", ()), headline(e)))
  finally:
    ctx.analyser.fresh()  # the next item's modules go to a helper this one's never touched
  record = _finish(item, state, ctx.environment, ctx.run, time.perf_counter() - start)
  report = item.export.report
  artifacts = Artifacts(
      task=spec.name, variant=item.variant, size=item.size, precision=item.precision,
      candidate=item.candidate, jaxpr=report.jaxpr if report else None,
      stablehlo=state.structure_text,
      triton_ir="\n\n".join(report.triton_ir) or None if report else None,
      ptx="\n\n".join(state.compiled.ptx) or None if state.compiled else None)
  return record, artifacts


def _verdict(item: JudgeItem, spec: TaskSpec, dims: Dims, seeds: tuple[int, ...], ctx: Context,
             state: _State) -> None:
  failure = _export_failure(item.export)
  if failure is not None:
    raise failure
  report = item.export.report
  if report.load_error:
    raise Failure(Status.ERROR, classify(report.load_error, "load"), report.load_error)
  declared = report.size(item.size).config if report.size(item.size) else None
  state.fields["kernel_config"] = json.dumps(declared) if declared is not None else None
  state.run_blob = _artifact_blob(report, item.size, ctx.run_platform)
  reasons = _structure_reasons(report, item, spec, dims, ctx, state)
  if report.input_writes:  # the exporter's own reading of its jaxpr: it can only add
    reasons.append(f"the kernel writes to its input refs ({'; '.join(report.input_writes)}): "
                   "inputs mutated in place")
  state.fields["reasons"] = tuple(reasons)  # kept should the admission refuse the artifact
  exported, admitted = _admit(state.run_blob, spec, dims, ctx)
  state.fields["prefilled_bytes"] = admitted.prefilled_bytes
  admitted_edge = _admitted_edge(report, item, spec, ctx)
  if reasons:  # rejected on what the kernel exported: nothing of it is compiled, run or timed
    state.fields["status"] = Status.REJECTED
    return
  state.compiled = _compile(exported, spec, dims, ctx, item.precompiled.get(item.size))
  state.cache_hit = state.compiled.cache_hit
  edge = _edge(admitted_edge, item, spec, ctx)
  start = time.perf_counter()
  ctx.stage(budgets.CORRECTNESS)
  runs = checks.run_candidate(state.compiled.executable, spec, dims, seeds, on_gpu=ctx.on_gpu,
                              edge=edge)
  verdict = checks.judge_outputs(runs, spec, dims, edge[1] if edge else None)
  state.seconds["checks_s"] = time.perf_counter() - start
  reasons += list(verdict.rejections)
  failed = verdict.failures(seeds)  # nominal seeds, input families, the edge shape
  state.fields.update(
      correct=verdict.correct, robust=not reasons, general_shapes=verdict.general_shapes,
      edge_error=verdict.edge_error, filters=verdict.filters,
      max_abs_error=verdict.worst("max_abs_error"), max_rel_error=verdict.worst("max_rel_error"),
      rel_l2_error=verdict.worst("rel_l2_error"), atol_used=verdict.worst("atol_used"))
  if reasons:  # the correctness runs' own rejections (filters)
    state.fields.update(status=Status.REJECTED, reasons=tuple(reasons + failed))
    return
  if failed:
    state.fields.update(status=Status.INCORRECT, reasons=tuple(failed))
    return
  reasons += _memcheck(item, spec, seeds[0], ctx, state)
  if reasons:
    state.fields.update(status=Status.REJECTED, reasons=tuple(reasons), robust=False)
    return
  _time_and_roofline(state.compiled.executable, spec, dims, item.options, ctx, state,
                     shipped=_shipped_executable(item, spec, ctx), secret=item.secret)


def _shipped_executable(item: JudgeItem, spec: TaskSpec, ctx: Context):
  """The task's shipped GPU kernel (kernels_gpu/), compiled here (trusted code) for a
  candidate timed on a GPU: the second reference its speed is compared with. None for a
  shipped kernel judged itself, on a CPU (nothing is comparable), with `time_shipped` off, or
  where the shipped kernel does not compile on this device (logged; the candidate's verdict
  never depends on it, and its reward is then against XLA alone)."""
  if not ctx.on_gpu or item.variant != Variant.CANDIDATE or not item.options.time_shipped:
    return None
  ctx.stage(budgets.SHIPPED_BASELINE)
  try:
    return _compiled_shipped(spec.name, spec.precision, str(item.size))
  except Exception:  # pylint: disable=broad-except
    logger.exception("the shipped kernel of %s at %s %s is not timed", spec.name, item.size,
                     spec.precision)
    return None


@functools.lru_cache(maxsize=16)
def _compiled_shipped(task: str, precision: str, size: str):
  """kernels_gpu/<task>.py compiled for `size` at `precision`, once per judge process (like
  the copy check's exports: a reward's judges see the same tasks batch after batch)."""
  module = load_kernel(Variant.GPU, task)
  return jax.jit(functools.partial(module.kernel, interpret=False)).lower(
      *get_task(task).at_precision(precision).input_structs(size)).compile()


def _memcheck(item: JudgeItem, spec: TaskSpec, seed: int, ctx: Context, state: _State) -> list[str]:
  """One call of the run artifact under compute-sanitizer's memcheck, on a GPU judge whose
  options ask for it; its outcome is recorded as the `memcheck` filter. The errors it finds
  reject the kernel, and so does a call that fails or stalls under it where the task's own
  reference does not (`memcheck.settle`). A CPU judge runs interpret mode: memcheck is recorded
  as unavailable."""
  if not item.options.memcheck:
    return []
  if ctx.on_gpu:
    ctx.stage(budgets.MEMCHECK)
    figures = dict(task=spec.name, size=item.size, precision=spec.precision,
                   padding_bytes=spec.io_bytes(item.size),  # a whole task past any buffer
                   cache_dir=jax.config.jax_compilation_cache_dir)
    found = memcheck.settle(memcheck.check(state.run_blob, seed=seed, **figures),
                            lambda: memcheck.control(**figures))
  else:
    found = memcheck.Result(outcome=memcheck.Outcome.UNAVAILABLE,
                            detail="a CPU judge runs interpret mode, no device kernel")
  rejects = found.outcome in (memcheck.Outcome.ERRORS, memcheck.Outcome.FAILED)
  state.fields["filters"] = (*state.fields.get("filters", ()), FilterResult(
      name="memcheck", passed=not rejects, value=None, threshold=None,
      detail=f"{found.outcome}: {found.detail}"))
  if found.outcome is memcheck.Outcome.ERRORS:
    return [f"the kernel accessed device memory outside its buffers (compute-sanitizer "
            f"memcheck: {found.detail})"]
  if found.outcome is memcheck.Outcome.FAILED:
    return [f"the kernel's call did not end cleanly under compute-sanitizer memcheck "
            f"({found.detail}): a kernel that fails or stalls only when watched is not trusted"]
  return []


def _edge_dims(item: JudgeItem, spec: TaskSpec) -> Dims | None:
  if not item.options.checks_edge(item.size):
    return None
  return spec.dims(Size.EDGE)


def _admitted_edge(report: ExportReport, item: JudgeItem, spec: TaskSpec, ctx: Context
                   ) -> tuple[jax.export.Exported | str, Dims] | None:
  """The edge-shape artifact admitted (`_admit`) and held to the structure rules of the
  evaluated size (read from its device export, as `_structure_reasons` reads the main one), or
  why the kernel has none that may run (it did not export it, the admission refused it, or its
  structure fails the rules: the work done outside a kernel, say): the kernel still runs the
  evaluated size, general_shapes is then False with that reason. A module the analysis cannot
  read rejects."""
  edge_dims = _edge_dims(item, spec)
  if edge_dims is None:
    return None
  try:
    exported, found = _admit(_artifact_blob(report, Size.EDGE.value, ctx.run_platform), spec,
                             edge_dims, ctx)
    entry = report.size(Size.EDGE.value)
    platform = _structure_platform(entry, ctx)
    if platform is None:
      return f"edge shape: {_no_device_export(entry)}", edge_dims
    if platform != ctx.run_platform:
      found, _ = _analyze(load_artifact(entry.artifacts[platform], spec, edge_dims, platform), ctx)
    reasons = _sized_reasons(found, spec, edge_dims)
    if reasons:
      return f"the edge shape's export fails the structure rules: {reasons[0]}", edge_dims
    return exported, edge_dims
  except Unanalysable:
    raise
  except Failure as e:
    return _first_line(e), edge_dims


def _edge(admitted: tuple[jax.export.Exported | str, Dims] | None, item: JudgeItem,
          spec: TaskSpec, ctx: Context) -> tuple[Callable[..., Any], Dims] | None:
  """The admitted edge-shape artifact compiled; one that cannot run (or compile) raises its
  reason when run."""
  if admitted is None:
    return None
  exported, edge_dims = admitted
  if not isinstance(exported, str):
    try:
      note = item.precompiled.get(Size.EDGE.value)
      return _compile(exported, spec, edge_dims, ctx, note).executable, edge_dims
    except Failure as e:
      exported = _first_line(e)

  def failing(*_):
    raise RuntimeError(exported)
  return failing, edge_dims


def _first_line(failure: Failure) -> str:
  return str(failure).splitlines()[0] if str(failure) else "no artifact"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Reads:
  """What the timing's calls read: the bytes of one call's own inputs, and the inputs all calls
  share (a gather's table larger than the L2: only the rows its ids pick are read)."""
  read_bytes: int
  shared: frozenset[int]

  def distinct_bytes(self, n_sets: int) -> int:
    """The distinct bytes the calls read across `n_sets` input sets."""
    return self.read_bytes * n_sets

  def resident(self, n_sets: int, l2_bytes: int) -> bool:
    """Whether those bytes fit in the L2: then, unflushed, the inputs could stay there."""
    return self.distinct_bytes(n_sets) <= l2_bytes


def reads(spec: TaskSpec, dims: Dims, l2_bytes: int) -> Reads:
  """For a gather (a task with `touched_bytes`), only the rows it reads count, and its inputs
  larger than the L2 (the table) are drawn once for every call."""
  sizes = [i.nbytes(dims) for i in spec.inputs]
  gather = spec.touched_bytes is not None
  return Reads(read_bytes=spec.min_bytes(dims) - spec.output_bytes(dims) if gather else sum(sizes),
               shared=frozenset(i for i, n in enumerate(sizes) if gather and n > l2_bytes))


class TimingSets(timing.Feed):
  """The inputs of one function's timing calls. Each call's are drawn from a seed of its own
  just before it (outside any timed window), the L2 is then flushed so that a memory-bound kernel
  does not read them from it, and when the call ends they are checked (a kernel's inputs are
  read-only) and freed. So no two calls are given the same input (a memo a kernel keeps across
  calls, where the module analysis cannot see it, has nothing to replay), and while a call runs
  no later call's input exists (no work can be done ahead, in a warm-up call or a timed one, to
  leave most timed calls empty for the median). Only the inputs every call shares (a gather's
  table larger than the L2) are drawn once. What any call was given can be drawn again from its
  seeds, on buffers no call was given."""

  __slots__ = ("spec", "dims", "shared", "warmup", "whose", "flush", "_draw", "_shared_seed",
               "_shared_inputs", "_current", "_given", "_reasons")

  def __init__(self, spec: TaskSpec, dims: Dims, *, shared: frozenset[int] = frozenset(),
               warmup: int = 0, whose: str = "", flush: Callable[[], None] | None = None,
               draw: random.Random | None = None):
    self.spec, self.dims, self.shared, self.warmup = spec, dims, shared, warmup
    self.whose = whose  # "the baseline's " in the reasons about the baseline's inputs
    self.flush = flush  # pushes the L2 out (none: a CPU judge, whose timings compare nothing)
    self._draw = draw  # each call's seed: from this stream, or none: from the OS
    self._shared_seed = self._seed()
    self._shared_inputs = {i: spec.make_input(dims, self._shared_seed, i) for i in shared}
    self._current: tuple[jax.Array, ...] = ()
    self._given: dict[int, tuple[int, ...]] = {}  # call -> the seeds of what it was given
    self._reasons: list[str] = []

  def _seed(self) -> int:
    return secrets.randbelow(2**31) if self._draw is None else self._draw.randrange(2**31)

  def __len__(self) -> int:
    """The input sets drawn so far: one a call."""
    return len(self._given)

  def args(self, call: int) -> tuple[jax.Array, ...]:
    while True:  # a seed no earlier call got (a repeat: 1 in 2**31 a call)
      seed = self._seed()
      seeds = tuple(self._shared_seed if i in self.shared else seed
                    for i in range(len(self.spec.inputs)))
      if seeds not in self._given.values():
        break
    self._given[call] = seeds
    self._current = tuple(self._shared_inputs[i] if i in self.shared else
                          self.spec.make_input(self.dims, seed, i) for i, seed in enumerate(seeds))
    jax.block_until_ready(self._current)
    if self.flush:
      self.flush()
    return self._current

  def after(self, call: int) -> None:
    self._check(self._current, self._own, self._given[call], self._label(call))
    for i in self._own:
      self._current[i].delete()
    self._current = ()

  @property
  def _own(self) -> list[int]:
    """The inputs each call has to itself (all but a gather's shared table)."""
    return [i for i in range(len(self.spec.inputs)) if i not in self.shared]

  def _label(self, call: int) -> str:
    return self.whose + (f"timed call {call}" if call >= 0 else
                         f"warm-up call {call + self.warmup}")

  def _check(self, inputs: tuple[jax.Array, ...], which: Sequence[int], seeds: tuple[int, ...],
             label: str) -> None:
    """Whether `inputs[i]` for i in `which` still hold what their seeds draw; a reason if not."""
    if not which:
      return
    changed = checks.mutations([inputs[i] for i in which],
                               [self.spec.make_input(self.dims, seeds[i], i) for i in which],
                               [self.spec.inputs[i].name for i in which])
    if changed:
      self._reasons.append(f"the input set of {label} was changed by the timed calls "
                           f"({'; '.join(changed)}): a kernel's inputs are read-only")

  def drawn_again(self, call: int) -> tuple[jax.Array, ...]:
    """What call `call` was given, drawn again from its seeds."""
    return tuple(self.spec.make_input(self.dims, seed, i)
                 for i, seed in enumerate(self._given[call]))

  def mutations(self) -> list[str]:
    """A reason for each call whose inputs did not hold, when it ended, what it was given; and
    for the inputs every call shares, checked now."""
    shared = sorted(self.shared)
    self._check(self._shared_inputs, shared, (self._shared_seed,) * len(self.spec.inputs),
                self.whose + "every call (shared inputs)")
    reasons, self._reasons = self._reasons, []
    return reasons


def timing_sets(spec: TaskSpec, dims: Dims, l2_bytes: int, *, warmup: int = 0, whose: str = "",
                flush: Callable[[], None] | None = None, secret: int | None = None) -> TimingSets:
  """The timing's feed for one function: inputs drawn for each call from OS seeds, or, given
  the evaluation's `secret`, from a stream it determines (`drawn_from`)."""
  return TimingSets(spec, dims, shared=reads(spec, dims, l2_bytes).shared, warmup=warmup,
                    whose=whose, flush=flush,
                    draw=None if secret is None else drawn_from(secret, f"timing {whose}"))


def drawn_from(secret: int, use: str) -> random.Random:
  """A stream of draws that the evaluation's secret determines, one per `use`. The secret is
  never the seeds, which a caller may fix and records publish (red team round 22: on public
  seeds a kernel computed which timed calls were checked); it is the driver's, drawn for each
  evaluation and kept to judge it again on the same draws, its timing inputs and its kept
  outputs too (round 20: a kernel that spun only on unlucky timing inputs was paid when judged
  again on fresh ones), or the judge's own, drawn from the OS."""
  return random.Random(f"{use} {int(secret)}")


def speedup(kernel_ms: float, baseline_ms: float) -> float:
  """baseline / kernel: above 1 the kernel is faster than the JAX baseline."""
  return baseline_ms / kernel_ms


def _rates(spec: TaskSpec, dims: Dims, ms: float | None) -> tuple[float | None, float | None]:
  """(TFLOP/s, GB/s) of a call taking `ms`, from the task's analytic FLOPs and bytes."""
  if ms is None or ms <= 0:
    return None, None
  return spec.flops(dims) / ms / 1e9, spec.min_bytes(dims) / ms / 1e6


def _limit(measured: float | None, first: float | None, baseline: float | None
           ) -> tuple[float | None, str | None]:
  """A ceiling and its source: never below what the trusted baseline reached (a kernel as
  fast as XLA is not above the physical limit), "remeasured" where measuring again raised it
  above the run's first measurement `first`. No measured ceiling (a CPU): none."""
  if measured is None:
    return None, None
  if baseline is not None and baseline > measured:
    return baseline, "baseline"
  return measured, "remeasured" if first is not None and measured > first else "measured"


def _roofline(spec: TaskSpec, dims: Dims, runtime_ms: float, ceilings: Ceilings,
              baseline_ms: float | None = None, first: Ceilings | None = None) -> Roofline:
  """The kernel's rates against the ceilings: the hardware's measured ones (`first`: the run's
  own, when `ceilings` were measured again), raised to the baseline's rates in this evaluation."""
  tflops, gbps = _rates(spec, dims, runtime_ms)
  base_tflops, base_gbps = _rates(spec, dims, baseline_ms)
  mm, mm_source = _limit(ceilings.matmul_for(spec.precision),
                         first and first.matmul_for(spec.precision), base_tflops)
  bw, bw_source = _limit(ceilings.bandwidth_gbps, first and first.bandwidth_gbps, base_gbps)
  return Roofline(flops=spec.flops(dims), bytes=spec.min_bytes(dims), achieved_tflops=tflops,
                  achieved_gbps=gbps, ceiling_tflops=mm, ceiling_gbps=bw,
                  frac_compute=tflops / mm if mm else None,
                  frac_bandwidth=gbps / bw if bw else None,
                  baseline_tflops=base_tflops, baseline_gbps=base_gbps,
                  ceiling_tflops_source=mm_source, ceiling_gbps_source=bw_source,
                  ceiling_method=ceilings.method if mm is not None or bw is not None else None)


def _over(roof: Roofline) -> list[str]:
  """The ceilings the kernel's rate is more than CEILING_TOLERANCE above, as 'compute 110%'."""
  return [f"{name} {frac:.0%}" for name, frac in
          (("bandwidth", roof.frac_bandwidth), ("compute", roof.frac_compute))
          if frac is not None and frac > 1.0 + CEILING_TOLERANCE]


def timed_outputs_checked(output_bytes: int, iterations: int, *, comparable: bool) -> int:
  """How many timed outputs the judge checks, a secret sample of the timed calls. Where the
  timing is comparable (a GPU), every call whose host copy fits in KEPT_OUTPUT_BYTES, and at
  least MIN_TIMED_OUTPUTS_CHECKED; elsewhere (interpret mode, whose timings earn nothing) the
  minimum."""
  wanted = max(MIN_TIMED_OUTPUTS_CHECKED, KEPT_OUTPUT_BYTES // max(output_bytes, 1))
  return min(iterations, wanted if comparable else MIN_TIMED_OUTPUTS_CHECKED)


def _timed_output_reasons(kept: dict[int, Any], sets: TimingSets, spec: TaskSpec) -> list[str]:
  """The timed calls that changed their inputs, then the kept timed outputs compared with
  references computed only now, after timing (on the device, like every comparison), from
  their inputs drawn again: a set the timed calls wrote to is a rejection of its own, and
  never the reference's input."""
  reasons = sets.mutations()
  outputs = sorted(kept.items())
  kept.clear()
  for call, out in outputs:
    result = compare(out, checks.expected(spec, sets.drawn_again(call)), spec.tolerance)
    if not result.passed:
      reasons.append(f"timed call {call} returned a wrong output ({result.reason}): the kernel "
                     "computes differently when timed")
  return reasons


def _time_and_roofline(executable, spec: TaskSpec, dims: Dims, opts: EvalOptions, ctx: Context,
                       state: _State, *, shipped: Callable | None = None,
                       secret: int | None = None) -> None:
  """Times the candidate interleaved with the jitted reference and, where given, the shipped
  kernel (each on input sets of its own), checks the kept outputs and every reference's sets,
  and records the timing, the roofline and the verdict; then the eager baseline. Every draw a
  kernel must not predict comes from `secret` (none: one drawn from the OS now)."""
  secret = secrets.randbelow(2**63) if secret is None else secret
  start = time.perf_counter()
  ctx.stage(budgets.TIMING)
  fields = state.fields
  flush = timing.L2Flush(ctx.l2_bytes) if ctx.on_gpu else None
  references = [jax.jit(spec.reference), *([] if shipped is None else [shipped])]
  kernel_sets, baseline_sets, *shipped_sets = (
      timing_sets(spec, dims, ctx.l2_bytes, warmup=opts.warmup, whose=whose, flush=flush,
                  secret=secret)
      for whose in ("", "the baseline's ", "the shipped kernel's ")[:1 + len(references)])
  read = reads(spec, dims, ctx.l2_bytes)
  keep = frozenset(drawn_from(secret, "kept outputs").sample(
      range(opts.timing_iterations),
      timed_outputs_checked(spec.output_bytes(dims), opts.timing_iterations,
                            comparable=ctx.on_gpu)))
  kernel, baseline, *shipped_timed = timing.time_interleaved(
      [executable, *references], [kernel_sets, baseline_sets, *shipped_sets],
      iterations=opts.timing_iterations, rounds=opts.timing_rounds, warmup=opts.warmup,
      method=ctx.timing_method, keep=[keep])
  untimed = untimed_copy_ms(fields.get("prefilled_bytes") or 0, ctx.timing_method, ctx.ceilings)
  if untimed:
    kernel = dataclasses.replace(kernel, samples=kernel.samples.charged(untimed))
  # A kernel that writes past its refs could reach the references' sets (to slow them, or to
  # change what it is compared with): they are checked like the kernel's own.
  reasons = _timed_output_reasons(kernel.kept, kernel_sets, spec) + [
      m for sets in (baseline_sets, *shipped_sets) for m in sets.mutations()]
  kernel_t, baseline_t = kernel.samples, baseline.samples
  roof = _roofline(spec, dims, kernel_t.median_ms, ctx.ceilings, baseline_t.median_ms)
  if _over(roof):  # before calling it impossible, measure the hardware again (trusted code)
    roof = _roofline(spec, dims, kernel_t.median_ms,
                     ctx.ceilings.raised(measure_ceilings(ctx.timing_method)),
                     baseline_t.median_ms, first=ctx.ceilings)
  fields.update(
      untimed_copy_ms=untimed if ctx.timing_method is timing.TimingMethod.CUPTI else None,
      timing_method=kernel_t.method.value, timing_iterations=len(kernel_t.samples_ms),
      timing_input_sets=len(kernel_sets),
      timing_rotated_bytes=read.distinct_bytes(len(kernel_sets)),
      timing_l2_resident=flush is None and read.resident(len(kernel_sets), ctx.l2_bytes),
      runtime_ms=kernel_t.median_ms,
      runtime_iqr_ms=kernel_t.iqr_ms, runtime_samples_ms=kernel_t.samples_ms,
      baseline_ms=baseline_t.median_ms, baseline_iqr_ms=baseline_t.iqr_ms,
      baseline_samples_ms=baseline_t.samples_ms, timed_outputs_checked=len(keep),
      speedup=speedup(kernel_t.median_ms, baseline_t.median_ms), roofline=roof)
  for timed in shipped_timed:
    t = timed.samples
    fields.update(shipped_ms=t.median_ms, shipped_iqr_ms=t.iqr_ms, shipped_samples_ms=t.samples_ms,
                  speedup_shipped=speedup(kernel_t.median_ms, t.median_ms))
  over = _over(roof)
  if over:
    reasons.append("timing above the hardware's physical limit "
                   f"({', '.join(over)} of the ceilings measured in this run, the higher of two "
                   "measurements and never below the jitted baseline's rate in this "
                   f"evaluation; more than {CEILING_TOLERANCE:.0%} above is impossible): the "
                   "measurement is not trustworthy")
  fields.update(status=Status.REJECTED if reasons else Status.PASS, reasons=tuple(reasons),
                robust=not reasons)
  state.seconds["timing_s"] = time.perf_counter() - start
  ctx.stage(budgets.EAGER_BASELINE)
  fields.update(_eager_fields(spec, timing_sets(spec, dims, ctx.l2_bytes, flush=flush,
                                                whose="the eager baseline's ", secret=secret),
                              opts, ctx,
                              kernel_t.median_ms))
  state.seconds["eager_s"] = time.perf_counter() - start - state.seconds["timing_s"]


def untimed_copy_ms(prefilled_bytes: int, method: timing.TimingMethod, ceilings: Ceilings
                    ) -> float:
  """The device time a call spends on the copies and memsets that fill its in-place buffers
  (`prefilled_bytes`), which the CUPTI timer does not see: those bytes at the run's measured
  copy rate (a copy's read and written bytes over its time; the fastest such work can be, so an
  honest kernel is never charged more than it cost). 0 under the wall clock, which sees them."""
  rate = ceilings.copy_gbps or ceilings.bandwidth_gbps
  if method is not timing.TimingMethod.CUPTI or not prefilled_bytes or not rate:
    return 0.0
  return prefilled_bytes / (rate * 1e6)


def _eager_fields(spec: TaskSpec, sets: TimingSets, opts: EvalOptions, ctx: Context,
                  kernel_ms: float) -> dict[str, Any]:
  """The reference run op by op, without jit (the analogue of PyTorch's eager mode), timed
  the same way on the baseline's input sets. It informs a column only: a failure here is
  logged and leaves the columns empty, never the kernel's verdict."""
  try:
    (eager,) = timing.time_interleaved(
        [spec.reference], [sets], iterations=opts.timing_iterations, rounds=opts.timing_rounds,
        warmup=opts.warmup, method=ctx.timing_method)
  except Exception:  # pylint: disable=broad-except
    logger.exception("eager baseline of %s not timed", spec.name)
    return {}
  t = eager.samples
  return dict(eager_baseline_ms=t.median_ms, eager_baseline_iqr_ms=t.iqr_ms,
              eager_baseline_samples_ms=t.samples_ms, speedup_eager=speedup(kernel_ms, t.median_ms))


def _base_fields(item: JudgeItem, spec: TaskSpec, dims: Dims, seeds: tuple[int, ...],
                 environment: Environment) -> dict[str, Any]:
  on_gpu = environment.platform == "gpu"
  return dict(
      task=spec.name, task_id=spec.task_id, level=spec.level, category=spec.category,
      variant=item.variant, size=str(item.size), candidate=item.candidate,
      input_shapes=tuple(_shape_text(s) for s in spec.input_shapes(dims)),
      device=environment.platform, interpret=not on_gpu, kernel_sha256=item.kernel_sha256,
      seeds=seeds, tolerance=spec.tolerance.kind.value, rtol=spec.tolerance.rtol,
      atol=spec.tolerance.atol, max_rel_l2=spec.tolerance.max_rel_l2,
      atol_scale=spec.tolerance.atol_scale.value,
      input_families=tuple(f.name for f in spec.families), environment=environment,
      precision=spec.precision)


def _pallas_calls(report: ExportReport | None) -> tuple[PallasCallInfo, ...]:
  try:
    return tuple(from_json_dict(PallasCallInfo, c) for c in report.pallas_calls) if report else ()
  except ValueError:  # the exporter's word, malformed: not shown
    return ()


def _compile_profile(item: JudgeItem, state: _State) -> CompileProfile:
  report = item.export.report
  main = report.size(item.size) if report else None
  compiled = state.compiled
  return CompileProfile(
      trace_s=main.trace_s if main else None, lower_s=main.lower_s if main else None,
      compile_s=compiled.compile_s if compiled else None,
      jaxpr_bytes=len(report.jaxpr.encode()) if report and report.jaxpr else None,
      triton_ir_bytes=sum(len(t.encode()) for t in report.triton_ir) or None if report else None,
      ptx_bytes=sum(len(p.encode()) for p in compiled.ptx) or None if compiled else None,
      pallas_calls=_pallas_calls(report),
      lowers_triton=None if main is None or not ({"cuda"} & (set(main.artifacts) | set(main.errors)))
      else "cuda" in main.artifacts,
      lowers_triton_error=main.errors.get("cuda") if main else None,
      lowers_tpu=report.lowers_tpu if report else None,
      lowers_tpu_error=report.tpu_error if report else None,
      exporter_reported=True,
      artifact_bytes=len(state.run_blob) if state.run_blob else None,
      concurrent_compiles=note.concurrent if (note := item.precompiled.get(item.size)) and
      note.outcome == "compiled" else None)


def failure_record(item: JudgeItem, environment: Environment, run: RunInfo | None,
                   status: Status, error_type: ErrorType | None, message: str) -> EvalRecord:
  """The record of an evaluation whose judge never reported back (a stage over its budget,
  timeout, crash, memory): its judge's environment and run (`Context.run`), if it has one."""
  spec = item.spec
  state = _State(fields=_base_fields(item, spec, spec.dims(item.size), item.options.seeds,
                                     environment))
  state.fields.update(status=status, error_type=error_type,
                      error=short_error(message) if error_type else None,
                      reasons=(headline(message),))
  return _finish(item, state, environment, run, 0.0)


def _finish(item: JudgeItem, state: _State, environment: Environment, run: RunInfo | None,
            wall_s: float) -> EvalRecord:
  defaults: dict[str, Any] = dict(
      error_type=None, error=None, reasons=(), correct=False, robust=False, general_shapes=None,
      max_abs_error=None, max_rel_error=None, rel_l2_error=None, filters=(),
      timing_method=None, timing_iterations=None, timing_input_sets=None, runtime_ms=None,
      runtime_iqr_ms=None, runtime_samples_ms=(), baseline_ms=None, baseline_iqr_ms=None,
      baseline_samples_ms=(), speedup=None, roofline=None)
  merged = {**defaults, **state.fields}
  compile_wall_s = sum(note.wall_s for note in item.precompiled.values())
  merged.update(
      compile=_compile_profile(item, state),
      timing_comparable=environment.platform == "gpu" and merged["timing_method"] is not None,
      measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      eval_wall_s=wall_s + item.export.wall_s + compile_wall_s, judge_version=JUDGE_VERSION,
      stages=StageTimes(export_s=item.export.wall_s,
                        compile_s=compile_wall_s if item.precompiled else None,
                        judge_s=wall_s, compile_cache_hit=state.cache_hit, **state.seconds),
      sandbox=item.export.layers, exporter_output=item.export.output[:MAX_OUTPUT_CHARS] or None,
      run=run)
  return EvalRecord(**merged)
