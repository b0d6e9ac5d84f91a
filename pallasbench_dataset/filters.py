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


# The arithmetic of each group of filters is one compiled function: op by op, the filters of
# one evaluation compiled about 25 small XLA modules for its shapes (each task has its own),
# a large share of the judge's checks on a GPU, where every compile costs tens of ms.
@jax.jit
def _max_abs(x) -> jax.Array:
  return jnp.nanmax(jnp.abs(_finite(x)))


@jax.jit
def _output_statistics(out, copies: tuple) -> dict:
  """Every figure of the one-output filters; `copies`: the inputs of the output's shape."""
  fin = _finite(out)
  return {"range": jnp.nanmax(fin) - jnp.nanmin(fin), "std": jnp.nanstd(fin),
          "axes": tuple(jnp.nanmax(jnp.nanstd(fin, axis=a)) for a in range(out.ndim)),
          "max_abs": jnp.nanmax(jnp.abs(fin)),
          "copies": tuple(jnp.nanmax(jnp.abs(fin - _finite(x.astype(out.dtype)))) for x in copies)}


@jax.jit
def _changes(base, outputs: tuple) -> tuple:
  base_fin = _finite(base)
  return tuple(jnp.nanmax(jnp.abs(_finite(o) - base_fin)) for o in outputs)


def _figures(out, inputs: Sequence = ()) -> dict:
  """_output_statistics as floats, with `copies` keyed by the index of each input of the
  output's shape; an empty output has every figure 0."""
  out = jnp.asarray(out)
  same = [i for i, x in enumerate(inputs) if x.shape == out.shape]
  if not out.size:
    return {"range": 0.0, "std": 0.0, "axes": [0.0] * out.ndim, "max_abs": 0.0,
            "copies": dict.fromkeys(same, 0.0)}
  stats = jax.device_get(_output_statistics(out, tuple(jnp.asarray(inputs[i]) for i in same)))
  return {"range": float(stats["range"]), "std": float(stats["std"]),
          "axes": [float(v) for v in stats["axes"]], "max_abs": float(stats["max_abs"]),
          "copies": {i: float(v) for i, v in zip(same, stats["copies"])}}


@_x64
def threshold(reference) -> float:
  """Smallest meaningful variation for outputs like `reference`: 64 eps * max(1, max |ref|),
  eps of the output's dtype or of float32, whichever is finer. A bfloat16 output is measured
  at float32's resolution: 64 of its own ulps are half its scale (a bfloat16 softmax would
  count as constant), and a degenerate output (constant, zero, blind to an input) varies by
  exactly nothing in any dtype."""
  scale = float(_max_abs(reference)) if reference.size else 1.0
  eps = jnp.finfo(jnp.promote_types(reference.dtype, jnp.float32)).eps
  return EPS_MULTIPLE * float(eps) * max(1.0, scale)


def _range(stats: dict, thr: float) -> FilterResult:
  value = stats["range"]
  return FilterResult(name="output_range", passed=bool(math.isfinite(value) and value > thr),
                      value=value, threshold=thr, detail=f"max - min = {value:.3g}")


def _std(stats: dict, thr: float) -> FilterResult:
  value = stats["std"]
  return FilterResult(name="output_std", passed=bool(math.isfinite(value) and value > thr),
                      value=value, threshold=thr, detail=f"std = {value:.3g}")


def _axes(stats: dict, thr: float) -> FilterResult:
  """The output varies along every axis: some fiber along each axis has std above thr."""
  flat = stats["axes"]
  weakest = min(flat) if flat else 0.0
  dead = [a for a, v in enumerate(flat) if not v > thr]
  return FilterResult(
      name="axes_variation", passed=not dead and len(flat) > 0, value=weakest, threshold=thr,
      detail=f"constant along axes {dead}" if dead else f"max std per axis {[f'{v:.3g}' for v in flat]}")


def _zeros(stats: dict, thr: float) -> FilterResult:
  value = stats["max_abs"]
  return FilterResult(name="not_zeros", passed=value > thr, value=value, threshold=thr,
                      detail=f"max |out| = {value:.3g}")


def _copy(stats: dict, names: Sequence[str], thr: float) -> FilterResult:
  """The output is not (numerically) one of the inputs passed through."""
  copies = [names[i] for i, v in stats["copies"].items() if v <= thr]
  return FilterResult(name="not_input_copy", passed=not copies, value=None, threshold=thr,
                      detail=f"output equals input(s) {copies}" if copies else "differs from every input")


@_x64
def output_range(out, thr: float) -> FilterResult:
  return _range(_figures(out), thr)


@_x64
def output_std(out, thr: float) -> FilterResult:
  return _std(_figures(out), thr)


@_x64
def axes_variation(out, thr: float) -> FilterResult:
  return _axes(_figures(out), thr)


@_x64
def not_zeros(out, thr: float) -> FilterResult:
  return _zeros(_figures(out), thr)


@_x64
def not_input_copy(out, inputs: Sequence, names: Sequence[str], thr: float) -> FilterResult:
  return _copy(_figures(out, inputs), names, thr)


@_x64
def input_impact(outputs: Sequence, names: Sequence[str], base, thr: float) -> FilterResult:
  """Replacing ANY single input by a fresh draw must change the kernel's own output.

  `outputs[i]` is the output with input i replaced; `base` is the output on the inputs.
  """
  if len(outputs) != len(names):
    raise ValueError(f"{len(outputs)} outputs for {len(names)} inputs: one output per input")
  base = jnp.asarray(base)
  same = [i for i, o in enumerate(outputs) if o.shape == base.shape]
  measured = (jax.device_get(_changes(base, tuple(jnp.asarray(outputs[i]) for i in same)))
              if same and base.size else [0.0] * len(same))
  by_index = {i: float(v) for i, v in zip(same, measured)}
  changes = [by_index.get(i, float("inf")) for i in range(len(outputs))]
  dead = [name for name, change in zip(names, changes) if not change > thr]
  weakest = min(changes) if changes else 0.0
  return FilterResult(
      name="input_impact", passed=not dead, value=weakest, threshold=thr,
      detail=(f"output ignores input(s) {dead}" if dead else
              "output changes with every input: " +
              ", ".join(f"{n} {c:.3g}" for n, c in zip(names, changes))))


@_x64
def output_filters(out, inputs: Sequence, names: Sequence[str],
                   thr: float) -> tuple[FilterResult, ...]:
  """The filters that need only one output: range, std, axes, zeros, input copy (one pass)."""
  stats = _figures(out, inputs)
  return (_range(stats, thr), _std(stats, thr), _axes(stats, thr), _zeros(stats, thr),
          _copy(stats, names, thr))
