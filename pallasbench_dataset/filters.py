"""Degeneracy filters on outputs, shared by the evaluator and the task-level tests.

The public suite's five filters (output range, output std, axes variation, input impact,
source analysis) done right: thresholds scale with the dtype's epsilon and the output's
magnitude, input impact perturbs EVERY input and compares the function's own outputs,
and outputs must differ from zeros and from every input of the same shape. The arithmetic
is float64 on the device the arrays are on (x64 is on only around it): on an H200 a `large`
output has 2^28 elements, and the same filters over host copies took 25 s per evaluation
(benchmarks/check_costs.py). Structure analysis lives with the judge (it reads the exported
module, not the source text).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import functools
import math
from typing import Final

import jax
import jax.numpy as jnp
import numpy as np

from pallasbench_dataset.schema import FilterResult

EPS_MULTIPLE: Final = 64  # a change below 64 ulps of the output's scale counts as no change


def _x64(fn: Callable) -> Callable:
  """Runs `fn` with float64 enabled (the filters' arithmetic), whatever the caller's mode."""
  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    with jax.enable_x64(True):
      return fn(*args, **kwargs)
  return wrapped


def _finite(x) -> jax.Array:
  """x as float64 with NaN for every non-finite element."""
  x = jnp.asarray(x).astype(jnp.float64)
  return jnp.where(jnp.isfinite(x), x, jnp.nan)


@_x64
def threshold(reference) -> float:
  """Smallest meaningful variation for outputs like `reference`: 64 eps * max(1, max |ref|),
  eps of the output's dtype or of float32, whichever is finer. A bfloat16 output is measured
  at float32's resolution: 64 of its own ulps are half its scale (a bfloat16 softmax would
  count as constant), and a degenerate output (constant, zero, blind to an input) varies by
  exactly nothing in any dtype."""
  scale = float(jnp.nanmax(jnp.abs(_finite(reference)))) if reference.size else 1.0
  eps = jnp.finfo(jnp.promote_types(reference.dtype, jnp.float32)).eps
  return EPS_MULTIPLE * float(eps) * max(1.0, scale)


@_x64
def output_range(out, thr: float, finite=None) -> FilterResult:
  """`finite`: _finite(out) when the caller already has it (one float64 pass fewer)."""
  fin = _finite(out) if finite is None else finite
  value = float(jnp.nanmax(fin) - jnp.nanmin(fin)) if out.size else 0.0
  return FilterResult(name="output_range", passed=bool(math.isfinite(value) and value > thr),
                      value=value, threshold=thr, detail=f"max - min = {value:.3g}")


@_x64
def output_std(out, thr: float, finite=None) -> FilterResult:
  value = float(jnp.nanstd(_finite(out) if finite is None else finite)) if out.size else 0.0
  return FilterResult(name="output_std", passed=bool(math.isfinite(value) and value > thr),
                      value=value, threshold=thr, detail=f"std = {value:.3g}")


@_x64
def axes_variation(out, thr: float, finite=None) -> FilterResult:
  """The output varies along every axis: some fiber along each axis has std above thr."""
  fin = _finite(out) if finite is None else finite
  flat = []
  for axis in range(out.ndim):
    flat.append(float(jnp.nanmax(jnp.nanstd(fin, axis=axis))) if out.size else 0.0)
  weakest = min(flat) if flat else 0.0
  dead = [a for a, v in enumerate(flat) if not v > thr]
  return FilterResult(
      name="axes_variation", passed=not dead and out.ndim > 0, value=weakest, threshold=thr,
      detail=f"constant along axes {dead}" if dead else f"max std per axis {[f'{v:.3g}' for v in flat]}")


@_x64
def not_zeros(out, thr: float, finite=None) -> FilterResult:
  value = float(jnp.nanmax(jnp.abs(_finite(out) if finite is None else finite))) if out.size else 0.0
  return FilterResult(name="not_zeros", passed=value > thr, value=value, threshold=thr,
                      detail=f"max |out| = {value:.3g}")


@_x64
def not_input_copy(out, inputs: Sequence, names: Sequence[str], thr: float,
                   finite=None) -> FilterResult:
  """The output is not (numerically) one of the inputs passed through."""
  fin = _finite(out) if finite is None else finite
  copies = [n for x, n in zip(inputs, names)
            if x.shape == out.shape
            and float(jnp.nanmax(jnp.abs(fin - _finite(jnp.asarray(x).astype(out.dtype))))) <= thr]
  return FilterResult(name="not_input_copy", passed=not copies, value=None, threshold=thr,
                      detail=f"output equals input(s) {copies}" if copies else "differs from every input")


@_x64
def input_impact(outputs: Sequence, names: Sequence[str], base, thr: float) -> FilterResult:
  """Replacing ANY single input by a fresh draw must change the kernel's own output.

  `outputs[i]` is the output with input i replaced; `base` is the output on the inputs.
  """
  changes, dead = [], []
  base_fin = _finite(base)
  for out, name in zip(outputs, names, strict=True):
    change = (float(jnp.nanmax(jnp.abs(_finite(out) - base_fin)))
              if out.shape == base.shape else float("inf"))
    changes.append(change)
    if not change > thr:
      dead.append(name)
  weakest = min(changes) if changes else 0.0
  return FilterResult(
      name="input_impact", passed=not dead, value=weakest, threshold=thr,
      detail=(f"output ignores input(s) {dead}" if dead else
              "output changes with every input: " +
              ", ".join(f"{n} {c:.3g}" for n, c in zip(names, changes))))


@_x64
def output_filters(out, inputs: Sequence, names: Sequence[str],
                   thr: float) -> tuple[FilterResult, ...]:
  """The filters that need only one output: range, std, axes, zeros, input copy."""
  fin = _finite(out)
  return (output_range(out, thr, fin), output_std(out, thr, fin), axes_variation(out, thr, fin),
          not_zeros(out, thr, fin), not_input_copy(out, inputs, names, thr, fin))
