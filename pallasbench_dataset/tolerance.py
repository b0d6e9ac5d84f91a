"""Tolerance classes of TASKS.md and the one comparison every correctness check uses."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import enum
import math
import os
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


# compare() works through flat chunks on a few threads (NumPy releases the GIL): a `large`
# output has 2^28 elements, and one pass of float64 temporaries over all of it at once took
# seconds per seed. The statistics combine exactly (counts, maxima, first worst index); the
# L2 norms are sums of per-chunk dot products, equal to NumPy's to rounding.
CHUNK: Final = 1 << 18
THREADS: Final = max(1, min(8, os.cpu_count() or 1))


@dataclasses.dataclass(frozen=True, slots=True)
class _Partial:
  nonfinite: int
  ref_sq: float
  err_sq: float
  max_abs: float
  max_rel: float
  violations: int
  worst: int          # flat index of the chunk's largest excess (first on ties)
  worst_excess: float


def _chunk(o32: np.ndarray, r32: np.ndarray, start: int, tol: Tolerance) -> _Partial:
  o, r = o32.astype(np.float64), r32.astype(np.float64)
  finite_ref = np.isfinite(r)
  nonfinite = int(np.count_nonzero(~np.isfinite(o) & finite_ref))
  if nonfinite:
    return _Partial(nonfinite, 0.0, 0.0, 0.0, 0.0, 0, start, -np.inf)
  abs_r = np.abs(r)
  err = np.where(finite_ref, np.abs(o - r), 0.0)
  excess = np.where(finite_ref, err - (tol.atol + tol.rtol * abs_r), -np.inf)
  ref = np.where(finite_ref, r, 0.0)
  worst = int(np.argmax(excess)) if excess.size else 0
  return _Partial(
      nonfinite=0, ref_sq=float(ref @ ref), err_sq=float(err @ err),
      max_abs=float(err.max(initial=0.0)),
      max_rel=float(np.where(finite_ref, err / np.maximum(abs_r, tol.atol), 0.0).max(initial=0.0)),
      violations=int(np.count_nonzero(excess > 0)), worst=start + worst,
      worst_excess=float(excess[worst]) if excess.size else -np.inf)


def _partials(o: np.ndarray, r: np.ndarray, tol: Tolerance) -> list[_Partial]:
  flat_o, flat_r = o.reshape(-1), r.reshape(-1)
  starts = range(0, max(flat_o.size, 1), CHUNK)
  work = [(flat_o[i:i + CHUNK], flat_r[i:i + CHUNK], i, tol) for i in starts]
  if len(work) == 1 or THREADS == 1:
    return [_chunk(*w) for w in work]
  with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
    return list(pool.map(lambda w: _chunk(*w), work))


def compare(out, ref, tol: Tolerance) -> Comparison:
  """Compares `out` with the high-precision `ref`: shape, dtype, finiteness, then the tolerance.

  NaN or Inf where the reference is finite always fails. The relative error of an element
  is measured against max(|ref|, atol), so zeros in the reference do not divide by zero.
  It runs on the host in NumPy (float64), over arrays already copied off the device: the
  judge compares only after the candidate has finished running.
  """
  out, ref = np.asarray(out), np.asarray(ref)
  if out.shape != ref.shape:
    return Comparison(passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                      reason=f"output shape {out.shape} != expected {ref.shape}")
  if out.dtype != ref.dtype:
    return Comparison(passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                      reason=f"output dtype {out.dtype} != expected {ref.dtype}")
  parts = _partials(out, ref, tol)
  nonfinite = sum(p.nonfinite for p in parts)
  if nonfinite:
    return Comparison(passed=False, max_abs_error=float("inf"), max_rel_error=float("inf"),
                      rel_l2_error=float("inf"),
                      reason=f"{nonfinite} of {out.size} elements are NaN/Inf where "
                             "the reference is finite (unwritten or overflowed)")
  ref_norm = math.sqrt(sum(p.ref_sq for p in parts))
  err_norm = math.sqrt(sum(p.err_sq for p in parts))
  rel_l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
  max_abs = max(p.max_abs for p in parts)
  max_rel = max(p.max_rel for p in parts)
  violations = sum(p.violations for p in parts)
  reason = None
  if violations:
    worst_part = max(parts, key=lambda p: p.worst_excess)  # the first of equals, as argmax
    worst = np.unravel_index(worst_part.worst, out.shape)
    reason = (f"not allclose(rtol={tol.rtol:g}, atol={tol.atol:g}): {violations} of {out.size} "
              f"elements off; worst at index {tuple(int(i) for i in worst)}, got "
              f"{float(out[worst]):.6g}, expected {float(ref[worst]):.6g}")
  elif tol.max_rel_l2 is not None and rel_l2 > tol.max_rel_l2:
    reason = f"relative L2 error {rel_l2:.3g} > {tol.max_rel_l2:g}"
  return Comparison(passed=reason is None, max_abs_error=max_abs, max_rel_error=max_rel,
                    rel_l2_error=rel_l2, reason=reason)
