"""The judge's checks over an exported kernel: the candidate's runs, then the verdict on them.

The order is the defence: `run_candidate` runs the candidate on every input it will be
judged on, keeping its outputs, before any reference output exists in the process;
`judge_outputs` then computes the references, compares and filters (in float64 on the
device: a `large` output is 2^28 elements). Nothing here imports
or calls candidate Python: `fn` is a compiled `jax.export` artifact.

Correctness is checked on the nominal draw of every seed, on each input family of the task
(family i on the draw of seed i mod the seed count, mapped as the family says), and on the
edge shape: a wrong output on any of them makes the kernel incorrect. An edge shape the
kernel refuses (an error while exporting, compiling or running it) only sets general_shapes
False.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Final

import jax
import jax.numpy as jnp

from pallasbench_dataset import filters
from pallasbench_dataset.schema import FilterResult
from pallasbench_dataset.tasks import Dims, TaskSpec
from pallasbench_dataset.tolerance import Comparison, compare

POISON: Final = float("nan")
SENTINEL: Final = 1.2345e30    # a second poison value: unwritten output keeps it exactly
IMPACT_SEED_OFFSET: Final = 7919


class OutputError(Exception):
  """The kernel returned something other than one array of the task's shape and dtype."""


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


def check_output(out, spec: TaskSpec, dims: Dims) -> jax.Array:
  expected = spec.output(dims)
  if isinstance(out, (tuple, list)) and len(out) == 1:
    out = out[0]
  if not isinstance(out, jax.Array):
    raise OutputError(f"kernel returned {type(out).__name__}, expected one array of shape {expected}")
  if tuple(out.shape) != expected or out.dtype != jnp.dtype(spec.output_dtype):
    raise OutputError(f"kernel returned {out.dtype}{list(out.shape)}, expected "
                      f"{spec.output_dtype}{list(expected)}")
  return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CandidateRuns:
  """Everything the candidate computed (arrays on the judge's device), all of it computed
  before any reference existed."""
  seeds: tuple[int, ...]
  outputs: tuple[jax.Array, ...]           # one per seed
  family_outputs: tuple[jax.Array, ...]    # one per spec.families, on family_seed's draw
  impact_outputs: tuple[jax.Array, ...]    # seeds[0]'s inputs with input i redrawn
  mutated: tuple[str, ...]                 # inputs the kernel changed or donated
  unwritten: int | None                    # elements that kept the sentinel (GPU only)
  edge_output: jax.Array | None
  edge_error: str | None


def _run_once(fn: Callable, spec: TaskSpec, dims: Dims, inputs: Sequence[jax.Array]) -> jax.Array:
  return jax.block_until_ready(check_output(fn(*inputs), spec, dims))


