"""The judge's checks, each a small function over a compiled kernel and its task.

Everything here runs inside the evaluation child process. A check returns data (a
comparison, filter results, reasons); the decision (pass, incorrect, rejected) is taken
in `core.py` from what the checks found.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Sequence
from typing import Final

import jax
import jax.numpy as jnp

from pallasbench_dataset import filters
from pallasbench_dataset.jaxpr_analysis import JaxprReport
from pallasbench_dataset.schema import FilterResult
from pallasbench_dataset.tasks import TaskSpec
from pallasbench_dataset.tolerance import Comparison, compare

ALLOWED_IMPORTS: Final = frozenset({"jax", "numpy", "functools", "math", "typing"})
OUTSIDE_FLOPS_LIMIT: Final = 0.10        # share of the task's FLOPs plain XLA ops may do
OUTSIDE_CONTRACTION_LIMIT: Final = 0.01  # share of the task's FLOPs in contractions outside
POISON: Final = float("nan")
SENTINEL: Final = 1.2345e30             # a second poison value: unwritten output keeps it exactly


def source_reasons(source: str) -> list[str]:
  """Static analysis of the source: imports outside the kernel contract."""
  tree = ast.parse(source)
  roots = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      roots |= {alias.name.split(".")[0] for alias in node.names}
    elif isinstance(node, ast.ImportFrom):
      roots.add((node.module or ".").split(".")[0] if node.level == 0 else ".")
  bad = sorted(roots - ALLOWED_IMPORTS)
  if not bad:
    return []
  return [f"imports {', '.join(bad)}: a kernel may import only {', '.join(sorted(ALLOWED_IMPORTS))}"]


def jaxpr_reasons(report: JaxprReport, spec: TaskSpec, dims, *, on_gpu: bool) -> list[str]:
  """Rejections read from the jaxpr: no Pallas, interpret forced, work done outside kernels."""
  reasons = []
  if not report.pallas_calls:
    reasons.append("no pallas_call in the kernel's jaxpr: not a Pallas kernel")
  if on_gpu and any(call.interpret for call in report.pallas_calls):
    reasons.append("interpret=True forced on the real backend: the kernel never runs on the GPU")
  if report.input_writes:
    reasons.append(f"the kernel writes to its input refs ({'; '.join(report.input_writes)}): "
                   "inputs mutated in place")
  if report.outside.host_callbacks:
    reasons.append(f"host callbacks {sorted(set(report.outside.host_callbacks))}: work done on "
                   "the host, outside the kernel")
  task_flops = max(spec.flops(dims), 1)
  if report.outside.contraction_flops > OUTSIDE_CONTRACTION_LIMIT * task_flops:
    reasons.append(f"contraction done outside the kernel: {report.outside.contraction_flops} "
                   f"FLOPs in plain XLA ops ({', '.join(report.outside.primitives)})")
  elif report.outside.flops > OUTSIDE_FLOPS_LIMIT * task_flops:
    share = report.outside.flops / task_flops
    reasons.append(f"the real work is done outside the kernel: plain XLA ops do {share:.0%} of "
                   f"the task's FLOPs ({', '.join(report.outside.primitives)})")
  return reasons


def poison_allocator(shape, dtype, value: float) -> None:
  """Leaves freed buffers full of `value` where the kernel's output is likely to be allocated.

  On a GPU, XLA's allocator hands a new output the best-fitting free chunk: after this, an
  element the kernel never writes keeps `value` instead of stale, possibly correct, data.
  (Interpret mode fills unwritten outputs with NaN by itself.)
  """
  buffers = [jnp.full(shape, value, dtype) for _ in range(2)]
  jax.block_until_ready(buffers)
  for b in buffers:
    b.delete()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SeedOutcome:
  seed: int
  comparison: Comparison
  output: jax.Array


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CorrectnessReport:
  outcomes: tuple[SeedOutcome, ...]
  rejections: tuple[str, ...]  # mutation, donation, caching, unwritten elements

  @property
  def correct(self) -> bool:
    return all(o.comparison.passed for o in self.outcomes)

  def worst(self, field: str) -> float | None:
    values = [getattr(o.comparison, field) for o in self.outcomes]
    values = [v for v in values if v is not None]
    return max(values) if values else None


class OutputError(Exception):
  """The kernel returned something other than one array of the task's shape and dtype."""


