"""Tolerance classes of TASKS.md and the one comparison every correctness check uses."""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections.abc import Mapping
from typing import Final

import jax
import jax.numpy as jnp
import numpy as np


class ToleranceClass(enum.StrEnum):
  EXACT = "exact"
  TRANSCENDENTAL = "transcendental"
  REDUCTION = "reduction"
  MATMUL = "matmul"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Tolerance:
  """allclose(rtol, atol), and for contractions also ||out - ref|| / ||ref|| <= max_rel_l2."""
  kind: ToleranceClass
  rtol: float
  atol: float
  max_rel_l2: float | None = None


TOLERANCES: Final[Mapping[ToleranceClass, Tolerance]] = {
    ToleranceClass.EXACT: Tolerance(kind=ToleranceClass.EXACT, rtol=1e-5, atol=1e-6),
    ToleranceClass.TRANSCENDENTAL: Tolerance(
        kind=ToleranceClass.TRANSCENDENTAL, rtol=1e-4, atol=1e-5),
    ToleranceClass.REDUCTION: Tolerance(kind=ToleranceClass.REDUCTION, rtol=1e-4, atol=1e-4),
    # GPUs run float32 contractions in TF32 by default (about 3e-4 relative error).
    ToleranceClass.MATMUL: Tolerance(
        kind=ToleranceClass.MATMUL, rtol=1e-2, atol=1e-2, max_rel_l2=2e-3),
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
  """The outcome of comparing one output with its reference."""
  passed: bool
  max_abs_error: float | None
  max_rel_error: float | None
  rel_l2_error: float | None
  reason: str | None = None


@functools.partial(jax.jit, static_argnames=("rtol", "atol"))
def _statistics(out, ref, *, rtol: float, atol: float) -> dict[str, jax.Array]:
  """Everything compare() reports, in float64 on the arrays' device (x64 is on around it)."""
  o, r = out.astype(jnp.float64).reshape(-1), ref.astype(jnp.float64).reshape(-1)
  finite_ref = jnp.isfinite(r)
  abs_r = jnp.abs(r)
  err = jnp.where(finite_ref, jnp.abs(o - r), 0.0)
  excess = jnp.where(finite_ref, err - (atol + rtol * abs_r), -jnp.inf)
  ref0 = jnp.where(finite_ref, r, 0.0)
  worst = jnp.argmax(excess) if excess.size else jnp.zeros((), jnp.int64)
  return dict(
      nonfinite=jnp.count_nonzero(~jnp.isfinite(o) & finite_ref),
      ref_norm=jnp.sqrt(jnp.sum(ref0 * ref0)), err_norm=jnp.sqrt(jnp.sum(err * err)),
      max_abs=jnp.max(err, initial=0.0),
      max_rel=jnp.max(jnp.where(finite_ref, err / jnp.maximum(abs_r, atol), 0.0), initial=0.0),
      violations=jnp.count_nonzero(excess > 0), worst=worst,
      worst_out=o[worst] if o.size else jnp.zeros((), jnp.float64),
      worst_ref=r[worst] if r.size else jnp.zeros((), jnp.float64))


def compare(out, ref, tol: Tolerance) -> Comparison:
  """Compares `out` with the high-precision `ref`: shape, dtype, finiteness, then the tolerance.

  NaN or Inf where the reference is finite always fails. The relative error of an element
  is measured against max(|ref|, atol), so zeros in the reference do not divide by zero.
  The arithmetic is float64, on the device the arrays are on (the judge's GPU: a `large`
  output has 2^28 elements, seconds of host work per seed), and only the figures come back.
  The judge compares only after the candidate has finished running.
  """
  out, ref = (x if isinstance(x, jax.Array) else np.asarray(x) for x in (out, ref))
  if tuple(out.shape) != tuple(ref.shape):
    return Comparison(passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                      reason=f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
  if np.dtype(out.dtype) != np.dtype(ref.dtype):
    return Comparison(passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                      reason=f"output dtype {np.dtype(out.dtype)} != expected {np.dtype(ref.dtype)}")
  with jax.enable_x64(True):
    stats = {k: v.item() for k, v in _statistics(out, ref, rtol=tol.rtol, atol=tol.atol).items()}
  size = math.prod(out.shape)
  if stats["nonfinite"]:
    return Comparison(passed=False, max_abs_error=float("inf"), max_rel_error=float("inf"),
                      rel_l2_error=float("inf"),
                      reason=f"{stats['nonfinite']} of {size} elements are NaN/Inf where "
                             "the reference is finite (unwritten or overflowed)")
  ref_norm, err_norm = stats["ref_norm"], stats["err_norm"]
  rel_l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
  reason = None
  if stats["violations"]:
    worst = np.unravel_index(int(stats["worst"]), tuple(out.shape))
    reason = (f"not allclose(rtol={tol.rtol:g}, atol={tol.atol:g}): {stats['violations']} of "
              f"{size} elements off; worst at index {tuple(int(i) for i in worst)}, got "
              f"{stats['worst_out']:.6g}, expected {stats['worst_ref']:.6g}")
  elif tol.max_rel_l2 is not None and rel_l2 > tol.max_rel_l2:
    reason = f"relative L2 error {rel_l2:.3g} > {tol.max_rel_l2:g}"
  return Comparison(passed=reason is None, max_abs_error=float(stats["max_abs"]),
                    max_rel_error=float(stats["max_rel"]), rel_l2_error=rel_l2, reason=reason)
