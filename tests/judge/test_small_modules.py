"""The judge's small modules, where a one-token change would pass the other tests: tolerance,
input families, degeneracy filters and the candidate checks (all in setup.cfg's [mutmut]
selection). Each test runs in this process on arrays small enough to compute by hand, in
milliseconds.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset import Size, filters, tolerance
from pallasbench_dataset.evaluation.judge import checks
from pallasbench_dataset.families import Affine, InputFamily
from pallasbench_dataset.tasks import get_task
from pallasbench_dataset.precision import tolerance_for
from pallasbench_dataset.tolerance import AtolScale, Comparison, Tolerance, ToleranceClass, compare

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


# ---------------------------------------------------------------------------------------------
# families


def test_affine_text_of_each_form():
  assert Affine(input="x").describe() == "x"
  assert Affine(input="x", shift=1.0).describe() == "x + 1"
  assert Affine(input="x", scale=0.5, shift=-2.5).describe() == "x * 0.5 - 2.5"
  assert Affine(input="x", scale=-1.0).describe() == "x * -1"


def test_affine_keeps_the_inputs_dtype():
  x = jnp.asarray([1.0, -2.0, 4.0], jnp.bfloat16)
  got = Affine(input="x", scale=2.0, shift=1.0).apply(x)
  assert got.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.float32([3.0, -3.0, 9.0]))


def test_a_family_names_itself_its_unknown_inputs_and_the_tasks_inputs():
  spec = get_task("add")
  inputs = spec.make_inputs(Size.SMALL, 0)
  family = InputFamily(name="f", why="w", transforms=(Affine(input="z"), Affine(input="w")))
  with pytest.raises(KeyError) as raised:
    family.derive(inputs, spec.inputs)
  assert raised.value.args[0] == ("family 'f' transforms ['w', 'z'], not inputs of the task "
                                  "(['x', 'y'])")


def test_a_family_needs_one_input_per_spec():
  spec = get_task("add")
  inputs = spec.make_inputs(Size.SMALL, 0)
  family = InputFamily(name="f", why="w", transforms=(Affine(input="x", shift=1.0),))
  derived = family.derive(inputs, spec.inputs)
  np.testing.assert_array_equal(derived[1], inputs[1])
  with pytest.raises(ValueError):
    family.derive(inputs[:1], spec.inputs)


# ---------------------------------------------------------------------------------------------
# filters


def test_an_empty_output_is_a_copy_of_an_empty_input_of_its_shape():
  empty = np.zeros((0, 3), np.float32)
  result = filters.not_input_copy(empty, [empty, np.zeros(2, np.float32)], ["x", "y"], 0.1)
  assert not result.passed and result.detail == "output equals input(s) ['x']"


# ---------------------------------------------------------------------------------------------
# checks


def _cmp(passed, reason=None):
  return Comparison(passed=passed, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
                    reason=reason)


def test_verdict_failures_name_each_failed_seed_then_each_failed_other_check():
  verdict = checks.Verdict(
      comparisons=(_cmp(True), _cmp(False, "off"), _cmp(False, "nan")), filters=(),
      rejections=(), general_shapes=None, edge_error=None,
      other_comparisons=(("family a", _cmp(False, "far")), ("family b", _cmp(True)),
                         ("edge", _cmp(False, "bad"))))
  assert verdict.failures((4, 5, 6)) == ["seed 5: off", "seed 6: nan", "family a: far",
                                         "edge: bad"]
  assert not verdict.correct
  assert not dataclasses.replace(verdict, comparisons=(_cmp(True),)).correct
  assert dataclasses.replace(verdict, comparisons=(_cmp(True),), other_comparisons=()).correct