# An input set is copied and compared by one compiled function each: op by op, every input
# shape of a task compiled a copy and a comparison of its own the first time a (task, size,
# precision) was judged.
@jax.jit
def _snapshot(inputs: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
  """Copies of `inputs` in buffers of their own (an output never aliases an undonated
  argument), which the kernel's run cannot reach."""
  return tuple(jnp.copy(x) for x in inputs)


@jax.jit
def _equal(xs: tuple[jax.Array, ...], ys: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
  """Whether each pair is bit-for-bit equal up to NaN payloads."""
  return tuple(jnp.array_equal(x, y, equal_nan=True) for x, y in zip(xs, ys, strict=True))


def _same(a, b) -> bool:
  return bool(_equal((a,), (b,))[0])


def mutations(inputs: Sequence[jax.Array], before: Sequence[jax.Array],
              names: Sequence[str]) -> list[str]:
  """What a kernel's calls did to their inputs, one line per input changed: `before` holds
  what each input held, in buffers of its own."""
  rows = list(zip(inputs, before, names, strict=True))
  kept = [(x, b) for x, b, _ in rows if not x.is_deleted()]
  same = iter(jax.device_get(_equal(tuple(x for x, _ in kept), tuple(b for _, b in kept))))
  changed = []
  for x, _, name in rows:
    if x.is_deleted():
      changed.append(f"input {name} was donated (deleted) by the kernel")
    elif not next(same):
      changed.append(f"input {name} was mutated in place")
  return changed


@jax.jit
def _count_sentinel(out) -> jax.Array:
  """Elements that kept SENTINEL; one compiled function (op by op, two programs a shape)."""
  return jnp.count_nonzero(out == jnp.asarray(SENTINEL, out.dtype))


def family_seed(seeds: Sequence[int], index: int) -> int:
  """The seed whose nominal draw family `index` maps: the seeds in turn."""
  return seeds[index % len(seeds)]


def impact_inputs(spec: TaskSpec, dims: Dims, seed: int, index: int) -> tuple[jax.Array, ...]:
  """seed's inputs with input `index` redrawn from another seed."""
  inputs = list(spec.make_inputs(dims, seed))
  inputs[index] = spec.make_input(dims, seed + IMPACT_SEED_OFFSET, index)
  return tuple(inputs)


def run_candidate(fn: Callable, spec: TaskSpec, dims: Dims, seeds: Sequence[int], *,
                  on_gpu: bool, edge: tuple[Callable, Dims] | None) -> CandidateRuns:
  """Every candidate run the verdict needs. Raises OutputError for a wrong output structure;
  anything the kernel raises while running propagates (a runtime error)."""
  names = [i.name for i in spec.inputs]
  mutated: list[str] = []

  def judged(inputs: tuple[jax.Array, ...]) -> jax.Array:
    before = _snapshot(inputs)
    if on_gpu:
      poison_allocator(spec.output(dims), spec.output_dtype, POISON)
    out = _run_once(fn, spec, dims, inputs)
    mutated.extend(mutations(inputs, before, names))
    return out

  outputs = tuple(judged(spec.make_inputs(dims, seed)) for seed in seeds)
  family_outputs = tuple(judged(spec.family_inputs(f, dims, family_seed(seeds, i)))
                         for i, f in enumerate(spec.families))
  impact = tuple(_run_once(fn, spec, dims, impact_inputs(spec, dims, seeds[0], i))
                 for i in range(len(names)))
  unwritten = None
  if on_gpu:
    poison_allocator(spec.output(dims), spec.output_dtype, SENTINEL)
    out = _run_once(fn, spec, dims, spec.make_inputs(dims, seeds[0]))
    unwritten = int(_count_sentinel(out))
  edge_output = edge_error = None
  if edge is not None:
    edge_fn, edge_dims = edge
    try:
      edge_output = _run_once(edge_fn, spec, edge_dims, spec.make_inputs(edge_dims, seeds[0]))
    except Exception as e:  # a kernel limited to some shapes may fail here in any way
      edge_error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]
  return CandidateRuns(seeds=tuple(seeds), outputs=outputs, family_outputs=family_outputs,
                       impact_outputs=impact,
                       mutated=tuple(dict.fromkeys(mutated)), unwritten=unwritten,
                       edge_output=edge_output, edge_error=edge_error)


def expected(spec: TaskSpec, inputs: Sequence[jax.Array]) -> jax.Array:
  return jax.block_until_ready(spec.expected(*inputs))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
  comparisons: tuple[Comparison, ...]   # one per seed, on the nominal draw
  filters: tuple[FilterResult, ...]
  rejections: tuple[str, ...]           # mutation, replay, unwritten, filters
  general_shapes: bool | None
  edge_error: str | None
  # (what was checked, comparison) beyond the nominal draws: each family, the edge shape
  other_comparisons: tuple[tuple[str, Comparison], ...] = ()

  @property
  def correct(self) -> bool:
    return all(c.passed for c in self.comparisons) and all(
        c.passed for _, c in self.other_comparisons)

  def failures(self, seeds: Sequence[int]) -> list[str]:
    """A reason per failed comparison: 'seed 5: ...', 'input family shifted (x + 100), seed 5:
    ...', 'edge shape {...}, seed 5: ...'."""
    nominal = [f"seed {s}: {c.reason}" for s, c in zip(seeds, self.comparisons) if not c.passed]
    return nominal + [f"{what}: {c.reason}" for what, c in self.other_comparisons if not c.passed]

  def worst(self, field: str) -> float | None:
    values = [getattr(c, field) for c in self.comparisons if getattr(c, field) is not None]
    return max(values) if values else None


def _replays(runs: CandidateRuns, comparisons: Sequence[Comparison]) -> list[str]:
  reasons = []
  for i, c in enumerate(comparisons):
    if c.passed:
      continue
    for j in range(i):
      if _same(runs.outputs[i], runs.outputs[j]):
        reasons.append(f"output cached across calls: seed {runs.seeds[j]}'s output was returned "
                       "for different inputs")
  return reasons


def judge_outputs(runs: CandidateRuns, spec: TaskSpec, dims: Dims,
                  edge_dims: Dims | None) -> Verdict:
  """References, comparisons and filters (on the device) for the candidate's runs."""
  names = [i.name for i in spec.inputs]
  refs = [expected(spec, spec.make_inputs(dims, seed)) for seed in runs.seeds]
  comparisons = tuple(compare(out, ref, spec.tolerance)
                      for out, ref in zip(runs.outputs, refs, strict=True))
  thr = filters.threshold(refs[0])
  del refs
  others = [(f"input family {f.name} ({f.formula}), seed {family_seed(runs.seeds, i)}",
             compare(out, expected(spec, spec.family_inputs(f, dims, family_seed(runs.seeds, i))),
                     spec.tolerance))
            for i, (f, out) in enumerate(zip(spec.families, runs.family_outputs, strict=True))]
  first_inputs = spec.make_inputs(dims, runs.seeds[0])
  base = runs.outputs[0]
  results = (*filters.output_filters(base, first_inputs, names, thr),
             filters.input_impact(runs.impact_outputs, names, base, thr))
  rejections = list(runs.mutated) + _replays(runs, comparisons)
  if runs.unwritten:
    rejections.append(f"elements left unwritten: {runs.unwritten} of {runs.outputs[0].size} "
                      "output elements kept the poison value")
  rejections += [f"{f.name}: {f.detail}" for f in results if not f.passed]
  general, edge_error = None, runs.edge_error
  if edge_dims is not None:
    if runs.edge_output is None:
      general = False
    else:
      edge = compare(runs.edge_output, expected(spec, spec.make_inputs(edge_dims, runs.seeds[0])),
                     spec.tolerance)
      general, edge_error = edge.passed, edge.reason
      others.append((f"edge shape {dict(edge_dims)}, seed {runs.seeds[0]}", edge))
    if edge_error:
      edge_error = f"edge shape {dict(edge_dims)}: {edge_error}"
  return Verdict(comparisons=comparisons, filters=results, rejections=tuple(dict.fromkeys(rejections)),
                 general_shapes=general, edge_error=edge_error, other_comparisons=tuple(others))
