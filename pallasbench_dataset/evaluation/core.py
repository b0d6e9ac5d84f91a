"""One evaluation, in the current process: load -> compile -> check -> time -> record.

This runs inside the isolated child (`isolation.py`); it never raises for a candidate's
fault: every failure becomes a record with its status, error type and reason.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
import pathlib
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any, Final

import jax
import jax.numpy as jnp

from pallasbench_dataset.evaluation import checks, timing
from pallasbench_dataset.evaluation.ceilings import Ceilings
from pallasbench_dataset.evaluation.compile_profile import (
    CompiledKernel, StageError, check_tpu, check_triton, compile_cold)
from pallasbench_dataset.kernels import KernelLoadError, load_module, sha256
from pallasbench_dataset.lowering import capture_triton_ir
from pallasbench_dataset.schema import (
    Artifacts, CompileProfile, Environment, ErrorType, EvalRecord, Roofline, Status)
from pallasbench_dataset.tasks import Size, TaskSpec, get_task
from pallasbench_dataset.tolerance import compare

MAX_ERROR_CHARS: Final = 4000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EvalOptions:
  """How thoroughly to evaluate; the defaults follow DESIGN.md's measurement protocol."""
  seeds: tuple[int, ...] = ()      # empty: fresh random seeds, recorded in the record
  num_seeds: int = 5
  check_edge: bool = True          # also run the task's edge shape (general_shapes)
  timing_iterations: int = 50
  timing_rounds: int = 2          # kernel, baseline | baseline, kernel
  warmup: int = 3
  input_budget_bytes: int = 4 << 30
  capture_artifacts: bool = True


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkItem:
  task: str
  variant: str
  size: str
  source: str
  filename: str
  options: EvalOptions = EvalOptions()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Context:
  """What a child measures once and shares across its evaluations."""
  environment: Environment
  ceilings: Ceilings
  timing_method: timing.TimingMethod
  l2_bytes: int
  dump_dir: pathlib.Path | None


class _Failure(Exception):
  def __init__(self, error_type: ErrorType, message: str):
    super().__init__(message)
    self.error_type = error_type


_ESCAPES: Final = re.compile(r"(?:\\x[0-9a-fA-F]{2}|\\[0-7]{3}|\\[nrt'\"]){4,}")


_ESCAPE: Final = re.compile(r"\\(?:x[0-9a-fA-F]{2}|[0-7]{3})")


def readable(text: str) -> str:
  """Error text without serialised IR: escaped-byte runs become `<bytes>`, and a text that is
  mostly escaped bytes (a dump of MLIR bytecode) becomes one marker."""
  if sum(len(m) for m in _ESCAPE.findall(text)) >= 0.25 * max(len(text), 1):
    return "<serialised IR bytes>"
  return _ESCAPES.sub("<bytes>", text)


def short_error(e: BaseException | str) -> str:
  """A readable digest of a long error: its first line, Triton's `error:` lines, and the tail.

  XLA and Triton errors run to pages and may embed serialised IR (escaped bytes): those
  runs are cut to `<bytes>`, and the head is kept when the text must be shortened.
  """
  text = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
  lines = [readable(line).strip() for line in text.strip().splitlines()]
  lines = [line for line in lines if line and line not in ("<bytes>", "<serialised IR bytes>")
           ] or [text.strip()[:MAX_ERROR_CHARS]]
  if len(lines) > 25:
    errors = [line for line in lines[1:] if "error:" in line][:5]
    lines = lines[:1] + errors + ["..."] + lines[-10:]
  return "\n".join(dict.fromkeys(lines))[:MAX_ERROR_CHARS]


def classify(e: BaseException, stage: str) -> ErrorType:
  text = str(e)
  if "RESOURCE_EXHAUSTED" in text and "hared memory" not in text:
    return ErrorType.OUT_OF_MEMORY
  if "out of memory" in text.lower():
    return ErrorType.OUT_OF_MEMORY
  return {"trace": ErrorType.TRACE, "lowering": ErrorType.LOWERING,
          "compile": ErrorType.COMPILE}.get(stage, ErrorType.RUNTIME)


