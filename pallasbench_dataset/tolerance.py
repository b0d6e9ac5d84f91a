"""Tolerance classes of TASKS.md and the one comparison every correctness check uses."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Final

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
  """
  out_np, ref_np = np.asarray(out), np.asarray(ref)
  if out_np.shape != ref_np.shape:
    return Comparison(passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                      reason=f"output shape {out_np.shape} != expected {ref_np.shape}")
  if out_np.dtype != ref_np.dtype:
    return Comparison(passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                      reason=f"output dtype {out_np.dtype} != expected {ref_np.dtype}")
  o, r = out_np.astype(np.float64), ref_np.astype(np.float64)
  bad = ~np.isfinite(o) & np.isfinite(r)
  err = np.abs(o - r)
  if bad.any():
    return Comparison(passed=False, max_abs_error=float("inf"), max_rel_error=float("inf"),
                      rel_l2_error=float("inf"),
                      reason=f"{int(bad.sum())} of {o.size} elements are NaN/Inf where the "
                             "reference is finite (unwritten or overflowed)")
  max_abs = float(err.max()) if err.size else 0.0
  max_rel = float((err / np.maximum(np.abs(r), tol.atol)).max()) if err.size else 0.0
  ref_norm = float(np.linalg.norm(r))
  err_norm = float(np.linalg.norm(o - r))
  rel_l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
  close = bool(np.all(err <= tol.atol + tol.rtol * np.abs(r)))
  reason = None
  if not close:
    worst = np.unravel_index(int(np.argmax(err - tol.rtol * np.abs(r))), err.shape)
    reason = (f"not allclose(rtol={tol.rtol:g}, atol={tol.atol:g}): worst at index "
              f"{tuple(int(i) for i in worst)}, got {o[worst]:.6g}, expected {r[worst]:.6g}")
  elif tol.max_rel_l2 is not None and rel_l2 > tol.max_rel_l2:
    reason = f"relative L2 error {rel_l2:.3g} > {tol.max_rel_l2:g}"
  return Comparison(passed=reason is None, max_abs_error=max_abs, max_rel_error=max_rel,
                    rel_l2_error=rel_l2, reason=reason)