def _check_output(out, spec: TaskSpec, dims) -> None:
  expected = spec.output(dims)
  if not isinstance(out, jax.Array):
    raise OutputError(f"kernel returned {type(out).__name__}, expected one array of shape {expected}")
  if tuple(out.shape) != expected or out.dtype != jnp.dtype(spec.output_dtype):
    raise OutputError(f"kernel returned {out.dtype}{list(out.shape)}, expected "
                    f"{spec.output_dtype}{list(expected)}")


def _inputs_changed(inputs: Sequence[jax.Array], copies: Sequence[jax.Array],
                    names: Sequence[str]) -> list[str]:
  changed = []
  for x, c, name in zip(inputs, copies, names):
    if x.is_deleted():
      changed.append(f"input {name} was donated (deleted) by the kernel")
    elif not bool(jnp.array_equal(x, c, equal_nan=True)):
      changed.append(f"input {name} was mutated in place")
  return changed


def check_correctness(fn: Callable, spec: TaskSpec, dims, seeds: Sequence[int], *,
                      on_gpu: bool) -> CorrectnessReport:
  """Runs fn on fresh inputs per seed with a poisoned output, against the HIGHEST reference.

  Raises OutputError for an output of the wrong structure, shape or dtype.
  """
  names = [i.name for i in spec.inputs]
  outcomes, rejections = [], []
  for seed in seeds:
    inputs = spec.make_inputs(dims, seed)
    copies = [jnp.array(x, copy=True) for x in inputs]
    expected = spec.expected(*inputs)
    if on_gpu:
      poison_allocator(expected.shape, expected.dtype, POISON)
    out = fn(*inputs)
    _check_output(out, spec, dims)
    jax.block_until_ready(out)
    rejections += _inputs_changed(inputs, copies, names)
    comparison = compare(out, expected, spec.tolerance)
    if not comparison.passed:
      rejections += _cached_or_unwritten(fn, inputs, out, outcomes, on_gpu=on_gpu)
    outcomes.append(SeedOutcome(seed=seed, comparison=comparison, output=out))
  return CorrectnessReport(outcomes=tuple(outcomes), rejections=tuple(dict.fromkeys(rejections)))


def _cached_or_unwritten(fn, inputs, out, earlier: Sequence[SeedOutcome], *,
                         on_gpu: bool) -> list[str]:
  """Explains a wrong output that is a replay of an earlier one or has unwritten elements."""
  reasons = []
  for prev in earlier:
    if bool(jnp.array_equal(prev.output, out)):
      reasons.append(f"output cached across calls: seed {prev.seed}'s output was returned for "
                     "different inputs")
  if on_gpu:
    poison_allocator(out.shape, out.dtype, SENTINEL)
    again = fn(*inputs)
    unwritten = int(jnp.sum(again == SENTINEL))
    if unwritten:
      reasons.append(f"elements left unwritten: {unwritten} of {again.size} output elements kept "
                     "the poison value")
  return reasons


def check_filters(fn: Callable, spec: TaskSpec, dims, seed: int, out) -> tuple[FilterResult, ...]:
  """The degeneracy filters on fn's output for `seed`, and input impact of EVERY input."""
  inputs = spec.make_inputs(dims, seed)
  other = spec.make_inputs(dims, seed + 7919)
  names = [i.name for i in spec.inputs]
  thr = filters.threshold(spec.expected(*inputs))
  return (*filters.output_filters(out, inputs, names, thr),
          filters.input_impact(fn, inputs, other, names, out, thr))