def _shape_text(shape: Sequence[int]) -> str:
  return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _compile_profile(ck: CompiledKernel | None, lowering: dict[str, Any]) -> CompileProfile:
  return CompileProfile(
      trace_s=ck.trace_s if ck else None, lower_s=ck.lower_s if ck else None,
      compile_s=ck.compile_s if ck else None,
      jaxpr_bytes=len(ck.report.text.encode()) if ck else None,
      triton_ir_bytes=sum(len(t.encode()) for t in lowering["triton_ir"]) or None,
      ptx_bytes=sum(len(p.encode()) for p in ck.ptx) or None if ck else None,
      pallas_calls=ck.report.pallas_calls if ck else (),
      lowers_triton=lowering.get("lowers_triton"), lowers_triton_error=lowering.get("triton_error"),
      lowers_tpu=lowering.get("lowers_tpu"), lowers_tpu_error=lowering.get("tpu_error"))


def _lowering_checks(kernel, args, on_gpu: bool, ck: CompiledKernel | None) -> dict[str, Any]:
  """CPU runs check lowering for Triton and TPU without either device; on a GPU the real
  compile answers for Triton, and the TPU check (hardware-independent) is left to CPU runs."""
  found: dict[str, Any] = {"triton_ir": list(ck.triton_ir) if ck else []}
  if on_gpu:
    return found
  fn = functools.partial(kernel, interpret=False)
  found["lowers_tpu"], found["tpu_error"] = check_tpu(fn, args)
  with capture_triton_ir() as triton_ir:
    found["lowers_triton"], found["triton_error"] = check_triton(fn, args)
  found["triton_ir"] = list(triton_ir)
  return found


def _edge_check(fn, spec: TaskSpec, seed: int) -> tuple[bool, str | None]:
  """Does the kernel compute the task at the edge shape (dims not multiples of any block)?"""
  dims = spec.dims(Size.EDGE)
  try:
    inputs = spec.make_inputs(dims, seed)
    result = compare(jax.jit(fn)(*inputs), spec.expected(*inputs), spec.tolerance)
  except Exception as e:  # a kernel limited to some shapes may raise anything here
    return False, f"edge shape {dict(dims)}: {short_error(e).splitlines()[0]}"
  return result.passed, None if result.passed else f"edge shape {dict(dims)}: {result.reason}"


def speedup(kernel_ms: float, baseline_ms: float) -> float:
  """baseline / kernel: above 1 the kernel is faster than the JAX baseline."""
  return baseline_ms / kernel_ms


def _roofline(spec: TaskSpec, dims, runtime_ms: float, ceilings: Ceilings) -> Roofline:
  flops, nbytes = spec.flops(dims), spec.min_bytes(dims)
  tflops = flops / runtime_ms / 1e9
  gbps = nbytes / runtime_ms / 1e6
  bw, mm = ceilings.bandwidth_gbps, ceilings.matmul_tflops
  return Roofline(flops=flops, bytes=nbytes, achieved_tflops=tflops, achieved_gbps=gbps,
                  ceiling_tflops=mm, ceiling_gbps=bw,
                  frac_compute=tflops / mm if mm else None, frac_bandwidth=gbps / bw if bw else None)


def timing_sets(spec: TaskSpec, dims, l2_bytes: int, budget_bytes: int) -> list[tuple]:
  """Input sets to rotate through so that the data a call reads is not left in L2 by the last.

  For a gather (a task with `touched_bytes`), only the rows it reads matter: inputs larger
  than L2 (the table) are shared by every set and the small ones (the ids) are redrawn,
  so each set reads other rows; the set count follows the bytes actually read.
  """
  out_bytes = math.prod(spec.output(dims)) * jnp.dtype(spec.output_dtype).itemsize
  sizes = [i.nbytes(dims) for i in spec.inputs]
  gather = spec.touched_bytes is not None
  shared = {i for i, n in enumerate(sizes) if gather and n > l2_bytes}
  read_bytes = spec.min_bytes(dims) - out_bytes if gather else sum(sizes)
  n_sets = timing.input_set_count(read_bytes, l2_bytes,
                                  budget_bytes, per_set_bytes=sum(
                                      n for i, n in enumerate(sizes) if i not in shared))
  first = spec.make_inputs(dims, 1_000_000)
  return [first] + [tuple(first[i] if i in shared else spec.make_input(dims, 1_000_000 + k, i)
                          for i in range(len(sizes))) for k in range(1, n_sets)]


