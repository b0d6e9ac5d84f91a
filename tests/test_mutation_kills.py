"""Behaviours of the judge's small modules that mutation testing found unpinned (setup.cfg's
[mutmut]): tolerance, input families, degeneracy filters and the candidate checks. Each test
runs in this process on arrays small enough to compute by hand, in milliseconds.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset import tolerance
from pallasbench_dataset.tolerance import AtolScale, Tolerance, ToleranceClass, compare, tolerance_for

HALF = Tolerance(kind=ToleranceClass.EXACT, rtol=0.5, atol=0.25)


# ---------------------------------------------------------------------------------------------
# tolerance


def test_tolerance_for_an_unknown_dtype_names_the_dtypes_that_have_tolerances():
  with pytest.raises(ValueError) as raised:
    tolerance_for(ToleranceClass.MATMUL, "float16")
  assert str(raised.value) == "no tolerances for 'float16' outputs; outputs are float32 or bfloat16"
  assert tolerance_for(ToleranceClass.MATMUL, jnp.dtype("bfloat16")).max_rel_l2 == 1e-2


def test_compare_hands_device_arrays_to_the_device_statistics_as_they_are(monkeypatch):
  """A `large` output stays on the judge's device: only the figures come back (no host copy)."""
  seen = []
  statistics = tolerance._statistics

  def spy(out, ref, **kwargs):
    seen.append((type(out), type(ref)))
    return statistics(out, ref, **kwargs)

  monkeypatch.setattr(tolerance, "_statistics", spy)
  ref = jnp.asarray([1.0, 2.0], jnp.float32)
  assert compare(ref, ref, HALF).passed
  assert compare([1.0, 2.0], (1.0, 2.0), HALF).passed
  assert issubclass(seen[0][0], jax.Array) and issubclass(seen[0][1], jax.Array)
  assert seen[1] == (np.ndarray, np.ndarray)


def test_compare_names_both_dtypes_of_a_mismatch():
  result = compare(np.zeros(3, np.float16), np.zeros(3, np.float32), HALF)
  assert result.reason == "output dtype float16 != expected float32" and not result.passed


def test_a_nonfinite_output_still_reports_the_absolute_tolerance_applied():
  scaled = dataclasses.replace(HALF, atol_scale=AtolScale.REFERENCE_RMS)
  result = compare(np.float32([np.nan, 0.0]), np.float32([3.0, 4.0]), scaled)
  # RMS of [3, 4] = sqrt(12.5); atol_used = 0.25 * RMS
  assert not result.passed and result.atol_used == pytest.approx(0.25 * math.sqrt(12.5))
