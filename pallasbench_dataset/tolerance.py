"""Tolerance classes of TASKS.md and the one comparison every correctness check uses."""

from __future__ import annotations

import dataclasses
import enum
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


def compare(out, ref, tol: Tolerance) -> Comparison:
  """Compares `out` with the high-precision `ref`: shape, dtype, finiteness, then the tolerance.

  NaN or Inf where the reference is finite always fails. The relative error of an element
  is measured against max(|ref|, atol), so zeros in the reference do not divide by zero.
  The reductions run where the arrays live (on the GPU for large outputs); only scalars
  come back to the host.
  """
  if tuple(out.shape) != tuple(ref.shape):
    return Comparison(passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                      reason=f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
  if jnp.dtype(out.dtype) != jnp.dtype(ref.dtype):
    return Comparison(passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                      reason=f"output dtype {jnp.dtype(out.dtype)} != expected {jnp.dtype(ref.dtype)}")
  stats = {k: float(v) for k, v in _error_stats(jnp.asarray(out), jnp.asarray(ref),
                                                tol.rtol, tol.atol).items()}
  size = int(np.prod(out.shape))
  if stats["nonfinite"]:
    return Comparison(passed=False, max_abs_error=float("inf"), max_rel_error=float("inf"),
                      rel_l2_error=float("inf"),
                      reason=f"{int(stats['nonfinite'])} of {size} elements are NaN/Inf where "
                             "the reference is finite (unwritten or overflowed)")
  ref_norm, err_norm = stats["ref_norm"], stats["err_norm"]
  rel_l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
  reason = None
  if stats["violations"]:
    worst = np.unravel_index(int(stats["worst"]), tuple(out.shape))
    got = float(np.asarray(out[worst]))
    want = float(np.asarray(ref[worst]))
    reason = (f"not allclose(rtol={tol.rtol:g}, atol={tol.atol:g}): {int(stats['violations'])} "
              f"of {size} elements off; worst at index {tuple(int(i) for i in worst)}, got "
              f"{got:.6g}, expected {want:.6g}")
  elif tol.max_rel_l2 is not None and rel_l2 > tol.max_rel_l2:
    reason = f"relative L2 error {rel_l2:.3g} > {tol.max_rel_l2:g}"
  return Comparison(passed=reason is None, max_abs_error=stats["max_abs"],
                    max_rel_error=stats["max_rel"], rel_l2_error=rel_l2, reason=reason)


@jax.jit
def _error_stats(out, ref, rtol, atol):
  o, r = out.astype(jnp.float32), ref.astype(jnp.float32)
  finite_ref = jnp.isfinite(r)
  nonfinite = jnp.sum(~jnp.isfinite(o) & finite_ref)
  err = jnp.where(finite_ref, jnp.abs(o - r), 0.0)
  excess = err - (atol + rtol * jnp.abs(r))
  ref_scale = jnp.maximum(jnp.max(jnp.abs(jnp.where(finite_ref, r, 0.0))), 1.0)
  return {
      "nonfinite": nonfinite,
      "max_abs": jnp.max(err, initial=0.0),
      "max_rel": jnp.max(err / jnp.maximum(jnp.abs(r), atol), initial=0.0),
      # Norms of scaled values, so float32 sums of squares neither overflow nor underflow.
      "ref_norm": jnp.sqrt(jnp.sum(jnp.square(r / ref_scale))) * ref_scale,
      "err_norm": jnp.sqrt(jnp.sum(jnp.square(err / ref_scale))) * ref_scale,
      "violations": jnp.sum(excess > 0),
      "worst": jnp.argmax(excess),
  }