def _time(ck: CompiledKernel, spec: TaskSpec, dims, opts: EvalOptions, ctx: Context):
  sets = timing_sets(spec, dims, ctx.l2_bytes, opts.input_budget_bytes)
  n_sets = len(sets)
  baseline = jax.jit(spec.reference)
  kernel_t, baseline_t = timing.time_interleaved(
      [ck.executable, baseline], sets, iterations=opts.timing_iterations,
      rounds=opts.timing_rounds, warmup=opts.warmup, method=ctx.timing_method)
  return kernel_t, baseline_t, n_sets


def _base_fields(item: WorkItem, spec: TaskSpec, seeds: tuple[int, ...],
                 environment: Environment) -> dict[str, Any]:
  dims = spec.dims(item.size)
  on_gpu = environment.platform == "gpu"
  return dict(
      task=spec.name, task_id=spec.task_id, level=spec.level, category=spec.category,
      variant=item.variant, size=str(item.size),
      input_shapes=tuple(_shape_text(s) for s in spec.input_shapes(dims)),
      device=environment.platform, interpret=not on_gpu, kernel_sha256=sha256(item.source),
      seeds=seeds, tolerance=spec.tolerance.kind.value, rtol=spec.tolerance.rtol,
      atol=spec.tolerance.atol, max_rel_l2=spec.tolerance.max_rel_l2, environment=environment)


def failure_record(item: WorkItem, environment: Environment, status: Status,
                   error_type: ErrorType, message: str, wall_s: float) -> EvalRecord:
  """The record of an evaluation that never reported back (timeout, crash, memory limit)."""
  fields = _base_fields(item, get_task(item.task), item.options.seeds, environment)
  fields.update(status=status, error_type=error_type, error=short_error(message),
                reasons=(short_error(message).splitlines()[0],))
  return _finish(fields, {"ck": None, "lowering": {"triton_ir": []}}, environment, wall_s)


def evaluate_item(item: WorkItem, ctx: Context) -> tuple[EvalRecord, Artifacts]:
  """Evaluates one kernel source for one task and size; never raises for the kernel's faults."""
  start = time.perf_counter()
  spec = get_task(item.task)
  dims = spec.dims(item.size)
  on_gpu = ctx.environment.platform == "gpu"
  opts = item.options
  seeds = opts.seeds or tuple(secrets.randbelow(2**31) for _ in range(opts.num_seeds))
  fields = _base_fields(item, spec, seeds, ctx.environment)
  state: dict[str, Any] = {"ck": None, "lowering": {"triton_ir": []}}
  try:
    _run_checks(item, spec, dims, seeds, on_gpu, ctx, fields, state)
  except _Failure as e:
    fields.update(status=Status.ERROR, error_type=e.error_type, error=short_error(str(e)),
                  reasons=(*fields.get("reasons", ()), short_error(str(e)).splitlines()[0]))
  except Exception as e:  # the candidate raised while running
    kind = classify(e, "run")
    fields.update(status=Status.ERROR, error_type=kind, error=short_error(e),
                  reasons=(*fields.get("reasons", ()), short_error(e).splitlines()[0]))
  record = _finish(fields, state, ctx.environment, time.perf_counter() - start)
  ck = state["ck"]
  artifacts = Artifacts(
      task=spec.name, variant=item.variant, size=str(item.size),
      jaxpr=ck.report.text if ck else None, stablehlo=ck.stablehlo if ck else None,
      triton_ir="\n\n".join(state["lowering"]["triton_ir"]) or None,
      ptx="\n\n".join(ck.ptx) or None if ck else None)
  return record, artifacts


def _run_checks(item, spec, dims, seeds, on_gpu, ctx, fields, state) -> None:
  try:
    module = load_module(item.source, item.filename)
  except KernelLoadError as e:
    raise _Failure(ErrorType.LOAD, str(e)) from None
  reasons = checks.source_reasons(item.source)
  fn = functools.partial(module.kernel, interpret=not on_gpu)
  args = spec.make_inputs(dims, seeds[0])
  try:
    ck = compile_cold(fn, args, ctx.dump_dir)
  except StageError as e:
    state["lowering"] = _lowering_checks(module.kernel, args, on_gpu, None)
    if on_gpu and e.stage != "trace":
      state["lowering"].update(lowers_triton=e.stage != "lowering",
                               triton_error=short_error(str(e)) if e.stage == "lowering" else None)
    raise _Failure(classify(e, e.stage), str(e)) from None
  state["ck"] = ck
  state["lowering"] = _lowering_checks(module.kernel, args, on_gpu, ck)
  if on_gpu:
    state["lowering"]["lowers_triton"] = bool(ck.report.pallas_calls) or None
  reasons += checks.jaxpr_reasons(ck.report, spec, dims, on_gpu=on_gpu)
  try:
    correctness = checks.check_correctness(ck.executable, spec, dims, seeds, on_gpu=on_gpu)
  except checks.OutputError as e:
    raise _Failure(ErrorType.OUTPUT, str(e)) from None
  filter_results = checks.check_filters(ck.executable, spec, dims, seeds[0],
                                        correctness.outcomes[0].output)
  reasons += list(correctness.rejections)
  reasons += [f"{f.name}: {f.detail}" for f in filter_results if not f.passed]
  failed_seeds = [f"seed {o.seed}: {o.comparison.reason}" for o in correctness.outcomes
                  if not o.comparison.passed]
  general, edge_reason = (None, None)
  if item.options.check_edge and Size(item.size) is not Size.EDGE:
    general, edge_reason = _edge_check(fn, spec, seeds[0])
  status = (Status.REJECTED if reasons else
            Status.INCORRECT if not correctness.correct else Status.PASS)
  fields.update(
      correct=correctness.correct, robust=not reasons, general_shapes=general, filters=filter_results,
      max_abs_error=correctness.worst("max_abs_error"), max_rel_error=correctness.worst("max_rel_error"),
      rel_l2_error=correctness.worst("rel_l2_error"),
      reasons=tuple(reasons + failed_seeds + ([edge_reason] if edge_reason else [])))
  if status is Status.PASS:
    status = _time_and_roofline(ck, spec, dims, item.options, ctx, fields)
  fields["status"] = status


def _time_and_roofline(ck, spec, dims, opts, ctx, fields) -> Status:
  kernel_t, baseline_t, n_sets = _time(ck, spec, dims, opts, ctx)
  roof = _roofline(spec, dims, kernel_t.median_ms, ctx.ceilings)
  fields.update(
      timing_method=kernel_t.method.value, timing_iterations=len(kernel_t.samples_ms),
      timing_input_sets=n_sets, runtime_ms=kernel_t.median_ms, runtime_iqr_ms=kernel_t.iqr_ms,
      runtime_samples_ms=kernel_t.samples_ms, baseline_ms=baseline_t.median_ms,
      baseline_iqr_ms=baseline_t.iqr_ms, baseline_samples_ms=baseline_t.samples_ms,
      speedup=speedup(kernel_t.median_ms, baseline_t.median_ms), roofline=roof)
  over = [f"{name} {frac:.0%}" for name, frac in
          (("bandwidth", roof.frac_bandwidth), ("compute", roof.frac_compute))
          if frac is not None and frac > 1.0]
  if over:
    fields["reasons"] = (*fields["reasons"], "timing above the hardware's physical limit "
                         f"({', '.join(over)} of the ceilings measured in this run): the "
                         "measurement is not trustworthy")
    fields["robust"] = False
    return Status.REJECTED
  return Status.PASS


def _finish(fields: dict[str, Any], state: dict[str, Any], environment: Environment,
            wall_s: float) -> EvalRecord:
  on_gpu = environment.platform == "gpu"
  defaults: dict[str, Any] = dict(
      error_type=None, error=None, reasons=(), correct=False, robust=False, general_shapes=None,
      max_abs_error=None, max_rel_error=None, rel_l2_error=None, filters=(),
      timing_method=None, timing_comparable=on_gpu, timing_iterations=None,
      timing_input_sets=None, runtime_ms=None, runtime_iqr_ms=None, runtime_samples_ms=(),
      baseline_ms=None, baseline_iqr_ms=None, baseline_samples_ms=(), speedup=None, roofline=None)
  merged = {**defaults, **fields}
  merged["compile"] = _compile_profile(state["ck"], state["lowering"])
  merged["timing_comparable"] = on_gpu and merged["timing_method"] is not None
  merged["measured_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
  merged["eval_wall_s"] = wall_s
  return EvalRecord(**merged)
