"""The judge's building blocks, called directly: the tolerance comparison, the degeneracy filters,
the candidate checks, the judge's own steps and the exporter protocol.

Each test pins a behaviour a verdict depends on (a threshold and which side of it passes, the
text a reason carries, the order of rejections, a field of the record), on arrays small
enough to compute by hand. They run in this process on the CPU, in a few seconds.
"""

import ctypes
import dataclasses
import datetime
import functools
import json
import logging
import math
import pathlib
import secrets
import shutil
import subprocess
import sys
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset import filters
from pallasbench_dataset.evaluation.judge import checks
from pallasbench_dataset.schema import FilterResult
from pallasbench_dataset.tasks import get_task
from pallasbench_dataset.tolerance import TOLERANCES, Comparison, Tolerance, ToleranceClass, compare

F32_EPS = float(np.finfo(np.float32).eps)
RELU = get_task("relu")
ADD = get_task("add")
TINY = types.MappingProxyType({"N": 8, "M": 16})     # relu and add at 8x16: fast everywhere
TINY_EDGE = types.MappingProxyType({"N": 3, "M": 5})
# Binary fractions: every bound below is exact in float64, so "at the bound" means equal.
HALF = Tolerance(kind=ToleranceClass.EXACT, rtol=0.5, atol=0.25)


def f32(*values):
  return np.array(values, np.float32)


# ---------------------------------------------------------------------------------------------
# tolerance.compare


def test_tolerance_table_is_the_published_one():
  """The dataset card publishes these numbers (data/README.md); records carry them."""
  table = {k.value: (t.kind, t.rtol, t.atol, t.max_rel_l2) for k, t in TOLERANCES.items()}
  assert table == {
      "exact": (ToleranceClass.EXACT, 1e-5, 1e-6, None),
      "transcendental": (ToleranceClass.TRANSCENDENTAL, 1e-4, 1e-5, None),
      "reduction": (ToleranceClass.REDUCTION, 1e-4, 1e-4, None),
      "matmul": (ToleranceClass.MATMUL, 1e-2, 1e-2, 1e-3),
  }


def test_compare_rejects_a_shape_mismatch_without_numbers():
  assert compare(np.zeros(3, np.float32), np.zeros(4, np.float32), HALF) == Comparison(
      passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
      reason="output shape (3,) != expected (4,)")


def test_compare_rejects_a_dtype_mismatch_without_numbers():
  assert compare(np.zeros(3, np.float64), np.zeros(3, np.float32), HALF) == Comparison(
      passed=False, max_abs_error=None, max_rel_error=None, rel_l2_error=None,
      reason="output dtype float64 != expected float32")


def test_compare_accepts_array_likes():
  assert compare([1.0, 2.0], (1.0, 2.0), HALF).passed


def test_compare_counts_only_nonfinite_outputs_where_the_reference_is_finite():
  ref = f32(1.0, 2.0, np.nan, np.inf, 2.0)
  out = f32(1.0, np.nan, np.nan, 5.0, 2.0)   # only index 1 counts: ref is NaN/Inf at 2 and 3
  assert compare(out, ref, HALF) == Comparison(
      passed=False, max_abs_error=math.inf, max_rel_error=math.inf, rel_l2_error=math.inf,
      reason="1 of 5 elements are NaN/Inf where the reference is finite (unwritten or overflowed)")


def test_compare_ignores_elements_where_the_reference_is_not_finite():
  ref = f32(np.inf, 1.0, -np.inf)
  out = f32(np.inf, 1.25, 3.0)
  with np.errstate(invalid="ignore"):   # inf - inf
    result = compare(out, ref, HALF)
  # err = [0, 0.25, 0]; the reference's norm counts only its finite element
  assert result == Comparison(passed=True, max_abs_error=0.25, max_rel_error=0.25,
                              rel_l2_error=0.25, reason=None)
  nan_ref = compare(f32(np.nan, 1.25), f32(np.nan, 1.0), HALF)
  assert nan_ref.passed and nan_ref.max_abs_error == 0.25 and nan_ref.rel_l2_error == 0.25


def test_compare_at_the_bound_passes_and_reports_every_error_measure():
  ref = f32(1.0, -2.0, 0.0, 4.0)
  out = f32(1.5, -2.0, 0.25, 4.0)
  # err = [.5, 0, .25, 0]; bound = .25 + .5|ref| = [.75, 1.25, .25, 2.25]: index 2 exactly at it
  result = compare(out, ref, HALF)
  assert result.passed and result.reason is None
  assert result.max_abs_error == 0.5
  assert result.max_rel_error == 1.0           # .25 / max(|0|, atol)
  assert result.rel_l2_error == pytest.approx(math.sqrt(0.3125 / 21), rel=1e-12)


def test_compare_just_outside_the_bound_fails():
  ref, out = f32(0.0), f32(0.25 + 2 ** -20)
  result = compare(out, ref, HALF)
  assert not result.passed and "1 of 1 elements off" in result.reason


def test_compare_reports_the_worst_element_by_excess():
  ref = f32(1.0, -2.0, 0.0, 4.0).reshape(2, 2)
  out = f32(1.0, -2.0, 0.5, 7.0).reshape(2, 2)
  # excess = err - bound = [-.75, -1.25, .25, .75]: two violations, the worst at (1, 1)
  result = compare(out, ref, HALF)
  assert result == Comparison(
      passed=False, max_abs_error=3.0, max_rel_error=2.0,
      rel_l2_error=pytest.approx(math.sqrt(9.25 / 21), rel=1e-12),
      reason="not allclose(rtol=0.5, atol=0.25): 2 of 4 elements off; worst at index (1, 1), "
             "got 7, expected 4")


def test_compare_worst_is_the_largest_excess_not_the_largest_error():
  ref = f32(100.0, 0.0)
  out = f32(140.0, 1.0)     # err [40, 1]; bound [50.25, .25]: only index 1 is off
  result = compare(out, ref, HALF)
  assert "1 of 2 elements off; worst at index (1,), got 1, expected 0" in result.reason
  assert result.max_abs_error == 40.0


def test_compare_bounds_the_relative_l2_error_strictly():
  ref = f32(2.0, 2.0, 2.0, 2.0)
  out = ref + 1.0         # every element inside allclose (1 < 1.25); ||err|| / ||ref|| = 2 / 4
  over = dataclasses.replace(HALF, max_rel_l2=0.25)
  assert compare(out, ref, over) == Comparison(
      passed=False, max_abs_error=1.0, max_rel_error=0.5, rel_l2_error=0.5,
      reason="relative L2 error 0.5 > 0.25")
  assert compare(out, ref, dataclasses.replace(HALF, max_rel_l2=0.5)).passed
  assert compare(out, ref, HALF).passed      # no L2 limit for the elementwise classes


def test_compare_relative_l2_against_a_zero_reference():
  zeros = np.zeros(4, np.float32)
  exact = compare(zeros, zeros, HALF)
  assert exact == Comparison(passed=True, max_abs_error=0.0, max_rel_error=0.0,
                             rel_l2_error=0.0, reason=None)
  near = f32(0.125, 0.0, 0.0, 0.0)
  assert compare(near, zeros, HALF).rel_l2_error == math.inf
  failed = compare(near, zeros, dataclasses.replace(HALF, max_rel_l2=0.25))
  assert not failed.passed and failed.reason == "relative L2 error inf > 0.25"


def test_compare_of_empty_outputs_passes_with_zero_errors():
  empty = np.zeros((0, 3), np.float32)
  assert compare(empty, empty, HALF) == Comparison(
      passed=True, max_abs_error=0.0, max_rel_error=0.0, rel_l2_error=0.0, reason=None)


# ---------------------------------------------------------------------------------------------
# filters


def test_threshold_is_64_ulps_of_the_outputs_scale():
  assert filters.threshold(f32(0.5, -0.25)) == 64 * F32_EPS         # scale at least 1
  assert filters.threshold(f32(-3.0, 2.0)) == 64 * F32_EPS * 3.0    # the largest magnitude
  assert filters.threshold(f32(np.inf, 2.0, np.nan)) == 64 * F32_EPS * 2.0  # non-finite ignored
  assert filters.threshold(np.array([10.0])) == 64 * float(np.finfo(np.float64).eps) * 10.0
  assert filters.threshold(np.zeros(0, np.float32)) == 64 * F32_EPS


def test_output_range_is_strictly_above_the_threshold():
  out = f32(1.0, 4.0, np.nan, np.inf)
  assert filters.output_range(out, 1.0) == FilterResult(
      name="output_range", passed=True, value=3.0, threshold=1.0, detail="max - min = 3")
  assert not filters.output_range(out, 3.0).passed
  assert filters.output_range(np.zeros(0, np.float32), 1e-3) == FilterResult(
      name="output_range", passed=False, value=0.0, threshold=1e-3, detail="max - min = 0")


def test_filters_measure_float32_outputs_in_float64():
  full_range = f32(-3e38, 3e38)      # max - min overflows float32, not float64
  result = filters.output_range(full_range, 1.0)
  assert result.passed and result.value == pytest.approx(6e38)


def test_output_range_that_overflows_fails():
  huge = np.array([-1.7e308, 1.7e308])
  with np.errstate(over="ignore"):
    result = filters.output_range(huge, 1.0)
  assert result.value == math.inf and not result.passed


def test_output_std_is_strictly_above_the_threshold():
  out = f32(1.0, 3.0, np.nan)
  assert filters.output_std(out, 0.5) == FilterResult(
      name="output_std", passed=True, value=1.0, threshold=0.5, detail="std = 1")
  assert not filters.output_std(out, 1.0).passed
  assert filters.output_std(np.zeros(0, np.float32), 1e-3) == FilterResult(
      name="output_std", passed=False, value=0.0, threshold=1e-3, detail="std = 0")
  with np.errstate(over="ignore", invalid="ignore"):
    assert not filters.output_std(np.array([-1.7e308, 1.7e308]), 1.0).passed


def test_axes_variation_finds_the_constant_axis():
  constant_rows = f32(1.0, 1.0, 3.0, 3.0).reshape(2, 2)   # std over axis 0: 1; over axis 1: 0
  assert filters.axes_variation(constant_rows, 0.5) == FilterResult(
      name="axes_variation", passed=False, value=0.0, threshold=0.5,
      detail="constant along axes [1]")
  varied = f32(1.0, 2.0, 3.0, 5.0).reshape(2, 2)          # max std: axis 0 1.5, axis 1 1.0
  assert filters.axes_variation(varied, 0.5) == FilterResult(
      name="axes_variation", passed=True, value=1.0, threshold=0.5,
      detail="max std per axis ['1.5', '1']")
  at_threshold = filters.axes_variation(varied, 1.0)
  assert not at_threshold.passed and at_threshold.detail == "constant along axes [1]"


def test_axes_variation_of_a_vector():
  assert filters.axes_variation(f32(1.0, 3.0), 0.5) == FilterResult(
      name="axes_variation", passed=True, value=1.0, threshold=0.5, detail="max std per axis ['1']")


def test_axes_variation_fails_scalars_and_empty_outputs():
  assert filters.axes_variation(np.array(3.0, np.float32), 0.5) == FilterResult(
      name="axes_variation", passed=False, value=0.0, threshold=0.5, detail="max std per axis []")
  empty = filters.axes_variation(np.zeros((0, 3), np.float32), 0.5)
  assert not empty.passed and empty.detail == "constant along axes [0, 1]"


def test_not_zeros_is_strictly_above_the_threshold():
  out = f32(0.0, -2.0, np.nan)
  assert filters.not_zeros(out, 1.0) == FilterResult(
      name="not_zeros", passed=True, value=2.0, threshold=1.0, detail="max |out| = 2")
  assert not filters.not_zeros(out, 2.0).passed
  assert filters.not_zeros(np.zeros(0, np.float32), 1e-3).value == 0.0


def test_not_input_copy_names_every_input_passed_through():
  out = f32(1.0, 2.0, 3.0)
  inputs = [f32(1.0, 2.0, 3.0), f32(1.0, 2.0), f32(1.0, 2.0, 3.5),
            np.array([1, 2, 3], np.int32), np.array([1.0, 2.0, 3.0])]
  names = ["same", "shorter", "off", "ints", "float64"]
  result = filters.not_input_copy(out, inputs, names, 0.1)
  assert result == FilterResult(name="not_input_copy", passed=False, value=None, threshold=0.1,
                                detail="output equals input(s) ['same', 'ints', 'float64']")
  assert not filters.not_input_copy(out, inputs[2:3], ["off"], 0.5).passed   # within thr: a copy
  assert filters.not_input_copy(out, inputs[1:3], names[1:3], 0.1) == FilterResult(
      name="not_input_copy", passed=True, value=None, threshold=0.1,
      detail="differs from every input")


def test_not_input_copy_compares_inputs_cast_to_the_outputs_dtype():
  ids = np.array([16777217], np.int32)          # 2**24 + 1: float32 rounds it to 2**24
  result = filters.not_input_copy(f32(16777216.0), [ids], ["ids"], 0.5)
  assert not result.passed and result.detail == "output equals input(s) ['ids']"


def test_input_impact_names_every_input_the_output_ignores():
  base = f32(1.0, 2.0)
  outputs = [f32(1.0, 2.5), f32(1.0, 2.0), f32(1.0, 2.0, 3.0)]   # changes .5, 0, inf (shape)
  assert filters.input_impact(outputs, ["x", "y", "z"], base, 0.5) == FilterResult(
      name="input_impact", passed=False, value=0.0, threshold=0.5,
      detail="output ignores input(s) ['x', 'y']")
  assert filters.input_impact([f32(1.0, 3.0), f32(2.0, 2.0)], ["x", "y"], base, 0.5) == \
      FilterResult(name="input_impact", passed=True, value=1.0, threshold=0.5,
                   detail="output changes with every input: x 1, y 1")
  with pytest.raises(ValueError):
    filters.input_impact(outputs, ["x"], base, 0.5)   # one output per input, no fewer


def test_input_impact_counts_a_changed_shape_as_a_change():
  result = filters.input_impact([f32(1.0, 2.0, 3.0)], ["z"], f32(1.0, 2.0), 0.5)
  assert result.passed and result.value == math.inf


def test_input_impact_of_no_inputs():
  assert filters.input_impact([], [], f32(1.0), 0.5) == FilterResult(
      name="input_impact", passed=True, value=0.0, threshold=0.5,
      detail="output changes with every input: ")


def test_output_filters_are_the_five_single_output_filters_in_order():
  out = f32(1.0, 2.0, 3.0, 5.0).reshape(2, 2)
  inputs, names = [f32(0.0, 1.0, 2.0, 3.0).reshape(2, 2)], ["x"]
  assert filters.output_filters(out, inputs, names, 0.5) == (
      filters.output_range(out, 0.5), filters.output_std(out, 0.5),
      filters.axes_variation(out, 0.5), filters.not_zeros(out, 0.5),
      filters.not_input_copy(out, inputs, names, 0.5))


# ---------------------------------------------------------------------------------------------
# checks: the candidate's runs


def _relu_jit():
  return jax.jit(RELU.reference)


def test_check_output_unwraps_a_single_array_and_refuses_anything_else():
  good = jnp.zeros((8, 16), jnp.float32)
  assert checks.check_output(good, RELU, TINY) is good
  assert checks.check_output((good,), RELU, TINY) is good
  assert checks.check_output([good], RELU, TINY) is good
  cases = [((good, good), "kernel returned tuple, expected one array of shape (8, 16)"),
           (np.zeros((8, 16), np.float32), "kernel returned ndarray, expected one array of shape (8, 16)"),
           (jnp.zeros((8, 15), jnp.float32), "kernel returned float32[8, 15], expected float32[8, 16]"),
           (jnp.zeros((8, 16), jnp.int32), "kernel returned int32[8, 16], expected float32[8, 16]")]
  for out, message in cases:
    with pytest.raises(checks.OutputError) as e:
      checks.check_output(out, RELU, TINY)
    assert str(e.value) == message


def test_run_once_keeps_the_finished_output_on_the_device():
  made = []

  def kernel(x):
    made.append(_relu_jit()(x))
    return made[-1]
  x = RELU.make_inputs(TINY, 1)[0]
  out = checks._run_once(kernel, RELU, TINY, (x,))  # pylint: disable=protected-access
  assert out is made[0] and isinstance(out, jax.Array) and out.is_ready()
  np.testing.assert_array_equal(np.asarray(out), np.maximum(np.asarray(x), 0))
  with pytest.raises(checks.OutputError):
    checks._run_once(lambda x: x[:4], RELU, TINY, (x,))  # pylint: disable=protected-access


def test_the_snapshot_of_an_input_set_outlives_the_inputs():
  """What a kernel's inputs are compared with after its run: copies in buffers of their own,
  so that a kernel that writes to or donates an input cannot change them too."""
  inputs = (jnp.arange(6.0).reshape(2, 3), jnp.array([1, -2], jnp.int32))
  before = checks._snapshot(inputs)  # pylint: disable=protected-access
  assert all(b.unsafe_buffer_pointer() != x.unsafe_buffer_pointer()
             for x, b in zip(inputs, before, strict=True))
  for x in inputs:
    x.delete()
  np.testing.assert_array_equal(before[0], np.arange(6.0).reshape(2, 3))
  np.testing.assert_array_equal(before[1], [1, -2])


def test_mutations_name_mutated_and_donated_inputs_in_order():
  kept = jnp.array([1.0, np.nan])            # NaN equals NaN: unchanged
  changed = jnp.array([1.0, 2.0])
  donated = jnp.array([3.0])
  donated.delete()
  before = [np.array([1.0, np.nan]), np.array([1.0, 2.5]), np.array([3.0])]
  assert checks.mutations([kept, changed, donated], before, ["a", "b", "c"]) == [
      "input b was mutated in place", "input c was donated (deleted) by the kernel"]
  with pytest.raises(ValueError):
    checks.mutations([kept], before, ["a"])


def test_impact_inputs_redraw_exactly_one_input():
  inputs = ADD.make_inputs(TINY, 5)
  redrawn = checks.impact_inputs(ADD, TINY, 5, 1)
  assert isinstance(redrawn, tuple) and len(redrawn) == 2
  np.testing.assert_array_equal(redrawn[0], inputs[0])
  np.testing.assert_array_equal(redrawn[1], ADD.make_input(TINY, 5 + checks.IMPACT_SEED_OFFSET, 1))
  assert not np.array_equal(redrawn[1], inputs[1])


def test_poison_allocator_frees_buffers_full_of_the_value(monkeypatch):
  made = []
  real_full = jnp.full

  def full(shape, value, dtype):
    made.append(real_full(shape, value, dtype))
    return made[-1]
  monkeypatch.setattr(checks, "jnp", types.SimpleNamespace(full=full))
  checks.poison_allocator((8, 16), "float16", 7.0)    # the output's size in bytes, not float32's
  assert made and all(b.is_deleted() for b in made)
  assert [(b.shape, b.dtype) for b in made] == [((8, 16), jnp.float16)] * len(made)


def test_poison_allocator_fills_with_the_value(monkeypatch):
  values = []
  real_full = jnp.full

  def full(shape, value, dtype):
    values.append(value)
    return real_full(shape, value, dtype)
  monkeypatch.setattr(checks, "jnp", types.SimpleNamespace(full=full))
  checks.poison_allocator((2,), "float32", 7.0)
  assert values and set(values) == {7.0}


def test_poison_values_are_a_nan_and_an_exact_float32_sentinel():
  assert math.isnan(checks.POISON)
  assert np.isfinite(np.float32(checks.SENTINEL)) and abs(checks.SENTINEL) > 1e29


def _runs(fn=None, seeds=(1, 2), on_gpu=False, edge=None, spec=RELU, dims=TINY):
  return checks.run_candidate(fn or _relu_jit(), spec, dims, seeds, on_gpu=on_gpu, edge=edge)


def test_run_candidate_runs_every_seed_and_every_impact_input():
  runs = _runs(jax.jit(ADD.reference), seeds=(7, 8), spec=ADD)
  assert runs.seeds == (7, 8) and isinstance(runs.seeds, tuple)
  for seed, out in zip(runs.seeds, runs.outputs, strict=True):
    np.testing.assert_allclose(out, np.asarray(ADD.expected(*ADD.make_inputs(TINY, seed))))
  assert len(runs.impact_outputs) == 2
  for i, out in enumerate(runs.impact_outputs):
    np.testing.assert_allclose(out, np.asarray(ADD.expected(*checks.impact_inputs(ADD, TINY, 7, i))))
  assert (runs.mutated, runs.unwritten, runs.edge_output, runs.edge_error) == ((), None, None, None)


def test_run_candidate_counts_the_sentinel_only_on_a_gpu():
  relu = _relu_jit()

  def three_unwritten(x):
    return relu(x).at[0, :3].set(jnp.float32(checks.SENTINEL))
  assert _runs(three_unwritten, on_gpu=True).unwritten == 3
  assert _runs(three_unwritten, on_gpu=False).unwritten is None
  assert _runs(on_gpu=True).unwritten == 0
  low = RELU.at_precision("bfloat16")  # the sentinel in the output's dtype, not float32's

  def three_unwritten_bf16(x):
    return jnp.maximum(x, 0).at[0, :3].set(jnp.asarray(checks.SENTINEL, jnp.bfloat16))
  assert _runs(jax.jit(three_unwritten_bf16), on_gpu=True, spec=low).unwritten == 3


def test_run_candidate_poisons_before_every_seed_and_the_sentinel_run(monkeypatch):
  calls = []
  monkeypatch.setattr(checks, "poison_allocator", lambda *a: calls.append(a))
  _runs(seeds=(1, 2, 3), on_gpu=True)
  judged = 3 + len(RELU.families)  # every seed, then every input family
  assert len(calls) == judged + 1 and calls[judged] == ((8, 16), "float32", checks.SENTINEL)
  assert all(c[:2] == ((8, 16), "float32") and math.isnan(c[2]) for c in calls[:judged])  # POISON
  calls.clear()
  _runs(seeds=(1, 2, 3), on_gpu=False)
  assert calls == []


def test_run_candidate_reports_a_mutation_on_any_seed():
  relu = _relu_jit()
  calls = []

  def donates_once(x):
    calls.append(1)
    out = relu(x)
    if len(calls) == 1:
      jax.block_until_ready(out)
      x.delete()
    return out
  assert _runs(donates_once, seeds=(1, 2, 3)).mutated == ("input x was donated (deleted) by the kernel",)


def test_run_candidate_sentinel_count_uses_the_first_seeds_inputs():
  relu = _relu_jit()
  first = np.asarray(RELU.make_inputs(TINY, 1)[0])

  def unwritten_on_the_first_seed(x):
    hit = jnp.all(x == first)
    return jnp.where(hit, jnp.float32(checks.SENTINEL), relu(x))
  assert _runs(unwritten_on_the_first_seed, seeds=(1, 2), on_gpu=True).unwritten == 8 * 16


def test_run_candidate_runs_the_edge_shape_on_the_first_seed():
  relu = _relu_jit()
  runs = _runs(seeds=(4, 5), edge=(relu, TINY_EDGE))
  np.testing.assert_array_equal(runs.edge_output,
                                np.asarray(relu(*RELU.make_inputs(TINY_EDGE, 4))))
  assert runs.edge_error is None


@pytest.mark.parametrize("error, text", [
    (RuntimeError("first line\nsecond line"), "RuntimeError: first line"),
    (ValueError(), "ValueError: "),
    (KeyError("k" * 600), ("KeyError: '" + "k" * 600)[:500]),
])
def test_run_candidate_keeps_the_first_line_of_an_edge_failure(error, text):
  def failing(*_):
    raise error
  runs = _runs(edge=(failing, TINY_EDGE))
  assert runs.edge_output is None and runs.edge_error == text and len(text) <= 500


def test_run_candidate_reports_each_mutation_once():
  def mutating(x):
    x.delete()
    return jnp.zeros((8, 16), jnp.float32)
  runs = _runs(mutating, seeds=(1, 2, 3))
  assert runs.mutated == ("input x was donated (deleted) by the kernel",)


# ---------------------------------------------------------------------------------------------
# checks: the verdict


def _cmp(passed, value=None):
  return Comparison(passed=passed, max_abs_error=value, max_rel_error=None, rel_l2_error=value)


def test_verdict_is_correct_only_when_every_seed_passes_and_reports_the_worst():
  def verdict(*comparisons):
    return checks.Verdict(comparisons=comparisons, filters=(), rejections=(), general_shapes=None,
                          edge_error=None)
  assert verdict(_cmp(True), _cmp(True)).correct
  assert not verdict(_cmp(True), _cmp(False)).correct
  mixed = verdict(_cmp(True, 1.0), _cmp(True, None), _cmp(False, 3.0), _cmp(True, 2.0))
  assert mixed.worst("max_abs_error") == 3.0
  assert mixed.worst("max_rel_error") is None


def _fake_runs(outputs, seeds=None, **kw):
  fields = dict(seeds=seeds or tuple(range(10, 10 + len(outputs))), outputs=tuple(outputs),
                family_outputs=(), impact_outputs=(), mutated=(), unwritten=None, edge_output=None, edge_error=None)
  fields.update(kw)
  return checks.CandidateRuns(**fields)


def test_replays_compare_failing_outputs_with_every_earlier_output():
  a, b = f32(1.0, 2.0), f32(3.0, 4.0)
  runs = _fake_runs([a, a, b, a])
  reasons = checks._replays(runs, [_cmp(True), _cmp(False), _cmp(False), _cmp(False)])  # pylint: disable=protected-access
  message = "output cached across calls: seed {}'s output was returned for different inputs"
  assert reasons == [message.format(10), message.format(10), message.format(11)]
  assert checks._replays(runs, [_cmp(True)] * 4) == []  # pylint: disable=protected-access
  nan = f32(np.nan, 1.0)
  assert len(checks._replays(_fake_runs([nan, nan]), [_cmp(False), _cmp(False)])) == 1  # pylint: disable=protected-access


def _honest_runs(**kw):
  return dataclasses.replace(_runs(seeds=(1, 2)), **kw)


def test_judge_outputs_of_an_honest_run():
  runs = _honest_runs()
  verdict = checks.judge_outputs(runs, RELU, TINY, None)
  assert len(verdict.comparisons) == 2 and verdict.correct
  assert [f.name for f in verdict.filters] == ["output_range", "output_std", "axes_variation",
                                               "not_zeros", "not_input_copy", "input_impact"]
  assert all(f.passed for f in verdict.filters)
  thr = filters.threshold(np.asarray(RELU.expected(*RELU.make_inputs(TINY, 1))))
  assert {f.threshold for f in verdict.filters} == {thr}
  assert verdict.rejections == () and verdict.general_shapes is None and verdict.edge_error is None


def test_judge_outputs_needs_one_output_per_seed():
  runs = _honest_runs()
  with pytest.raises(ValueError):
    checks.judge_outputs(dataclasses.replace(runs, seeds=(1, 2, 3)), RELU, TINY, None)


def test_judge_outputs_compares_each_seed_with_its_own_reference():
  runs = _honest_runs()
  swapped = dataclasses.replace(runs, outputs=runs.outputs[::-1])
  verdict = checks.judge_outputs(swapped, RELU, TINY, None)
  assert [c.passed for c in verdict.comparisons] == [False, False]
  assert verdict.comparisons[0] == compare(runs.outputs[1], runs.outputs[0], RELU.tolerance)


def test_judge_outputs_orders_rejections_and_drops_repeats():
  runs = _honest_runs()
  zeros = np.zeros((8, 16), np.float32)
  bad = dataclasses.replace(runs, outputs=(zeros, zeros), impact_outputs=(zeros,),
                            mutated=("input x was mutated in place",), unwritten=5)
  verdict = checks.judge_outputs(bad, RELU, TINY, None)
  assert verdict.rejections == (
      "input x was mutated in place",
      "output cached across calls: seed 1's output was returned for different inputs",
      "elements left unwritten: 5 of 128 output elements kept the poison value",
      "output_range: max - min = 0", "output_std: std = 0", "axes_variation: constant along axes [0, 1]",
      "not_zeros: max |out| = 0", "input_impact: output ignores input(s) ['x']")
  assert not verdict.correct


def test_judge_outputs_checks_input_copies_against_the_first_seeds_inputs():
  x = np.asarray(RELU.make_inputs(TINY, 1)[0])
  runs = _honest_runs()
  copy = dataclasses.replace(runs, outputs=(x, runs.outputs[1]))
  verdict = checks.judge_outputs(copy, RELU, TINY, None)
  assert "not_input_copy: output equals input(s) ['x']" in verdict.rejections


def test_judge_outputs_measures_impact_against_the_first_output():
  runs = _honest_runs()
  same = dataclasses.replace(runs, impact_outputs=(runs.outputs[0],))
  verdict = checks.judge_outputs(same, RELU, TINY, None)
  assert "input_impact: output ignores input(s) ['x']" in verdict.rejections


def test_judge_outputs_edge_shape():
  runs = _honest_runs()
  edge_ok = np.asarray(RELU.expected(*RELU.make_inputs(TINY_EDGE, 1)))
  good = checks.judge_outputs(dataclasses.replace(runs, edge_output=edge_ok), RELU, TINY, TINY_EDGE)
  assert good.general_shapes is True and good.edge_error is None

  wrong = checks.judge_outputs(dataclasses.replace(runs, edge_output=edge_ok + 1), RELU, TINY,
                               TINY_EDGE)
  assert wrong.general_shapes is False
  assert wrong.edge_error.startswith("edge shape {'N': 3, 'M': 5}: not allclose(")
  assert wrong.rejections == () and not wrong.correct  # a wrong result there is incorrect

  failed = checks.judge_outputs(dataclasses.replace(runs, edge_error="RuntimeError: boom"),
                                RELU, TINY, TINY_EDGE)
  assert failed.general_shapes is False
  assert failed.edge_error == "edge shape {'N': 3, 'M': 5}: RuntimeError: boom"

  unchecked = checks.judge_outputs(dataclasses.replace(runs, edge_error="RuntimeError: boom"),
                                   RELU, TINY, None)
  assert unchecked.general_shapes is None and unchecked.edge_error == "RuntimeError: boom"


# ---------------------------------------------------------------------------------------------
# judge: artifacts, the steps of a verdict, timing and the record

from pallasbench_dataset.evaluation import protocol, sandbox  # noqa: E402
from pallasbench_dataset.evaluation.pipeline import driver as pipeline_driver  # noqa: E402
from pallasbench_dataset.evaluation.judge import core as judge  # noqa: E402
from pallasbench_dataset.evaluation.judge import (  # noqa: E402
    analysis_process, budgets, fingerprint, memcheck, mlir_context, module_analysis, timing)
from pallasbench_dataset.evaluation.judge.ceilings import NOT_MEASURED, Ceilings  # noqa: E402
from pallasbench_dataset.evaluation.judge.compile_profile import CompiledArtifact  # noqa: E402
from pallasbench_dataset.schema import RunIdentity  # noqa: E402
from pallasbench_dataset.schema import (  # noqa: E402
    CompileProfile, Environment, ErrorType, PallasCallInfo, Roofline, RunInfo, StageTimes, Status)
from pallasbench_dataset.tasks import Size  # noqa: E402

# Built by hand: nothing at import time may start a JAX backend (mutmut forks workers from a
# process that has collected this module, and a forked XLA client deadlocks).
CPU_ENV = Environment(platform="cpu", device_kind="cpu", hardware="cpu", compute_capability=None,
                      driver=None, cuda=None, jax=jax.__version__, jaxlib=jax.__version__,
                      python="3.12", git_commit=None)
GPU_ENV = dataclasses.replace(CPU_ENV, platform="gpu", device_kind="NVIDIA H200", hardware="h200",
                              compute_capability="9.0")
SMALL = RELU.dims(Size.SMALL)
GPU_CEILINGS = Ceilings(copy_gbps=3900.0, read_gbps=4000.0, matmul_tflops=400.0, method="cupti",
                        matmul_bf16_tflops=800.0)
RUN = RunIdentity(command="regen --device gpu", run_id="run-a", gpu_index=2)


def _ctx(env=CPU_ENV, ceilings=NOT_MEASURED, dump_dir=None):
  return judge.Context(environment=env, ceilings=ceilings, l2_bytes=1 << 20, dump_dir=dump_dir,
                       timing_method=timing.TimingMethod.WALLCLOCK)


def _relu_fn(x):
  return jnp.maximum(x, 0.0)


def _blob(fn=_relu_fn, platforms=("cpu",), shape=(8, 16), dtype=jnp.float32, **replaced):
  """A serialized jax.export artifact of a plain JAX function (no Pallas needed here)."""
  exported = jax.export.export(jax.jit(fn), platforms=platforms)(jax.ShapeDtypeStruct(shape, dtype))
  return dataclasses.replace(exported, **replaced).serialize() if replaced else exported.serialize()


def _failure(fn, *args):
  with pytest.raises(judge.Failure) as e:
    fn(*args)
  return e.value.status, e.value.error_type, str(e.value)


def _entry(size="small", artifacts=None, errors=None, stage=None, trace_s=0.25, lower_s=0.5):
  return protocol.SizeExport(size=size, artifacts=artifacts or {}, errors=errors or {}, stage=stage,
                             trace_s=trace_s, lower_s=lower_s)


def _report(*entries, **fields):
  values = dict(load_error=None, exports=entries, jaxpr=None, pallas_calls=(), input_writes=(),
                triton_ir=(), lowers_tpu=None, tpu_error=None)
  values.update(fields)
  return protocol.ExportReport(**values)


def _outcome(report=None, failure=None, message=None, output="", wall_s=0.5):
  return protocol.ExportOutcome(report=report, failure=failure, message=message, output=output,
                                layers=("net", "fs"), wall_s=wall_s)


def _item(outcome=None, size="small", **options):
  opts = dict(seeds=(1, 2), check_edge=False, timing_iterations=2, timing_rounds=1, warmup=0)
  opts.update(options)
  return judge.JudgeItem(task="relu", variant="candidate", size=size, kernel_sha256="0" * 64,
                         export=outcome or _outcome(_report()), options=judge.EvalOptions(**opts))


def test_context_platform():
  assert (_ctx().on_gpu, _ctx().run_platform) == (False, "cpu")
  assert (_ctx(GPU_ENV).on_gpu, _ctx(GPU_ENV).run_platform) == (True, "cuda")


def test_shape_text_is_pythons_tuple_text():
  assert [judge._shape_text(s) for s in ((3,), (2, 3), ())] == ["(3,)", "(2, 3)", "()"]  # pylint: disable=protected-access


def test_load_artifact_accepts_the_tasks_interface_on_any_exported_platform():
  exported = judge.load_artifact(_blob(platforms=("cpu", "cuda")), RELU, TINY, "cuda")
  assert [a.shape for a in exported.in_avals] == [(8, 16)]


def test_load_artifact_refuses_bytes_that_do_not_deserialize():
  """Garbage is refused by the header check, before jax reads it."""
  status, error_type, message = _failure(judge.load_artifact, b"\x00garbage", RELU, TINY, "cpu")
  assert (status, error_type) == (Status.REJECTED, None)
  assert message.startswith("the artifact is refused before it is read: the artifact's header "
                            "does not read (error: unpack_from requires a buffer"), message


def test_load_artifact_lists_every_interface_problem():
  blob = _blob(platforms=("cuda",), shape=(4, 4), nr_devices=2)
  assert _failure(judge.load_artifact, blob, RELU, TINY, "cpu") == (
      Status.REJECTED, None,
      "the artifact does not implement the task's interface: exported for ['cuda'], not cpu; "
      "inputs [((4, 4), dtype('float32'))] differ from the task's [((8, 16), dtype('float32'))]; "
      "2 devices")
  dtype = _failure(judge.load_artifact, _blob(dtype=jnp.int32), RELU, TINY, "cpu")[2]
  assert "inputs [((8, 16), dtype('int32'))] differ" in dtype


@pytest.mark.parametrize("field", ["ordered_effects", "unordered_effects"])
def test_load_artifact_refuses_side_effects(field):
  from jax._src.ffi import FfiEffect  # pylint: disable=import-outside-toplevel
  blob = _blob(**{field: (FfiEffect(),)})   # an effect type jax.export can deserialize
  assert _failure(judge.load_artifact, blob, RELU, TINY, "cpu") == (
      Status.REJECTED, None, "the artifact is refused before it is read: the artifact declares "
      "effects: an exported kernel has none")


def test_load_artifact_refuses_other_input_structures():
  struct = jax.ShapeDtypeStruct((8, 16), jnp.float32)
  nested = jax.export.export(jax.jit(lambda t: _relu_fn(t[0])), platforms=("cpu",))((struct,))
  assert _failure(judge.load_artifact, nested.serialize(), RELU, TINY, "cpu") == (
      Status.REJECTED, None,
      "the artifact does not implement the task's interface: an input structure "
      "PyTreeDef((((*,),), {})) other than the task's arrays")


def test_load_artifact_reports_a_wrong_output_as_an_output_error():
  assert _failure(judge.load_artifact, _blob(lambda x: x[:, :15]), RELU, TINY, "cpu") == (
      Status.ERROR, ErrorType.OUTPUT,
      "kernel returns [((8, 15), dtype('float32'))], expected one array ((8, 16), dtype('float32'))")
  two = _failure(judge.load_artifact, _blob(lambda x: (x, x)), RELU, TINY, "cpu")
  assert two[:2] == (Status.ERROR, ErrorType.OUTPUT) and two[2].startswith(
      "kernel returns [((8, 16), dtype('float32')), ((8, 16), dtype('float32'))], expected one")


def test_export_failures_keep_their_message_or_name():
  assert judge._export_failure(_outcome(_report())) is None  # pylint: disable=protected-access
  crash = judge._export_failure(_outcome(failure="crash"))  # pylint: disable=protected-access
  assert (crash.status, crash.error_type, str(crash)) == (Status.ERROR, ErrorType.CRASH, "crash")
  slow = judge._export_failure(_outcome(failure="timeout", message="ran 600 s"))  # pylint: disable=protected-access
  assert (slow.status, slow.error_type, str(slow)) == (Status.TIMEOUT, ErrorType.TIMEOUT, "ran 600 s")


def _blob_of(report, size="small", platform="cpu"):
  return judge._artifact_blob(report, size, platform)  # pylint: disable=protected-access


def test_no_device_export_says_why_triton_refused_the_kernel():
  """A search loop is told the Triton lowering's first line (bounded), not only that no device
  export exists (false-positive round 11)."""
  why = "LoweringError: block shape (64, 300) is not a power of 2" + "x" * 400
  reason = judge._no_device_export(_entry(errors={"cuda": f"\n{why}\nTraceback..."}))  # pylint: disable=protected-access
  assert reason == f"{judge.NO_DEVICE_EXPORT} (Triton: {why[:300]})"
  assert judge._no_device_export(_entry(errors={"tpu": "no"})) == judge.NO_DEVICE_EXPORT  # pylint: disable=protected-access


def test_artifact_blob_returns_the_platforms_bytes():
  assert _blob_of(_report(_entry(artifacts={"cpu": b"abc", "cuda": b"def"}))) == b"abc"
  assert _failure(_blob_of, _report(_entry()), "medium") == (
      Status.REJECTED, None, "the exporter returned no export for size medium")


@pytest.mark.parametrize("errors, stage, expected", [
    ({"cuda": "LoweringError: cuda", "cpu": "TypeError: bad\nmore"}, None,
     (Status.ERROR, ErrorType.LOWERING, "TypeError: bad\nmore")),
    ({"cpu": "TypeError: bad"}, "trace", (Status.ERROR, ErrorType.TRACE, "TypeError: bad")),
    ({"cpu": "TypeError: bad"}, "lowering", (Status.ERROR, ErrorType.LOWERING, "TypeError: bad")),
    ({"tpu": "MosaicError: no"}, "export", (Status.ERROR, ErrorType.LOWERING, "MosaicError: no")),
    ({}, None, (Status.ERROR, ErrorType.LOWERING, "no artifact")),
    ({"cpu": "", "tpu": ""}, None, (Status.ERROR, ErrorType.LOWERING, "")),
    # The exporter's text is the candidate's: its words never type the failure (round 18).
    ({"cpu": "XlaRuntimeError: RESOURCE_EXHAUSTED: 9 GiB"}, "trace",
     (Status.ERROR, ErrorType.TRACE, "XlaRuntimeError: RESOURCE_EXHAUSTED: 9 GiB")),
    ({"cpu": "ValueError: bad\nwhile lowering a callback"}, None,   # not on the first line
     (Status.ERROR, ErrorType.LOWERING, "ValueError: bad\nwhile lowering a callback")),
    ({"cpu": "TypeError: ValueError: the platform for the specified backend"}, None,
     (Status.ERROR, ErrorType.LOWERING, "TypeError: ValueError: the platform for the specified backend")),
])
def test_artifact_blob_failures_carry_the_exporters_error(errors, stage, expected):
  assert _failure(_blob_of, _report(_entry(artifacts={"cuda": b"x"}, errors=errors,
                                           stage=stage))) == expected


@pytest.mark.parametrize("message", [
    "ValueError: host_callback found\nsecond line",
    "PureCallbackError: not exportable\nsecond line",
    "NotImplementedError: the CALLBACK cannot be serialized",
    "ValueError: the platform for the specified backend cuda is not available\nsecond line",
])
def test_artifact_blob_rejects_host_callbacks(message):
  first = message.splitlines()[0]
  assert _failure(_blob_of, _report(_entry(errors={"cpu": message}))) == (
      Status.REJECTED, None, "host callbacks: the kernel calls back into Python on the host, "
      f"work no exported kernel can carry ({first})")
  cuda_failed_too = _report(_entry(errors={"cpu": message, "cuda": message}))
  assert _failure(_blob_of, cuda_failed_too)[0] is Status.REJECTED


def test_callbacks_of_the_interpreter_alone_are_not_judgeable_here_not_rejected():
  """A kernel whose cuda export succeeds carries no host callback of its own (jax.export
  serialises none): one in its cpu export is its interpreter's (Mosaic GPU's, round 11's
  pos_mosaic_interpret), so the CPU judge says it cannot judge it; the cuda side is never
  excused by a cpu export (a GPU judge reads the cuda export, which failed or holds none)."""
  message = "NotImplementedError: serialization of host_callbacks is not yet implemented\nmore"
  report = _report(_entry(artifacts={"cuda": b"x"}, errors={"cpu": message}))
  status, error_type, text = _failure(_blob_of, report)
  assert (status, error_type) == (Status.ERROR, ErrorType.LOWERING)
  assert text.startswith("not judgeable on this device: the kernel's cpu export runs on host "
                         "callbacks") and text.endswith("judge it on a GPU (NotImplementedError: "
                                                        "serialization of host_callbacks is not "
                                                        "yet implemented)")
  assert _blob_of(report, platform="cuda") == b"x"


@pytest.fixture
def analysis(monkeypatch):
  """module_analysis stubbed (in this process, not the analysis helper): the structure reasons
  and custom calls a test wants."""
  box = types.SimpleNamespace(reasons=[], disallowed=(), stateful=(), texts=[], calls=[],
                              backends=("triton",), found=[])

  def analyse(_, serialized):
    text = mlir_context.module_text(serialized)
    box.texts.append(text)
    box.found.append(types.SimpleNamespace(
        disallowed_custom_calls=box.disallowed, stateful_ops=box.stateful, prefilled_bytes=0,
        kernels=[types.SimpleNamespace(backend=b, fingerprint=None) for b in box.backends]))
    return box.found[-1], text

  def module_reasons(found, *, task_flops, output_elements, task_bytes):
    box.calls.append((found, task_flops, output_elements, task_bytes))
    return list(box.reasons)
  monkeypatch.setattr(analysis_process.ModuleAnalyser, "analyse", analyse)
  monkeypatch.setattr(module_analysis, "module_reasons", module_reasons)
  return box


@pytest.mark.parametrize("env, platforms, chosen", [
    (CPU_ENV, ("cpu", "cuda", "tpu"), "cuda"),
    (CPU_ENV, ("cpu", "tpu"), "tpu"),
    (GPU_ENV, ("cuda", "tpu"), "cuda"),
    (GPU_ENV, ("tpu",), None),
    (CPU_ENV, ("cpu",), None),
])
def test_structure_is_read_from_a_device_export(analysis, monkeypatch, env, platforms, chosen):
  loaded = []
  real = judge.load_artifact

  def load(blob, spec, dims, platform):
    loaded.append(platform)
    return real(blob, spec, dims, platform)
  monkeypatch.setattr(judge, "load_artifact", load)
  analysis.reasons = ["one kernel too many"]
  analysis.backends = ("triton", "mosaic_gpu", "triton")
  report = _report(_entry(artifacts={p: _blob(platforms=(p,)) for p in platforms}))
  state = judge._State(fields={})  # pylint: disable=protected-access
  reasons = judge._structure_reasons(report, _item(), RELU, TINY, _ctx(env), state)  # pylint: disable=protected-access
  if chosen is None:
    assert reasons == ["the kernel exports for no device platform (neither Triton nor TPU "
                       "lowering worked), so its structure cannot be checked"]
    assert loaded == [] and state.structure_text is None
    return
  assert loaded == [chosen] and reasons == ["one kernel too many"]
  assert state.structure_text == jax.export.deserialize(
      bytearray(report.size("small").artifacts[chosen])).mlir_module()
  assert analysis.texts == [state.structure_text]
  assert analysis.calls == [(analysis.calls[0][0], RELU.flops(TINY), 8 * 16, RELU.io_bytes(TINY))]
  assert [k.backend for k in analysis.calls[0][0].kernels] == list(analysis.backends)
  assert state.fields["backends"] == ("mosaic_gpu", "triton")  # each backend once, sorted


@pytest.mark.parametrize("variant, platforms, reject, copies, checked", [
    ("candidate", ("cuda",), False, ("kernels_gpu/relu/v1.py",), True),
    ("candidate", ("cuda",), True, ("kernels_gpu/relu/v1.py",), True),
    ("candidate", ("cuda",), True, (), True),
    ("candidate", ("tpu",), True, ("kernels_tpu/relu/v1.py",), True),
    ("baseline", ("cuda",), True, ("kernels_gpu/relu/v1.py",), False),
])
def test_a_candidates_kernels_are_checked_against_the_shipped_ones(
    analysis, monkeypatch, variant, platforms, reject, copies, checked):
  """A candidate's export that the structure is read from (cuda, or tpu on a CPU judge whose
  kernel does not lower to Triton) is compared with the shipped kernels of its task, size and
  precision exported for the same platform (through the judge's trusted analyser, which never
  reads a candidate's module); the copies found are recorded, and reject the kernel only where
  the options ask for it and there are some."""
  seen = []

  def shipped_copies(kernels, task, size, precision, analyser, *, platform):
    seen.append(([k.backend for k in kernels], task, size, precision, analyser, platform))
    return copies
  monkeypatch.setattr(fingerprint, "shipped_copies", shipped_copies)
  report = _report(_entry(artifacts={p: _blob(platforms=(p,)) for p in platforms}))
  item = dataclasses.replace(_item(reject_copies=reject), variant=variant, precision="bfloat16")
  ctx, state = _ctx(), judge._State(fields={})  # pylint: disable=protected-access
  reasons = judge._structure_reasons(report, item, RELU, TINY, ctx, state)  # pylint: disable=protected-access
  if not checked:
    assert (seen, reasons, "copy_of" in state.fields) == ([], [], False)
    return
  assert seen == [(["triton"], "relu", "small", "bfloat16", ctx.trusted_analyser, platforms[0])]
  assert state.fields["copy_of"] == copies
  assert reasons == ([fingerprint.copy_reason(copies)] if reject and copies else [])


def test_a_copy_check_that_cannot_run_is_the_judges_failure_not_a_verdict(analysis,
                                                                          monkeypatch):
  """Red team round 15: the shipped kernels' analysis failing (a neighbour starved the trusted
  helper) ends the item as the judge's failure, `harness_error`, which no cache keeps and after
  which the judge is replaced; never a verdict taken as if the candidate copied nothing."""
  def shipped_copies(*args, **kwargs):
    raise fingerprint.ShippedAnalysisError("the shipped kernel kernels_gpu/relu.py at small "
                                           "float32 None could not be analysed: SIGABRT")
  monkeypatch.setattr(fingerprint, "shipped_copies", shipped_copies)
  report = _report(_entry(artifacts={"cuda": _blob(platforms=("cuda",))}))
  with pytest.raises(judge.Failure, match="the copy check cannot run: .*SIGABRT") as failed:
    judge._structure_reasons(report, _item(reject_copies=False), RELU, TINY, _ctx(),  # pylint: disable=protected-access
                             judge._State(fields={}))  # pylint: disable=protected-access
  assert (failed.value.status, failed.value.error_type) == (Status.ERROR, ErrorType.HARNESS)


def test_analyze_turns_an_analysis_error_into_a_rejection(monkeypatch):
  def broken(_, serialized):
    raise module_analysis.ModuleAnalysisError(f"unknown op in {serialized}")
  exported = types.SimpleNamespace(mlir_module_serialized=b"mod")
  monkeypatch.setattr(analysis_process.ModuleAnalyser, "analyse", broken)
  assert _failure(judge._analyze, exported, _ctx()) == (  # pylint: disable=protected-access
      Status.REJECTED, None, "the exported module cannot be analysed: unknown op in b'mod'")
  monkeypatch.setattr(analysis_process.ModuleAnalyser, "analyse", lambda _, b: ("report of", b))
  assert judge._analyze(exported, _ctx()) == ("report of", b"mod")  # pylint: disable=protected-access


def _compile(blob, ctx, note):
  """The judge's steps for one artifact: admitted, then compiled."""
  return judge._compile(judge._admit(blob, RELU, TINY, ctx)[0], RELU, TINY, ctx, note)  # pylint: disable=protected-access


def test_admission_refuses_disallowed_custom_calls(analysis):
  analysis.disallowed = ("zeta_call", "alpha_call")
  assert _failure(judge._admit, _blob(), RELU, TINY, _ctx()) == (  # pylint: disable=protected-access
      Status.REJECTED, None, "the artifact calls ['alpha_call', 'zeta_call']: custom calls other "
      "than Pallas kernels are not allowed")


def test_admission_refuses_stateful_ops(analysis):
  analysis.stateful = ("stablehlo.rng", "stablehlo.infeed")
  assert _failure(judge._admit, _blob(), RELU, TINY, _ctx()) == (  # pylint: disable=protected-access
      Status.REJECTED, None, "stateful ops ['stablehlo.infeed', 'stablehlo.rng'] in the artifact: "
      "an exported kernel must be a pure function of its inputs")


def test_admission_loads_for_the_run_platform(analysis):  # pylint: disable=unused-argument
  status, _, message = _failure(judge._admit, _blob(), RELU, TINY, _ctx(GPU_ENV))  # pylint: disable=protected-access
  assert status is Status.REJECTED and "not cuda" in message


def test_compile_compiles_the_artifact_for_the_task(analysis, monkeypatch, tmp_path):
  seen = []
  real = judge.compile_exported

  def spy(exported, structs, dump_dir, *, ptx_past_cache):
    seen.append((exported.in_avals, structs, dump_dir, ptx_past_cache))
    return real(exported, structs, dump_dir, ptx_past_cache=ptx_past_cache)
  monkeypatch.setattr(judge, "compile_exported", spy)
  compiled = _compile(_blob(), _ctx(dump_dir=tmp_path), None)
  x = RELU.make_inputs(TINY, 3)[0]
  np.testing.assert_array_equal(compiled.executable(x), np.maximum(np.asarray(x), 0))
  assert compiled.compile_s > 0 and len(analysis.texts) == 1
  assert seen[0][1] == (jax.ShapeDtypeStruct((8, 16), jnp.float32),) and seen[0][2] == tmp_path
  assert seen[0][3] is True  # no compile stage brought its PTX: a cached compile is redone for it


@pytest.mark.parametrize("error, error_type", [("ptxas fatal: bad", ErrorType.COMPILE),
                                               ("RESOURCE_EXHAUSTED: 9 GiB", ErrorType.OUT_OF_MEMORY)])
def test_compile_failures_are_compile_errors(analysis, monkeypatch, error, error_type):  # pylint: disable=unused-argument
  def refuse(*_, **__):
    raise RuntimeError(error)
  monkeypatch.setattr(judge, "compile_exported", refuse)
  assert _failure(_compile, _blob(), _ctx(), None) == (
      Status.ERROR, error_type, f"RuntimeError: {error}")


def test_compile_stage_failures_are_not_tried_again(analysis, monkeypatch):  # pylint: disable=unused-argument
  monkeypatch.setattr(judge, "compile_exported", lambda *_, **__: pytest.fail("compiled again"))
  failed = judge.Precompiled(outcome="failed", message="ptxas fatal: too big\nmore")
  assert _failure(_compile, _blob(), _ctx(), failed) == (
      Status.ERROR, ErrorType.COMPILE, "ptxas fatal: too big\nmore")
  ran_out = judge.Precompiled(outcome="timeout", message="not within the 60 s budget")
  assert _failure(_compile, _blob(), _ctx(), ran_out) == (  # the candidate's, but a budget ended
      Status.REJECTED, ErrorType.TIMEOUT, "compile stage: not within the 60 s budget")  # it: never cached


def test_compile_stage_checks_still_come_first(analysis):
  analysis.stateful = ("stablehlo.rng",)
  note = judge.Precompiled(outcome="timeout", message="ran out")
  assert _failure(_compile, _blob(), _ctx(), note)[0] is Status.REJECTED


@pytest.mark.parametrize("outcome", ["compiled", "skipped"])
def test_compile_keeps_the_compile_stage_figures(analysis, monkeypatch, outcome):  # pylint: disable=unused-argument
  past_cache = []

  def cached(*_, ptx_past_cache):
    past_cache.append(ptx_past_cache)
    return CompiledArtifact(executable="exe", compile_s=0.01, ptx=(), cache_hit=True)
  monkeypatch.setattr(judge, "compile_exported", cached)
  note = judge.Precompiled(outcome=outcome, compile_s=7.5, ptx=("ptx text",))
  compiled = _compile(_blob(), _ctx(), note)
  assert compiled.executable == "exe" and compiled.cache_hit
  assert past_cache == [False]  # the compile stage brought the PTX: no second compile for it
  assert (compiled.compile_s, compiled.ptx) == (
      (7.5, ("ptx text",)) if outcome == "compiled" else (0.01, ()))


def test_precompile_compiles_skips_and_fails(analysis):  # pylint: disable=unused-argument
  item = judge.CompileItem(task="relu", size="small", blob=_blob(shape=(8, 16)))
  skipped = judge.precompile(item, _ctx())  # (8, 16) is not relu's small shape
  assert skipped.outcome == "skipped" and "interface" in skipped.message
  good = judge.CompileItem(task="relu", size="small", blob=_blob(shape=RELU.input_shapes(SMALL)[0]))
  compiled = judge.precompile(good, _ctx())
  assert compiled.outcome == "compiled" and compiled.compile_s > 0 and compiled.wall_s >= compiled.compile_s


@pytest.mark.parametrize("refusal", ["disallowed", "stateful", "unanalysable"])
def test_the_compile_stage_compiles_nothing_the_analysis_refuses(analysis, monkeypatch, refusal):
  """The compile stage runs on the hostile bytes first: it admits them as the judge does, so a
  module the analysis refuses never reaches XLA's compiler in any process."""
  compiled, stages = [], []
  monkeypatch.setattr(judge, "compile_exported", lambda *a: compiled.append(a))
  if refusal == "unanalysable":
    def crash(*_):
      raise module_analysis.ModuleAnalysisError("the analysis helper died with SIGSEGV")
    monkeypatch.setattr(analysis_process.ModuleAnalyser, "analyse", crash)
  else:
    setattr(analysis, refusal, ("stablehlo.rng",))
  ctx = dataclasses.replace(_ctx(), stage=stages.append)
  item = judge.CompileItem(task="relu", size="small", blob=_blob(shape=RELU.input_shapes(SMALL)[0]))
  note = judge.precompile(item, ctx)
  assert note.outcome == "skipped" and compiled == [] and stages == ["module analysis"]
  assert note.message.startswith({"disallowed": "the artifact calls ['stablehlo.rng']",
                                  "stateful": "stateful ops ['stablehlo.rng']",
                                  "unanalysable": "the exported module cannot be analysed"}[refusal])


def test_precompile_reports_the_compilers_message(analysis, monkeypatch):  # pylint: disable=unused-argument
  def refuse(*_):
    raise RuntimeError("Shared memory size limit exceeded")
  monkeypatch.setattr(judge, "compile_exported", refuse)
  item = judge.CompileItem(task="relu", size="small", blob=_blob(shape=RELU.input_shapes(SMALL)[0]))
  assert (judge.precompile(item, _ctx()).outcome, judge.precompile(item, _ctx()).message) == (
      "failed", "Shared memory size limit exceeded")


def _timed_compile(delay_s, result=None):
  """A compile_exported that takes `delay_s`, records its dump folder, then returns `result`
  or raises the compiler's refusal."""
  seen = []

  def compile_(exported, structs, dump_dir):  # pylint: disable=unused-argument
    seen.append(dump_dir)
    time.sleep(delay_s)
    if result is None:
      raise RuntimeError("ptxas refused it")
    return result
  return compile_, seen


@pytest.mark.parametrize("outcome", ["compiled", "failed", "skipped"])
def test_precompile_times_itself_and_hands_on_the_ptx_and_the_dump_folder(analysis, monkeypatch,
                                                                          outcome):  # pylint: disable=unused-argument
  """Its wall time is its own elapsed time, whatever the outcome; a compile gets the judge's
  dump folder, says it is compiling, and keeps the compiler's PTX."""
  artifact = CompiledArtifact(executable="exe", compile_s=0.005, ptx=("ptx text",), cache_hit=False)
  compile_, seen = _timed_compile(0.02, artifact if outcome == "compiled" else None)
  monkeypatch.setattr(judge, "compile_exported", compile_)
  stages = []
  ctx = dataclasses.replace(_ctx(dump_dir=pathlib.Path("dump")), stage=stages.append)
  shape = (8, 16) if outcome == "skipped" else RELU.input_shapes(SMALL)[0]
  start = time.perf_counter()
  note = judge.precompile(judge.CompileItem(task="relu", size="small", blob=_blob(shape=shape)),
                          ctx)
  elapsed = time.perf_counter() - start
  assert note.outcome == outcome and 0 < note.wall_s <= elapsed
  if outcome == "skipped":
    assert seen == [] and budgets.COMPILE not in stages
    return
  assert seen == [pathlib.Path("dump")] and stages == ["module analysis", budgets.COMPILE]
  assert note.wall_s >= 0.02
  assert (note.compile_s, note.ptx) == ((0.005, ("ptx text",)) if outcome == "compiled" else
                                        (None, ()))

def test_eager_fields_time_the_reference_unjitted(monkeypatch):
  called = []

  def fake_time(fns, sets, **kw):
    called.append((fns, sets, kw["iterations"]))
    return [timing.Timed(samples=timing.Samples(method=timing.TimingMethod.WALLCLOCK,
                                                samples_ms=(2.0, 4.0, 6.0), kernel_names=()),
                         kept={})]
  monkeypatch.setattr(timing, "time_interleaved", fake_time)
  opts = judge.EvalOptions(timing_iterations=3)
  fields = judge._eager_fields(RELU, ["sets"], opts, _ctx(), kernel_ms=2.0)  # pylint: disable=protected-access
  assert called == [([RELU.reference], [["sets"]], 3)]
  assert fields == dict(eager_baseline_ms=4.0, eager_baseline_iqr_ms=0.0,
                        eager_baseline_samples_ms=(2.0, 4.0, 6.0), speedup_eager=2.0)


def test_an_eager_failure_leaves_the_columns_empty_not_the_verdict(monkeypatch):
  def broken(*_, **__):
    raise RuntimeError("CUPTI saw 3 kernel launches for 2 calls")
  logged = []
  monkeypatch.setattr(timing, "time_interleaved", broken)
  monkeypatch.setattr(judge.logger, "exception", lambda *args: logged.append(args[0] % args[1:]))
  assert judge._eager_fields(RELU, [()], judge.EvalOptions(), _ctx(), 1.0) == {}  # pylint: disable=protected-access
  assert logged == ["eager baseline of relu not timed"]


def test_stage_times_add_up_to_the_evaluation_wall_time():
  notes = {"small": judge.Precompiled(outcome="compiled", wall_s=2.0),
           "edge": judge.Precompiled(outcome="failed", wall_s=1.0)}
  item = dataclasses.replace(_item(_outcome(_report(), wall_s=0.5)), precompiled=notes)
  fields = {**judge._base_fields(item, RELU, SMALL, (1,), CPU_ENV), "status": Status.PASS}  # pylint: disable=protected-access
  state = judge._State(fields=fields, cache_hit=True,  # pylint: disable=protected-access
                       seconds={"checks_s": 1.5, "timing_s": 1.0, "eager_s": 0.5})
  record = judge._finish(item, state, CPU_ENV, None, 4.0)  # pylint: disable=protected-access
  assert record.stages == StageTimes(export_s=0.5, compile_s=3.0, judge_s=4.0, compile_cache_hit=True,
                                     checks_s=1.5, timing_s=1.0, eager_s=0.5)
  assert record.eval_wall_s == 7.5
  bare = judge._finish(_item(_outcome(_report(), wall_s=0.5)), state, CPU_ENV, None, 4.0)  # pylint: disable=protected-access
  assert bare.stages.compile_s is None and bare.eval_wall_s == 4.5


def _edge(report, item):
  """The judge's steps for the edge artifact: admitted, then compiled."""
  ctx = _ctx()
  return judge._edge(judge._admitted_edge(report, item, RELU, ctx), item, RELU, ctx)  # pylint: disable=protected-access


def test_edge_dims_follow_the_option_and_the_size():
  assert judge._edge_dims(_item(check_edge=True), RELU) == RELU.dims(Size.EDGE)  # pylint: disable=protected-access
  assert judge._edge_dims(_item(check_edge=False), RELU) is None  # pylint: disable=protected-access
  assert judge._edge_dims(_item(size="edge", check_edge=True), RELU) is None  # pylint: disable=protected-access


def test_edge_compiles_the_edge_artifact(analysis):  # pylint: disable=unused-argument
  edge_dims = RELU.dims(Size.EDGE)
  shape = RELU.output(edge_dims)
  report = _report(_entry(), _entry("edge", artifacts=_artifacts(size=Size.EDGE)))
  fn, dims = _edge(report, _item(check_edge=True))
  assert dims == edge_dims
  x = RELU.make_inputs(edge_dims, 1)[0]
  np.testing.assert_array_equal(fn(x), np.maximum(np.asarray(x), 0))
  assert _edge(report, _item(check_edge=False)) is None


@pytest.mark.parametrize("env", [CPU_ENV, GPU_ENV])
def test_the_edge_artifact_is_held_to_the_structure_rules_at_its_own_sizes(analysis, monkeypatch,
                                                                         env):
  """The edge shape's structure is read as the evaluated size's is (its cuda export, on a CPU
  judge beside the interpret-mode one it runs; on a GPU judge the one it runs) and judged at
  the edge's own task sizes: what fails the rules is never run, general_shapes False with the
  reason, the evaluated size's verdict untouched (a kernel may fall back to XLA where its
  blocks do not fit, but that is no general shape). No device export: no structure to read."""
  edge = RELU.dims(Size.EDGE)
  outside = "the kernel's work done outside it"

  def module_reasons(found, *, task_flops, output_elements, task_bytes):
    analysis.calls.append((found, task_flops, output_elements, task_bytes))
    return [outside] if output_elements == math.prod(RELU.output(edge)) else []
  monkeypatch.setattr(module_analysis, "module_reasons", module_reasons)
  ctx = _ctx(env)
  artifacts = _artifacts(size=Size.EDGE)
  report = _report(_entry(artifacts=_artifacts()), _entry("edge", artifacts=artifacts))
  run = judge._admitted_edge(report, _item(check_edge=True), RELU, ctx)  # pylint: disable=protected-access
  assert run == (f"the edge shape's export fails the structure rules: {outside}", edge)
  assert len(analysis.texts) == (2 if env is CPU_ENV else 1)  # the run artifact, then cuda's
  assert analysis.calls == [(analysis.found[-1], RELU.flops(edge), math.prod(RELU.output(edge)),
                             RELU.io_bytes(edge))]  # the rules read cuda's analysis
  only_run = _report(_entry(), _entry("edge", artifacts={ctx.run_platform: artifacts["cpu"]}))
  if env is CPU_ENV:
    assert judge._admitted_edge(only_run, _item(check_edge=True), RELU, ctx) == (  # pylint: disable=protected-access
        f"edge shape: {judge.NO_DEVICE_EXPORT}", edge)
  analysis.calls.clear()
  monkeypatch.setattr(module_analysis, "module_reasons", lambda *_, **__: [])
  record, _ = judge.evaluate_artifact(_item(_outcome(report), check_edge=True), _ctx())
  assert (record.status, record.general_shapes, record.edge_error) == (Status.PASS, True, None)


def test_edge_artifact_the_analysis_refuses_rejects_the_kernel(monkeypatch):
  """An edge shape the kernel cannot export is general_shapes=False; an edge artifact whose
  module the analysis refuses (hostile bytes) rejects the kernel."""
  def refuse(_, serialized):
    raise module_analysis.ModuleAnalysisError("nested deeper than 256 brackets")
  monkeypatch.setattr(analysis_process.ModuleAnalyser, "analyse", refuse)
  report = _report(_entry(), _entry("edge", artifacts=_artifacts(size=Size.EDGE)))
  assert _failure(_edge, report, _item(check_edge=True)) == (
      Status.REJECTED, None, "the exported module cannot be analysed: nested deeper than 256 brackets")


@pytest.mark.parametrize("entries, message", [
    ((), "the exporter returned no export for size edge"),
    ((_entry("edge", errors={"cpu": "LoweringError: too odd\ndetail"}),), "LoweringError: too odd"),
    ((_entry("edge", errors={"cpu": ""}),), "no artifact"),
])
def test_edge_that_cannot_export_fails_when_run(entries, message):
  fn, dims = _edge(_report(_entry(), *entries), _item(check_edge=True))
  assert dims == RELU.dims(Size.EDGE)
  with pytest.raises(RuntimeError) as e:
    fn(np.zeros(3))
  assert str(e.value) == message


def test_the_judge_draws_31_bit_seeds(monkeypatch, analysis):  # pylint: disable=unused-argument
  bounds = []
  real = judge.secrets.randbelow

  def randbelow(n):
    bounds.append(n)
    return real(n)
  monkeypatch.setattr(judge.secrets, "randbelow", randbelow)
  sets = judge.timing_sets(ADD, TINY, l2_bytes=1024)
  for call in range(4):
    sets.args(call)
    sets.after(call)
  assert len(bounds) == 5 and set(bounds) == {2 ** 31}   # one for the (absent) shared inputs,
  # then a seed a call (its inputs are that seed's streams, as in make_inputs)
  bounds.clear()
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts())), seeds=(), num_seeds=3,
                        timing_iterations=1)
  # the seeds, and the secret the timing's draws come from (63 bits: never a seed)
  assert set(bounds) == {2 ** 31, 2 ** 63} and bounds.count(2 ** 63) == 1
  assert len(record.seeds) == 3


def _same_arrays(a, b) -> bool:
  return len(a) == len(b) and all(np.array_equal(np.asarray(x), np.asarray(y))
                                  for x, y in zip(a, b))


class _Flush:
  """An L2 flush that records when it ran: after which input draw, before which call."""

  def __init__(self, events):
    self.events = events

  def __call__(self):
    self.events.append("flush")


def test_each_call_s_inputs_are_drawn_just_before_it_and_freed_after():
  """Warm-up and timed calls through the real rounds: every call is given inputs no other call
  got (a memo a kernel keeps across calls never hits), drawn after the call before it ended and
  followed by the L2 flush; while a call runs, no other call's input buffer is alive (so no
  work can be done ahead for a later call); each call's inputs are what its seeds draw again.
  Fixed sets in a Cycle (as before this design) give the memo 10 hits of 12 calls."""
  events, given, alive = [], [], []

  def memo_hits(feed):
    seen, hits = set(), []

    def memo(x):
      events.append("call")
      alive.append(sum(not old.is_deleted() for old in given))
      key = np.asarray(x).tobytes()
      hits.append(key in seen)
      seen.add(key)
      given.append(x)
      return x * 2.0
    (timed,) = timing.time_interleaved([memo], [feed], iterations=10, rounds=2, warmup=2,
                                       method=timing.TimingMethod.WALLCLOCK,
                                       keep=[frozenset(range(10))])
    return sum(hits), timed
  sets = judge.timing_sets(RELU, TINY, l2_bytes=256, warmup=2, flush=_Flush(events))
  hits, timed = memo_hits(sets)
  assert hits == 0 and len(sets) == 12 and events == ["flush", "call"] * 12
  assert alive == [0] * 12 and all(x.is_deleted() for x in given)
  for call, out in timed.kept.items():
    np.testing.assert_array_equal(out, 2.0 * np.asarray(sets.drawn_again(call)[0]))
  assert sets.mutations() == []
  fixed = [RELU.make_inputs(TINY, seed) for seed in (1, 2)]
  given.clear()
  assert memo_hits(fixed)[0] == 10


def test_a_call_s_inputs_are_ready_before_the_l2_is_flushed(monkeypatch):
  """The draw is waited for before the flush: a draw still running when the flush starts would
  leave its last writes in the L2 for the timed call to read."""
  waited = []
  real = jax.block_until_ready

  def wait(x):
    waited.append(x)
    return real(x)
  monkeypatch.setattr(judge.jax, "block_until_ready", wait)
  at_flush = []
  sets = judge.timing_sets(ADD, TINY, l2_bytes=1 << 20, flush=lambda: at_flush.append(list(waited)))
  given = sets.args(0)
  assert len(at_flush) == 1 and any(w is given for w in at_flush[0])


def test_a_gather_s_table_is_drawn_once_for_every_call_and_checked_once():
  """A gather's table larger than the L2 is one buffer that every call shares (its ids are
  what each call draws): drawn again from its seed, an honest gather's timed outputs pass; a
  table rewritten is named once. A table the L2 holds is drawn for each call like any input."""
  lookup = get_task("embedding_lookup")
  dims = types.MappingProxyType({"V": 64, "D": 8, "S": 4})   # table 2048 bytes, ids 16
  sets = judge.timing_sets(lookup, dims, l2_bytes=1024)
  reference = jax.jit(lookup.reference)
  kept, tables, ids = {}, [], []
  for call in range(6):
    table, row = sets.args(call)
    tables.append(table)
    ids.append(np.asarray(row).tobytes())
    kept[call] = reference(table, row)
    sets.after(call)
  assert all(t is tables[0] for t in tables) and not tables[0].is_deleted()
  assert len(set(ids)) == 6
  assert judge._timed_output_reasons(kept, sets, lookup) == []  # pylint: disable=protected-access
  sets._shared_inputs[0] = jnp.zeros_like(tables[0])  # pylint: disable=protected-access
  assert sets.mutations() == [
      "the input set of every call (shared inputs) was changed by the timed calls (input table "
      "was mutated in place): a kernel's inputs are read-only"]
  small = judge.timing_sets(lookup, dims, l2_bytes=4096)
  first = small.args(0)[0]
  small.after(0)
  assert first.is_deleted() and small.args(1)[0] is not first


def _fed(sets, calls):
  """The calls `calls` of a timing on `sets`, as time_interleaved makes them: each takes its
  inputs, and when it ends they are checked and freed. -> each call's inputs, on the host."""
  given = {}
  for call in calls:
    given[call] = tuple(np.asarray(x) for x in sets.args(call))
    sets.after(call)
  return given


def test_timed_outputs_are_compared_with_their_own_calls_reference():
  sets = judge.timing_sets(RELU, TINY, l2_bytes=1 << 20)
  relu = _relu_jit()
  given = _fed(sets, range(10))
  kept = {5: relu(*given[5]), 2: relu(*given[1]), 9: jnp.zeros((8, 16)), 0: relu(*given[0])}
  wrong_2 = compare(np.asarray(relu(*given[1])), np.asarray(relu(*given[2])),
                    RELU.tolerance).reason
  wrong_9 = compare(np.zeros((8, 16), np.float32), np.asarray(relu(*given[9])),
                    RELU.tolerance).reason
  assert judge._timed_output_reasons(kept, sets, RELU) == [  # pylint: disable=protected-access
      f"timed call 2 returned a wrong output ({wrong_2}): the kernel computes differently when timed",
      f"timed call 9 returned a wrong output ({wrong_9}): the kernel computes differently when timed"]
  assert kept == {}


def _rewrite(x: jax.Array) -> None:
  """What a GPU kernel writing its input ref does: the buffer changes (here through its
  address on the CPU)."""
  jax.block_until_ready(x)
  np.asarray(x)  # materialised
  data = (ctypes.c_float * x.size)(*([0.0] * x.size))
  ctypes.memmove(x.unsafe_buffer_pointer(), data, ctypes.sizeof(data))


def test_a_call_that_rewrites_its_inputs_is_named_and_checked_against_its_inputs_as_drawn():
  """A call that zeroes its inputs (zeros in, zeros out: a relu of the rewritten buffers is
  right) is caught twice: its set no longer held what its seed draws when it ended, and its
  output is compared with the reference of the inputs as drawn. Warm-up calls and the
  baseline's calls are named as such; an honest call passes."""
  relu = _relu_jit()
  sets = judge.timing_sets(RELU, TINY, l2_bytes=1 << 20, warmup=1)
  kept = {}
  for call in range(-1, 4):
    args = sets.args(call)
    if call in (-1, 2):
      _rewrite(args[0])
    kept[call] = relu(*args)
    sets.after(call)
  del kept[-1]
  reasons = judge._timed_output_reasons(kept, sets, RELU)  # pylint: disable=protected-access
  assert reasons[:2] == [
      "the input set of warm-up call 0 was changed by the timed calls (input x was mutated in "
      "place): a kernel's inputs are read-only",
      "the input set of timed call 2 was changed by the timed calls (input x was mutated in "
      "place): a kernel's inputs are read-only"], reasons
  assert len(reasons) == 3 and reasons[2].startswith("timed call 2 returned a wrong output")
  baseline = judge.timing_sets(ADD, TINY, l2_bytes=1 << 20, whose="the baseline's ")
  for x in baseline.args(3):
    _rewrite(x)
  baseline.after(3)
  assert baseline.mutations() == [
      "the input set of the baseline's timed call 3 was changed by the timed calls (input x was "
      "mutated in place; input y was mutated in place): a kernel's inputs are read-only"]


def test_the_first_timed_call_and_the_last_warm_up_call_are_named_apart():
  """Call 0 is the first timed call, call -1 the last of the warm-up calls (numbered from 0):
  a reason names the call a reader can find in the samples."""
  sets = judge.timing_sets(RELU, TINY, l2_bytes=1 << 20, warmup=2)
  for call in (-1, 0):
    _rewrite(sets.args(call)[0])
    sets.after(call)
  assert [r.split(" was changed")[0] for r in sets.mutations()] == [
      "the input set of warm-up call 1", "the input set of timed call 0"]


def test_the_l2_flush_rewrites_four_l2s_in_place():
  """The flush after each draw reads and writes a scratch buffer of L2_MULTIPLE x the L2 (what
  the input rotation read before this design), in place: the same buffer every time."""
  flush = timing.L2Flush(1024)
  scratch = flush._scratch  # pylint: disable=protected-access
  address = scratch.unsafe_buffer_pointer()
  assert scratch.nbytes == timing.L2_MULTIPLE * 1024
  flush()
  flush()
  after = flush._scratch  # pylint: disable=protected-access
  assert after.unsafe_buffer_pointer() == address and int(after[0]) == 2 and int(after[-1]) == 2


def test_speedup_is_baseline_over_kernel():
  assert judge.speedup(2.0, 6.0) == 3.0


def test_roofline_rates_and_fractions():
  assert (RELU.flops(TINY), RELU.min_bytes(TINY)) == (128, 1024)
  roof = judge._roofline(RELU, TINY, 0.5, Ceilings(copy_gbps=1e-3, read_gbps=4e-3,  # pylint: disable=protected-access
                                                   matmul_tflops=1e-7, method="t"))
  # 128 flops and 1024 bytes in 0.5 ms: 2.56e-7 TFLOP/s and 2.048e-3 GB/s (exact in binary64)
  assert roof == Roofline(flops=128, bytes=1024, achieved_tflops=2.56e-7, achieved_gbps=2.048e-3,
                          ceiling_tflops=1e-7, ceiling_gbps=4e-3,
                          frac_compute=pytest.approx(2.56, rel=1e-12),
                          frac_bandwidth=pytest.approx(0.512, rel=1e-12),
                          ceiling_tflops_source="measured", ceiling_gbps_source="measured",
                          ceiling_method="t")
  none = judge._roofline(RELU, TINY, 0.5, NOT_MEASURED)  # pylint: disable=protected-access
  assert (none.ceiling_tflops, none.ceiling_gbps, none.frac_compute, none.frac_bandwidth) == (
      None, None, None, None)


def _fake_timing(monkeypatch, kernel_ms, baseline_ms, wrong_calls=(), shipped_ms=None):
  """time_interleaved stubbed: fixed samples (a third fn, the shipped kernel, gets
  `shipped_ms`), kept outputs from the reference (or zeros)."""
  seen = {}

  def fake(fns, sets, *, iterations, rounds, warmup, method, keep):
    seen.update(fns=fns, sets=sets, iterations=iterations, rounds=rounds, warmup=warmup,
                method=method, keep=keep)
    kept = {}
    for call, args in _fed(sets[0], list(range(iterations))).items():
      if call in keep[0]:
        kept[call] = jnp.zeros((8, 16)) if call in wrong_calls else fns[1](*args)
    return [timing.Timed(samples=timing.Samples(method=method, samples_ms=tuple(ms),
                                                kernel_names=()), kept=kept if j == 0 else {})
            for j, ms in enumerate([kernel_ms, baseline_ms, shipped_ms][:len(fns)])]
  monkeypatch.setattr(timing, "time_interleaved", fake)
  return seen


def _time(ceilings=NOT_MEASURED, iterations=4, executable="the executable"):
  state = judge._State(fields={})  # pylint: disable=protected-access
  opts = judge.EvalOptions(timing_iterations=iterations, timing_rounds=2, warmup=1)
  judge._time_and_roofline(executable, RELU, TINY, opts, _ctx(ceilings=ceilings), state)  # pylint: disable=protected-access
  return state.fields


def test_time_and_roofline_records_every_timing_field(monkeypatch):
  seen = _fake_timing(monkeypatch, [1.0, 2.0, 4.0, 8.0], [3.0, 3.0, 6.0, 6.0])
  fields = _time()
  assert seen["fns"][0] == "the executable"
  assert (seen["iterations"], seen["rounds"], seen["warmup"]) == (4, 2, 1)
  assert seen["method"] is timing.TimingMethod.WALLCLOCK
  assert len(seen["keep"]) == 1 and len(seen["keep"][0]) == 3 and seen["keep"][0] <= {0, 1, 2, 3}
  kernel_sets, baseline_sets = seen["sets"]   # feeds of their own, the baseline's named
  assert (kernel_sets.whose, baseline_sets.whose) == ("", "the baseline's ")
  assert len(kernel_sets) == 4 and kernel_sets.flush is None   # a CPU judge flushes nothing
  samples = timing.Samples(method=timing.TimingMethod.WALLCLOCK, samples_ms=(1.0, 2.0, 4.0, 8.0),
                           kernel_names=())
  baseline = dataclasses.replace(samples, samples_ms=(3.0, 3.0, 6.0, 6.0))
  assert fields == dict(
      timing_method="wallclock", timing_iterations=4, timing_input_sets=len(kernel_sets),
      runtime_ms=3.0, runtime_iqr_ms=samples.iqr_ms, runtime_samples_ms=(1.0, 2.0, 4.0, 8.0),
      baseline_ms=4.5, baseline_iqr_ms=baseline.iqr_ms, baseline_samples_ms=(3.0, 3.0, 6.0, 6.0),
      timed_outputs_checked=3, speedup=1.5,
      roofline=judge._roofline(RELU, TINY, 3.0, NOT_MEASURED, 4.5),  # pylint: disable=protected-access
      timing_rotated_bytes=512 * 4, timing_l2_resident=True,  # 4 calls' inputs, unflushed
      untimed_copy_ms=None, status=Status.PASS, reasons=(), robust=True)


COPY_RATE = dataclasses.replace(NOT_MEASURED, copy_gbps=4000.0, read_gbps=5000.0)


@pytest.mark.parametrize("method, prefilled, charge", [
    (timing.TimingMethod.CUPTI, 8_000_000, 0.002),    # 8 MB at the measured 4000 GB/s copy rate
    (timing.TimingMethod.CUPTI, 0, 0.0),
    (timing.TimingMethod.WALLCLOCK, 8_000_000, None),  # the wall clock saw the copies
])
def test_the_copies_that_fill_in_place_buffers_are_charged_to_every_cupti_sample(
    monkeypatch, method, prefilled, charge):
  """Round 13's untimed copy: bytes XLA moves into a kernel's aliased buffer before it runs are
  no kernel launch, so the CUPTI timer never sees them. Each sample of the candidate is charged
  those bytes at the run's copy rate (the fastest they can move), and runtime, speedups and
  roofline follow; the references are not charged."""
  _fake_timing(monkeypatch, [1.0, 2.0, 4.0, 8.0], [3.0, 3.0, 6.0, 6.0],
               shipped_ms=[2.0, 2.0, 2.0, 8.0])
  state = judge._State(fields={"prefilled_bytes": prefilled})  # pylint: disable=protected-access
  ctx = dataclasses.replace(_ctx(ceilings=COPY_RATE), timing_method=method)
  opts = judge.EvalOptions(timing_iterations=4, timing_rounds=2, warmup=1)
  judge._time_and_roofline("the executable", RELU, TINY, opts, ctx, state,  # pylint: disable=protected-access
                           shipped="the shipped kernel")
  fields, added = state.fields, charge or 0.0
  assert fields["untimed_copy_ms"] == (None if charge is None else pytest.approx(charge))
  assert fields["runtime_samples_ms"] == pytest.approx(tuple(ms + added for ms in (1, 2, 4, 8)))
  assert fields["runtime_ms"] == pytest.approx(3.0 + added)
  assert fields["baseline_samples_ms"] == (3.0, 3.0, 6.0, 6.0)
  assert fields["shipped_samples_ms"] == (2.0, 2.0, 2.0, 8.0)
  assert fields["speedup"] == pytest.approx(4.5 / (3.0 + added))
  assert fields["speedup_shipped"] == pytest.approx(2.0 / (3.0 + added))
  assert fields["roofline"].achieved_gbps == pytest.approx(
      judge._roofline(RELU, TINY, 3.0 + added, COPY_RATE, 4.5).achieved_gbps)  # pylint: disable=protected-access


def test_the_copy_charge_is_the_bytes_at_the_copy_rate_or_the_bandwidth():
  cupti = timing.TimingMethod.CUPTI
  assert judge.untimed_copy_ms(4_000_000, cupti, COPY_RATE) == pytest.approx(0.001)
  no_copy = dataclasses.replace(COPY_RATE, copy_gbps=None)   # the read rate stands in
  assert judge.untimed_copy_ms(5_000_000, cupti, no_copy) == pytest.approx(0.001)
  assert judge.untimed_copy_ms(5_000_000, cupti, NOT_MEASURED) == 0.0  # no rate: no charge
  assert judge.untimed_copy_ms(5_000_000, timing.TimingMethod.WALLCLOCK, COPY_RATE) == 0.0


def test_the_shipped_kernel_is_timed_as_a_third_reference_on_sets_of_its_own(monkeypatch):
  """Given the shipped kernel, timing interleaves it with the kernel and the baseline on input
  sets of its own (named in their reasons), records its samples and speedup_shipped =
  shipped_ms / runtime_ms, and leaves the verdict and the XLA speedup as they were."""
  seen = _fake_timing(monkeypatch, [1.0, 2.0, 4.0, 8.0], [3.0, 3.0, 6.0, 6.0],
                      shipped_ms=[2.0, 2.0, 2.0, 8.0])
  state = judge._State(fields={})  # pylint: disable=protected-access
  opts = judge.EvalOptions(timing_iterations=4, timing_rounds=2, warmup=1)
  judge._time_and_roofline("the executable", RELU, TINY, opts, _ctx(), state,  # pylint: disable=protected-access
                           shipped="the shipped kernel")
  assert seen["fns"][0] == "the executable" and seen["fns"][2] == "the shipped kernel"
  assert [s.whose for s in seen["sets"]] == ["", "the baseline's ", "the shipped kernel's "]
  assert len({id(s) for s in seen["sets"]}) == 3
  fields = state.fields
  assert (fields["shipped_ms"], fields["shipped_samples_ms"]) == (2.0, (2.0, 2.0, 2.0, 8.0))
  assert fields["shipped_iqr_ms"] == timing.Samples(
      method=timing.TimingMethod.WALLCLOCK, samples_ms=(2.0, 2.0, 2.0, 8.0), kernel_names=()).iqr_ms
  assert fields["speedup_shipped"] == pytest.approx(2.0 / 3.0)
  assert fields["speedup"] == 1.5 and fields["status"] is Status.PASS


def test_without_the_shipped_kernel_nothing_of_it_is_timed_or_recorded(monkeypatch):
  seen = _fake_timing(monkeypatch, [1.0] * 4, [2.0] * 4, shipped_ms=[1.0] * 4)
  fields = _time()
  assert len(seen["fns"]) == len(seen["sets"]) == 2
  assert not {"shipped_ms", "shipped_iqr_ms", "shipped_samples_ms", "speedup_shipped"} & set(fields)


def test_a_kernel_that_changes_the_shipped_kernels_inputs_is_rejected(monkeypatch):
  """A write past its refs into the shipped kernel's sets (to slow its own reference) is
  found like one into the baseline's."""
  seen = _fake_timing(monkeypatch, [1.0] * 4, [2.0] * 4, shipped_ms=[1.0] * 4)
  original = judge.TimingSets.mutations

  def mutations(sets):
    return ([f"{sets.whose}input set 0 was changed"] if sets.whose == "the shipped kernel's "
            else original(sets))
  monkeypatch.setattr(judge.TimingSets, "mutations", mutations)
  state = judge._State(fields={})  # pylint: disable=protected-access
  opts = judge.EvalOptions(timing_iterations=4, timing_rounds=2, warmup=1)
  judge._time_and_roofline("the executable", RELU, TINY, opts, _ctx(), state,  # pylint: disable=protected-access
                           shipped="the shipped kernel")
  assert len(seen["sets"]) == 3
  assert state.fields["status"] is Status.REJECTED
  assert state.fields["reasons"] == ("the shipped kernel's input set 0 was changed",)


def _shipped_item(variant="candidate", **options):
  return types.SimpleNamespace(variant=variant, size="small",
                               options=judge.EvalOptions(**options))


def test_the_shipped_kernel_is_compiled_for_a_candidate_on_a_gpu_only(monkeypatch):
  """A jitted stand-in for kernels_gpu/relu.py, compiled at the task's input structs, under the
  judge's own stage; nothing for a shipped kernel judged itself, on a CPU, or with
  time_shipped off (no stage announced, nothing loaded); loaded once per task, precision and
  size in a judge process."""
  judge._compiled_shipped.cache_clear()  # pylint: disable=protected-access
  loaded, stages = [], []
  monkeypatch.setattr(judge, "load_kernel", lambda variant, task: loaded.append(
      (variant, task)) or types.SimpleNamespace(kernel=lambda x, interpret: _relu_fn(x)))
  gpu = dataclasses.replace(_ctx(env=GPU_ENV), stage=stages.append)
  for item, ctx in [(_shipped_item("gpu"), gpu), (_shipped_item("tpu"), gpu),
                    (_shipped_item(), dataclasses.replace(_ctx(), stage=stages.append)),
                    (_shipped_item(time_shipped=False), gpu)]:
    assert judge._shipped_executable(item, RELU, ctx) is None  # pylint: disable=protected-access
  assert loaded == [] and stages == []
  compiled = judge._shipped_executable(_shipped_item(), RELU, gpu)  # pylint: disable=protected-access
  assert loaded == [(judge.Variant.GPU, "relu")] and stages == [budgets.SHIPPED_BASELINE]
  (struct,) = RELU.input_structs("small")
  x = jnp.linspace(-1.0, 1.0, math.prod(struct.shape), dtype=struct.dtype).reshape(struct.shape)
  np.testing.assert_array_equal(compiled(x), _relu_fn(x))
  assert judge._shipped_executable(_shipped_item(), RELU, gpu) is compiled  # pylint: disable=protected-access
  assert loaded == [(judge.Variant.GPU, "relu")]
  judge._compiled_shipped.cache_clear()  # pylint: disable=protected-access


def test_the_shipped_kernel_is_compiled_for_the_device_not_interpreted(monkeypatch):
  """The reference a candidate is paid against is the shipped kernel as it runs on the GPU:
  compiled in interpret mode it would be many times slower, and every candidate (a copy of it
  included) would be paid far above parity."""
  judge._compiled_shipped.cache_clear()  # pylint: disable=protected-access
  modes = []

  def kernel(x, *, interpret):
    modes.append(interpret)
    return _relu_fn(x)
  monkeypatch.setattr(judge, "load_kernel",
                      lambda variant, task: types.SimpleNamespace(kernel=kernel))
  judge._shipped_executable(_shipped_item(), RELU, _ctx(env=GPU_ENV))  # pylint: disable=protected-access
  assert modes == [False]
  judge._compiled_shipped.cache_clear()  # pylint: disable=protected-access


def test_a_shipped_kernel_that_does_not_compile_leaves_the_candidate_timed_against_xla(
    monkeypatch, caplog):
  """The shipped kernel's failure is the judge's, logged: the candidate is timed as before."""
  def broken(variant, task):
    raise FileNotFoundError("kernels_gpu is not importable")
  monkeypatch.setattr(judge, "load_kernel", broken)
  judge._compiled_shipped.cache_clear()  # pylint: disable=protected-access
  with caplog.at_level(logging.ERROR, logger=judge.__name__):
    assert judge._shipped_executable(_shipped_item(), RELU, _ctx(env=GPU_ENV)) is None  # pylint: disable=protected-access
  assert "the shipped kernel of relu at small" in caplog.text
  assert "kernels_gpu is not importable" in caplog.text


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_shipped_kernel_that_does_not_compile_is_logged_with_its_task_size_and_precision(
    monkeypatch, caplog, precision):
  """One line says which of the shipped kernels was not timed (a task's kernel can compile at
  one precision and not at another), with the exception's traceback."""
  def broken(variant, task):
    raise RuntimeError("no lowering at this precision")
  monkeypatch.setattr(judge, "load_kernel", broken)
  judge._compiled_shipped.cache_clear()  # pylint: disable=protected-access
  with caplog.at_level(logging.ERROR, logger=judge.__name__):
    assert judge._shipped_executable(  # pylint: disable=protected-access
        _shipped_item(), RELU.at_precision(precision), _ctx(env=GPU_ENV)) is None
  (logged,) = [r for r in caplog.records if r.name == judge.__name__]
  assert logged.getMessage() == f"the shipped kernel of relu at small {precision} is not timed"
  assert logged.exc_info is not None and "no lowering at this precision" in caplog.text


def test_a_gather_is_timed_with_its_large_table_shared_and_so_is_its_eager_baseline(monkeypatch):
  """A gather's table larger than the L2 is drawn once for the kernel, the baseline and the
  eager baseline alike (each drawn per call would time the draw's cache state, not the rows
  the gather reads); the eager baseline gets the evaluation's options, context and runtime."""
  seen = _fake_timing(monkeypatch, [1.0] * 4, [2.0] * 4)
  eager = []
  monkeypatch.setattr(judge, "_eager_fields", lambda *args: eager.append(args) or {})
  spec = get_task("embedding_lookup")
  dims = spec.dims("small")  # an 8 MB table, past the 1 MiB L2 of _ctx
  state = judge._State(fields={})  # pylint: disable=protected-access
  opts, ctx = judge.EvalOptions(timing_iterations=4, timing_rounds=2, warmup=1), _ctx()
  judge._time_and_roofline("the executable", spec, dims, opts, ctx, state)  # pylint: disable=protected-access
  kernel_sets, baseline_sets = seen["sets"]
  [(eager_spec, eager_sets, eager_opts, eager_ctx, kernel_ms)] = eager
  assert kernel_sets.shared == baseline_sets.shared == eager_sets.shared == {0}
  assert (eager_spec, eager_opts, eager_ctx, kernel_ms) == (spec, opts, ctx, 1.0)
  read = judge.reads(spec, dims, ctx.l2_bytes)
  assert state.fields["timing_rotated_bytes"] == read.distinct_bytes(len(kernel_sets))
  assert state.fields["status"] is Status.PASS


def test_time_and_roofline_names_its_stages_and_splits_its_seconds(monkeypatch):
  """Timing, then the eager baseline, each announced as it starts (the budget that stops a
  stage names it), and each stage's seconds apart, adding up to no more than the call took."""
  _fake_timing(monkeypatch, [1.0] * 4, [2.0] * 4)
  stages = []
  state = judge._State(fields={})  # pylint: disable=protected-access
  opts = judge.EvalOptions(timing_iterations=4, timing_rounds=2, warmup=1)
  start = time.perf_counter()
  judge._time_and_roofline("the executable", RELU, TINY, opts,  # pylint: disable=protected-access
                           dataclasses.replace(_ctx(), stage=stages.append), state)
  elapsed = time.perf_counter() - start
  assert stages == [budgets.TIMING, budgets.EAGER_BASELINE]
  timing_s, eager_s = state.seconds["timing_s"], state.seconds["eager_s"]
  assert 0 <= timing_s and 0 <= eager_s and timing_s + eager_s <= elapsed


def test_the_l2_decides_between_resident_and_not_at_its_exact_size():
  read = judge.Reads(read_bytes=256, shared=frozenset())
  assert read.resident(4, 1024) and not read.resident(5, 1024)


def test_a_gather_reads_the_rows_it_touches_and_shares_only_inputs_larger_than_the_l2():
  """A gather's calls read the rows its ids pick (its bytes moved less its output), not its
  whole table, and share the table only where it is larger than the L2 (one exactly its size
  is drawn for each call); any other task reads all of its inputs and shares none, however
  small the L2."""
  spec = get_task("embedding_lookup")
  dims = spec.dims("small")  # an 8 MB table, 128 ids
  table = spec.inputs[0].nbytes(dims)
  read = judge.reads(spec, dims, l2_bytes=1 << 20)
  assert read.read_bytes == spec.min_bytes(dims) - spec.output_bytes(dims)
  assert 0 < read.read_bytes < table and read.shared == {0}
  assert judge.reads(spec, dims, l2_bytes=table).shared == frozenset()
  assert judge.reads(spec, dims, l2_bytes=table - 1).shared == {0}
  assert judge.reads(ADD, TINY, l2_bytes=1) == judge.Reads(
      read_bytes=sum(i.nbytes(TINY) for i in ADD.inputs), shared=frozenset())


def test_a_rate_is_impossible_only_beyond_the_ceilings_tolerance():
  def roof(frac):
    return Roofline(flops=1, bytes=1, achieved_tflops=None, achieved_gbps=None,
                    ceiling_tflops=None, ceiling_gbps=None, frac_compute=None,
                    frac_bandwidth=frac)
  limit = 1.0 + judge.CEILING_TOLERANCE
  assert judge._over(roof(limit)) == []  # pylint: disable=protected-access
  assert judge._over(roof(limit + 1e-9)) == [f"bandwidth {limit + 1e-9:.0%}"]  # pylint: disable=protected-access

def test_time_and_roofline_checks_every_call_when_fewer_than_three(monkeypatch):
  seen = _fake_timing(monkeypatch, [1.0, 1.0], [1.0, 1.0])
  fields = _time(iterations=2)
  assert seen["keep"] == [frozenset({0, 1})] and fields["timed_outputs_checked"] == 2


def test_time_and_roofline_rejects_wrong_timed_outputs_then_impossible_rates(monkeypatch):
  _fake_timing(monkeypatch, [1.0] * 4, [2.0] * 4, wrong_calls=(0, 1, 2, 3))  # XLA: half the rate
  ceilings = Ceilings(copy_gbps=1.024e-3 / 1.5, read_gbps=None, matmul_tflops=1.28e-7 / 2,
                      method="t")  # the kernel at 1 ms: 150% of the bandwidth, 200% of compute
  fields = _time(ceilings)
  assert fields["status"] is Status.REJECTED and fields["robust"] is False
  assert len(fields["reasons"]) == 4
  assert all("computes differently when timed" in r for r in fields["reasons"][:3])
  assert fields["reasons"][3] == (
      "timing above the hardware's physical limit (bandwidth 150%, compute 200% of the ceilings "
      "measured in this run, the higher of two measurements and never below the jitted "
      "baseline's rate in this evaluation; more than 5% above is impossible): the measurement "
      "is not trustworthy")


def test_raised_ceilings_keep_the_higher_of_each_measurement():
  first = Ceilings(copy_gbps=4000.0, read_gbps=None, matmul_tflops=420.0, method="first")
  again = Ceilings(copy_gbps=4300.0, read_gbps=4500.0, matmul_tflops=331.0, method="again")
  assert first.raised(again) == Ceilings(copy_gbps=4300.0, read_gbps=4500.0,
                                         matmul_tflops=420.0, method="first")
  assert again.raised(first) == Ceilings(copy_gbps=4300.0, read_gbps=4500.0,
                                         matmul_tflops=420.0, method="again")
  assert first.raised(NOT_MEASURED) == first and NOT_MEASURED.raised(NOT_MEASURED) == NOT_MEASURED


def test_a_rate_above_a_ceiling_measures_the_hardware_again_before_rejecting(monkeypatch):
  """One ceiling measurement read 20% low on the H200 and rejected honest matmuls: the judge
  measures again, keeps the higher ceilings, and rejects only a rate above those."""
  _fake_timing(monkeypatch, [1.0] * 4, [2.0] * 4)  # the baseline at half the kernel's rate
  at = judge._roofline(RELU, TINY, 1.0, NOT_MEASURED)  # pylint: disable=protected-access
  low = Ceilings(copy_gbps=at.achieved_gbps / 1.1, read_gbps=None,
                 matmul_tflops=at.achieved_tflops / 1.1, method="t")
  measured = []
  def again(higher):
    def measure(method):
      measured.append(method)
      return Ceilings(copy_gbps=at.achieved_gbps * higher, read_gbps=None,
                      matmul_tflops=at.achieved_tflops * higher, method="again")
    return measure
  monkeypatch.setattr(judge, "measure_ceilings", again(1.25))
  fields = _time(low)
  assert measured == [timing.TimingMethod.WALLCLOCK] and fields["status"] is Status.PASS
  assert fields["roofline"].ceiling_gbps == at.achieved_gbps * 1.25  # the record shows which
  assert fields["roofline"].ceiling_gbps_source == "remeasured"  # and that it is not the first
  baseline = judge._roofline(RELU, TINY, 2.0, NOT_MEASURED)  # pylint: disable=protected-access
  assert (fields["roofline"].baseline_gbps, fields["roofline"].baseline_tflops) == (
      baseline.achieved_gbps, baseline.achieved_tflops)  # still held against the baseline
  monkeypatch.setattr(judge, "measure_ceilings", again(0.5))  # lower again: the first one holds
  fields = _time(low)
  assert fields["status"] is Status.REJECTED and "bandwidth 110%" in fields["reasons"][0]
  assert fields["roofline"].ceiling_gbps == low.copy_gbps
  assert fields["roofline"].ceiling_gbps_source == "measured"
  measured.clear()
  _time(Ceilings(copy_gbps=at.achieved_gbps, read_gbps=None, matmul_tflops=None, method="t"))
  assert measured == []  # a rate within the ceilings never costs a measurement


def test_each_precision_is_held_against_its_own_matmul_rate():
  """A bfloat16 contraction is held against the bfloat16 rate (about twice TF32 on an H200):
  against TF32 it would be "impossible" at parity with XLA. A run that did not measure it
  (before release 6) leaves the bfloat16 task with no compute ceiling, never the TF32 one."""
  matmul = get_task("matmul")
  dims = matmul.dims("small")
  ceilings = Ceilings(copy_gbps=None, read_gbps=None, matmul_tflops=1e-3, method="t",
                      matmul_bf16_tflops=2e-3)
  at32 = judge._roofline(matmul, dims, 1.0, ceilings)  # pylint: disable=protected-access
  at16 = judge._roofline(matmul.at_precision("bfloat16"), dims, 1.0, ceilings)  # pylint: disable=protected-access
  assert (at32.ceiling_tflops, at16.ceiling_tflops) == (1e-3, 2e-3)
  assert at16.frac_compute == at32.frac_compute / 2
  older = dataclasses.replace(ceilings, matmul_bf16_tflops=None)
  assert judge._roofline(matmul.at_precision("bfloat16"), dims, 1.0, older).ceiling_tflops is None  # pylint: disable=protected-access
  assert ceilings.raised(dataclasses.replace(ceilings, matmul_bf16_tflops=3e-3)).matmul_bf16_tflops == 3e-3
  assert ceilings.to_json()["matmul_bf16_tflops"] == 2e-3


def test_time_and_roofline_at_exactly_the_ceiling_passes(monkeypatch):
  _fake_timing(monkeypatch, [1.0] * 4, [1.0] * 4)
  at = judge._roofline(RELU, TINY, 1.0, NOT_MEASURED)  # pylint: disable=protected-access
  fields = _time(Ceilings(copy_gbps=at.achieved_gbps, read_gbps=None,
                          matmul_tflops=at.achieved_tflops, method="t"))
  assert fields["roofline"].frac_bandwidth == 1.0 and fields["roofline"].frac_compute == 1.0
  assert fields["status"] is Status.PASS and fields["reasons"] == ()


def test_base_fields_describe_the_task_and_where_it_ran():
  matmul = get_task("matmul")
  item = dataclasses.replace(_item(size=Size.SMALL), candidate="matmul/fast")
  fields = judge._base_fields(item, matmul, matmul.dims("small"), (1, 2), CPU_ENV)  # pylint: disable=protected-access
  assert fields == dict(
      task="matmul", task_id=matmul.task_id, level=matmul.level, category=matmul.category,
      variant="candidate", size="small", candidate="matmul/fast",
      input_shapes=("(256, 256)", "(256, 256)"), device="cpu", interpret=True,
      kernel_sha256="0" * 64, seeds=(1, 2), tolerance="matmul", rtol=1e-2, atol=1e-2,
      max_rel_l2=1e-3, atol_scale="reference_rms", input_families=("scaled", "small"),
      environment=CPU_ENV, precision="float32")
  low = dataclasses.replace(item, task="matmul", precision="bfloat16")
  at_bf16 = judge._base_fields(low, low.spec, matmul.dims("small"), (1, 2), CPU_ENV)  # pylint: disable=protected-access
  assert (at_bf16["precision"], at_bf16["rtol"], at_bf16["atol"], at_bf16["max_rel_l2"]) == (
      "bfloat16", 1.6e-2, 1e-1, 1e-2)
  on_gpu = judge._base_fields(_item(), RELU, SMALL, (1,), GPU_ENV)  # pylint: disable=protected-access
  assert (on_gpu["device"], on_gpu["interpret"]) == ("gpu", False)


_CALL = dict(name="k", grid=[2, 1], block_shapes=["(8, 16)", "(8, 16)"], num_warps=4, num_stages=2,
             max_tensor_elements=128, interpret=False)


def test_pallas_calls_are_shown_only_when_well_formed():
  assert judge._pallas_calls(None) == ()  # pylint: disable=protected-access
  assert judge._pallas_calls(_report(pallas_calls=(_CALL,))) == (PallasCallInfo(  # pylint: disable=protected-access
      name="k", grid=(2, 1), block_shapes=("(8, 16)", "(8, 16)"), num_warps=4, num_stages=2,
      max_tensor_elements=128, interpret=False),)
  assert judge._pallas_calls(_report(pallas_calls=(_CALL, {"name": "k"}))) == ()  # pylint: disable=protected-access


def _profile(report, state=None, size="small"):
  item = _item(_outcome(report), size=size)
  return judge._compile_profile(item, state or judge._State(fields={}))  # pylint: disable=protected-access


def test_compile_profile_of_a_compiled_artifact():
  state = judge._State(fields={}, run_blob=b"12345", compiled=CompiledArtifact(  # pylint: disable=protected-access
      executable=None, compile_s=1.5, ptx=("ab", "cdé"), cache_hit=False))
  report = _report(_entry(artifacts={"cuda": b"x", "cpu": b"y"}), jaxpr="jé", triton_ir=("ir1", "ir22"),
                   pallas_calls=(_CALL,), lowers_tpu=False, tpu_error="MosaicError: no")
  assert _profile(report, state) == CompileProfile(
      trace_s=0.25, lower_s=0.5, compile_s=1.5, jaxpr_bytes=3, triton_ir_bytes=7, ptx_bytes=6,
      pallas_calls=judge._pallas_calls(report), lowers_triton=True, lowers_triton_error=None,  # pylint: disable=protected-access
      lowers_tpu=False, lowers_tpu_error="MosaicError: no", exporter_reported=True,
      artifact_bytes=5)


def test_compile_profile_without_artifacts():
  assert _profile(None) == CompileProfile(
      trace_s=None, lower_s=None, compile_s=None, jaxpr_bytes=None, triton_ir_bytes=None,
      ptx_bytes=None, pallas_calls=(), lowers_triton=None, lowers_triton_error=None,
      lowers_tpu=None, lowers_tpu_error=None, exporter_reported=True, artifact_bytes=None)
  empty = judge._State(fields={}, compiled=CompiledArtifact(executable=None, compile_s=1.0, ptx=(), cache_hit=False))  # pylint: disable=protected-access
  profile = _profile(_report(_entry(errors={"cuda": "LoweringError: no"})), empty)
  assert (profile.lowers_triton, profile.lowers_triton_error) == (False, "LoweringError: no")
  assert (profile.triton_ir_bytes, profile.ptx_bytes, profile.jaxpr_bytes) == (None, None, None)
  cpu_only = _profile(_report(_entry(artifacts={"cpu": b"y"}, errors={"tpu": "x"})))
  assert cpu_only.lowers_triton is None and cpu_only.trace_s == 0.25
  other_size = _profile(_report(_entry(artifacts={"cuda": b"x"})), size="medium")
  assert (other_size.trace_s, other_size.lower_s, other_size.lowers_triton,
          other_size.lowers_triton_error) == (None, None, None, None)


def test_failure_record_of_a_judge_that_never_reported():
  item = _item(_outcome(wall_s=2.5, output="printed"), seeds=(4, 5))
  run = GPU_CEILINGS.run_info(RUN)
  record = judge.failure_record(item, CPU_ENV, run, Status.TIMEOUT, ErrorType.TIMEOUT,
                                "killed after 600 s\nstack")
  assert record.run == run
  assert (record.status, record.error_type, record.error, record.reasons) == (
      Status.TIMEOUT, ErrorType.TIMEOUT, "killed after 600 s\nstack", ("killed after 600 s",))
  assert (record.seeds, record.input_shapes, record.eval_wall_s) == ((4, 5), ("(512, 512)",), 2.5)
  assert (record.correct, record.robust, record.exporter_output) == (False, False, "printed")


def test_a_stage_over_its_budget_is_a_rejection_a_time_limit_ended():
  """As the driver maps `over_budget` (`driver._FAILURES`): rejected, with the error type
  `timeout` that keeps it out of the verdict cache (red team round 17: never the words)."""
  item = _item(_outcome(wall_s=0.5))
  status, error_type = pipeline_driver._FAILURES["over_budget"]  # pylint: disable=protected-access
  record = judge.failure_record(item, CPU_ENV, None, status, error_type,
                                "the timing stage ran past its budget of 300 s\ndetail")
  assert (record.status, record.error_type, record.reasons) == (
      Status.REJECTED, ErrorType.TIMEOUT, ("the timing stage ran past its budget of 300 s",))

def _finish(env=CPU_ENV, output="", **fields):
  item = _item(_outcome(output=output, wall_s=0.5))
  base = judge._base_fields(item, RELU, SMALL, (1, 2), env)  # pylint: disable=protected-access
  state = judge._State(fields={**base, "status": Status.PASS, **fields})  # pylint: disable=protected-access
  return judge._finish(item, state, env, None, 1.25)  # pylint: disable=protected-access


def test_finish_fills_the_record():
  record = _finish(output="x" * 5000)
  assert (record.error_type, record.error, record.reasons, record.correct, record.robust) == (
      None, None, (), False, False)
  assert (record.general_shapes, record.max_abs_error, record.filters, record.speedup,
          record.roofline, record.runtime_samples_ms, record.baseline_samples_ms) == (
      None, None, (), None, None, (), ())
  assert (record.timing_method, record.timing_iterations, record.runtime_ms) == (None, None, None)
  assert record.eval_wall_s == 1.75 and record.judge_version == "4"
  assert record.sandbox == ("net", "fs") and record.exporter_output == "x" * 4000
  assert record.compile == _profile(_report())
  measured = datetime.datetime.fromisoformat(record.measured_at)
  assert measured.utcoffset() == datetime.timedelta(0) and measured.microsecond == 0
  assert abs(datetime.datetime.now(datetime.timezone.utc) - measured) < datetime.timedelta(minutes=5)
  assert _finish().exporter_output is None


def test_finish_timing_is_comparable_only_when_timed_on_a_gpu():
  assert _finish(GPU_ENV, timing_method="cupti").timing_comparable is True
  assert _finish(GPU_ENV).timing_comparable is False
  assert _finish(CPU_ENV, timing_method="wallclock").timing_comparable is False


# ---------------------------------------------------------------------------------------------
# judge: one evaluation end to end, module analysis stubbed, plain-JAX artifacts


def _artifacts(fn=_relu_fn, size=Size.SMALL):
  blob = _blob(fn, platforms=("cpu", "cuda"), shape=RELU.output(RELU.dims(size)))
  return {"cpu": blob, "cuda": blob}


def _evaluate(outcome, **options):
  if isinstance(outcome, protocol.ExportReport):
    outcome = _outcome(outcome)
  return judge.evaluate_artifact(_item(outcome, **options), _ctx())


def test_evaluate_passes_an_honest_artifact(analysis):
  artifacts = _artifacts()
  report = _report(_entry(artifacts=artifacts), jaxpr="{ lambda ; a. }", triton_ir=("ir a", "ir b"))
  record, saved = _evaluate(report)
  assert (record.status, record.error_type, record.error, record.reasons) == (
      Status.PASS, None, None, ())
  assert (record.correct, record.robust, record.general_shapes, record.seeds) == (
      True, True, None, (1, 2))
  assert record.max_abs_error == 0.0 and record.rel_l2_error == 0.0 and len(record.filters) == 7
  assert (record.filters[-1].name, record.filters[-1].passed) == ("memcheck", True)
  assert record.filters[-1].detail.startswith("unavailable: a CPU judge runs interpret mode")
  assert record.runtime_ms > 0 and record.timed_outputs_checked == 2
  assert record.compile.artifact_bytes == len(artifacts["cpu"])
  assert 0.5 < record.eval_wall_s < 0.5 + 120     # the exporter's 0.5 s plus the judge's own
  assert analysis.calls[0][1:] == (RELU.flops(SMALL), 512 * 512, RELU.io_bytes(SMALL))
  assert (saved.task, saved.variant, saved.size) == ("relu", "candidate", "small")
  assert (saved.jaxpr, saved.triton_ir, saved.ptx) == ("{ lambda ; a. }", "ir a\n\nir b", None)
  assert saved.stablehlo == jax.export.deserialize(bytearray(artifacts["cuda"])).mlir_module()


def test_evaluate_keeps_the_ptx_of_the_compiled_artifact(analysis, monkeypatch):  # pylint: disable=unused-argument
  real = judge.compile_exported
  monkeypatch.setattr(judge, "compile_exported",
                      lambda *a, **k: dataclasses.replace(real(*a, **k), ptx=("p1", "p2")))
  record, saved = _evaluate(_report(_entry(artifacts=_artifacts())))
  assert saved.ptx == "p1\n\np2" and record.compile.ptx_bytes == 4 and saved.triton_ir is None


def test_the_judge_s_artifacts_carry_the_item_s_precision_and_candidate(analysis, monkeypatch):
  """The artifacts line shares its record's key (task, variant, size, precision) in a run
  folder: a bfloat16 evaluation's IR must not land under the float32 key; a population's
  candidate id names both."""
  analysis.reasons = ["two kernels"]
  _never(monkeypatch, "compile", "run", "timing")
  item = dataclasses.replace(_item(_outcome(_report(_entry(artifacts=_artifacts())))),
                             precision="bfloat16", candidate="c7")
  record, saved = judge.evaluate_artifact(item, _ctx())
  assert (record.status, record.precision, saved.precision) == (
      Status.REJECTED, "bfloat16", "bfloat16")
  assert (record.candidate, saved.candidate) == ("c7", "c7")


def test_a_passing_evaluation_names_each_stage_and_times_its_checks(analysis, monkeypatch):  # pylint: disable=unused-argument
  """The stages a passing evaluation goes through, in order (each has its budget), and the
  correctness runs' seconds, a part of the judge's own; the compile's cache hit is recorded."""
  real = judge.compile_exported
  monkeypatch.setattr(judge, "compile_exported",
                      lambda *a, **k: dataclasses.replace(real(*a, **k), cache_hit=True))
  stages = []
  ctx = dataclasses.replace(_ctx(), stage=stages.append)
  record, _ = judge.evaluate_artifact(_item(_outcome(_report(_entry(artifacts=_artifacts())))), ctx)
  assert record.status is Status.PASS
  assert stages == [budgets.MODULE_ANALYSIS, budgets.COPY_CHECK, budgets.ARTIFACT_CHECKS,
                    budgets.MODULE_ANALYSIS, budgets.COMPILE, budgets.CORRECTNESS,
                    budgets.TIMING, budgets.EAGER_BASELINE]
  assert 0 < record.stages.checks_s < record.stages.judge_s
  assert record.stages.compile_cache_hit is True


def test_the_evaluation_takes_the_compile_stage_s_word(analysis, monkeypatch):  # pylint: disable=unused-argument
  """What the compile stage failed to compile at the evaluated size fails without a second
  try, with the compiler's message."""
  _never(monkeypatch, "compile", "run", "timing")
  notes = {"small": judge.Precompiled(outcome="failed", message="ptxas fatal: too big\nmore")}
  item = dataclasses.replace(_item(_outcome(_report(_entry(artifacts=_artifacts())))),
                             precompiled=notes)
  record, _ = judge.evaluate_artifact(item, _ctx())
  assert (record.status, record.error_type, record.reasons) == (
      Status.ERROR, ErrorType.COMPILE, ("ptxas fatal: too big",))


@pytest.mark.parametrize("config, recorded", [(None, None), ({"block": 128}, '{"block": 128}')])
def test_the_record_keeps_the_kernels_declared_config_as_json(analysis, monkeypatch, config,
                                                              recorded):
  analysis.reasons = ["two kernels"]
  _never(monkeypatch, "compile", "run", "timing")
  entry = dataclasses.replace(_entry(artifacts=_artifacts()), config=config)
  record, _ = _evaluate(_report(entry))
  assert (record.status, record.kernel_config) == (Status.REJECTED, recorded)


def test_a_report_without_the_evaluated_size_is_rejected(analysis):  # pylint: disable=unused-argument
  record, _ = _evaluate(_report(_entry("edge", artifacts=_artifacts(size=Size.EDGE))))
  assert (record.status, record.error_type, record.kernel_config, record.reasons) == (
      Status.REJECTED, None, None, ("the exporter returned no export for size small",))


def test_a_structure_rejection_keeps_its_reasons_when_admission_refuses_too(analysis):
  """The run artifact's admission may refuse a kernel whose structure was already rejected:
  the record keeps both reasons, the structure's first."""
  analysis.reasons = ["two kernels"]
  analysis.stateful = ("stablehlo.rng",)
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts())))
  assert (record.status, record.reasons) == (Status.REJECTED, (
      "two kernels", "stateful ops ['stablehlo.rng'] in the artifact: an exported kernel must "
      "be a pure function of its inputs"))


def test_an_unexpected_error_before_any_reason_is_an_error_record(monkeypatch):
  """evaluate_artifact never raises for what happens in an evaluation: an exception of any
  kind, even one before the structure's reasons are known, ends it as an error."""
  def broken(*_):
    raise OSError("the analysis helper's pipe closed")
  monkeypatch.setattr(analysis_process.ModuleAnalyser, "analyse", broken)
  _never(monkeypatch, "compile", "run", "timing")
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts())))
  assert (record.status, record.error_type, record.reasons) == (
      Status.ERROR, ErrorType.RUNTIME, ("OSError: the analysis helper's pipe closed",))


def test_the_judge_names_its_run_with_its_own_ceilings_on_the_record_it_builds(analysis,
                                                                             monkeypatch):
  """A suite's judge is told the run and builds each record whole: the run, the GPU and the
  ceilings it measured (`Ceilings.run_info`), nothing stamped on afterwards. Outside a suite
  (`evaluate()`) a record names no run."""
  analysis.reasons = ["two kernels"]
  _never(monkeypatch, "compile", "run", "timing")
  run = GPU_CEILINGS.run_info(RUN)
  assert run == RunInfo(command="regen --device gpu", run_id="run-a", gpu_index=2,
                        ceiling_copy_gbps=3900.0, ceiling_read_gbps=4000.0,
                        ceiling_matmul_tflops=400.0, ceiling_matmul_bf16_tflops=800.0,
                        ceiling_method="cupti")
  item = _item(_outcome(_report(_entry(artifacts=_artifacts()))))
  record, _ = judge.evaluate_artifact(item, dataclasses.replace(_ctx(), run=run))
  assert record.status is Status.REJECTED and record.run == run
  assert judge.evaluate_artifact(item, _ctx())[0].run is None


def _never(monkeypatch, *names):
  """Each of the judge's steps `names` (compile, correctness runs, timing) fails the test."""
  steps = {"compile": (judge, "compile_exported"), "run": (checks, "run_candidate"),
           "timing": (timing, "time_interleaved")}
  for name in names:
    monkeypatch.setattr(*steps[name], lambda *_, name=name, **__: pytest.fail(f"{name} reached"))


def test_evaluate_rejects_on_structure_and_the_exporters_input_writes(analysis, monkeypatch):
  """What the analysis rejects ends the evaluation there: nothing of the artifact is compiled,
  run or timed, and the record says why."""
  analysis.reasons = ["two kernels"]
  _never(monkeypatch, "compile", "run", "timing")
  stages = []
  ctx = dataclasses.replace(_ctx(), stage=stages.append)
  item = _item(_outcome(_report(_entry(artifacts=_artifacts()),
                                input_writes=("k0: input 0", "k1: input 1"))))
  record, saved = judge.evaluate_artifact(item, ctx)
  assert (record.status, record.error_type, record.error) == (Status.REJECTED, None, None)
  assert record.reasons == ("two kernels", "the kernel writes to its input refs (k0: input 0; "
                            "k1: input 1): inputs mutated in place")
  assert (record.correct, record.robust, record.runtime_ms, record.general_shapes) == (
      False, False, None, None)
  # The structure's analysis, the judge's own exports of the shipped kernels (no budget: a slow
  # one is not the candidate's doing), then the run artifact's checks and analysis.
  assert stages == ["module analysis", "copy check", "checks of the artifact", "module analysis"]
  assert [budgets.budget_s(d, "copy check") for d in ("gpu", "cpu")] == [None, None]
  assert len(analysis.texts) == 2
  assert (record.compile.compile_s, record.stages.compile_cache_hit, record.stages.checks_s) == (
      None, None, None)
  assert saved.stablehlo == analysis.texts[0] and saved.ptx is None


def test_an_edge_artifact_the_analysis_refuses_leaves_nothing_compiled(monkeypatch):
  """Every artifact of the kernel is analysed before any is compiled: an unreadable edge
  module rejects the kernel before its evaluated size reaches the compiler."""
  def analyse(_, serialized):
    if serialized == edge_module:
      raise module_analysis.ModuleAnalysisError("nested deeper than 256 brackets")
    return types.SimpleNamespace(disallowed_custom_calls=(), stateful_ops=(), kernels=[],
                                 prefilled_bytes=0), "text"
  monkeypatch.setattr(analysis_process.ModuleAnalyser, "analyse", analyse)
  monkeypatch.setattr(module_analysis, "module_reasons", lambda *_, **__: [])
  _never(monkeypatch, "compile", "run", "timing")
  edge_blob = _blob(shape=RELU.output(RELU.dims(Size.EDGE)))
  edge_module = jax.export.deserialize(bytearray(edge_blob)).mlir_module_serialized
  report = _report(_entry(artifacts=_artifacts()), _entry("edge", artifacts={"cpu": edge_blob}))
  record, _ = _evaluate(report, check_edge=True)
  assert (record.status, record.reasons) == (Status.REJECTED, (
      "the exported module cannot be analysed: nested deeper than 256 brackets",))


def test_an_analysis_that_cannot_be_walled_is_a_harness_error(monkeypatch):
  """No module is read by a helper without its walls: the evaluation is the judge's error
  (not cached as the kernel's verdict), and nothing is compiled."""
  def unavailable(*_):
    raise sandbox.WallsUnavailable("could not become user 65534")
  monkeypatch.setattr(analysis_process.ModuleAnalyser, "analyse", unavailable)
  _never(monkeypatch, "compile", "run", "timing")
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts())))
  assert (record.status, record.error_type) == (Status.ERROR, ErrorType.HARNESS)
  assert record.reasons == ("the module analysis cannot run behind its walls here, so no "
                            "module is read: could not become user 65534",)


@pytest.mark.parametrize("reasons, writes", [(["two kernels"], ()), ([], ("k0: input 0",))])
def test_either_rejection_before_compiling_ends_the_evaluation(analysis, monkeypatch, reasons,
                                                               writes):
  analysis.reasons = reasons
  _never(monkeypatch, "compile")
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts()), input_writes=writes))
  assert record.status is Status.REJECTED and len(record.reasons) == 1


def test_evaluate_reports_a_wrong_kernel_as_incorrect_per_seed(analysis):  # pylint: disable=unused-argument
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts(lambda x: _relu_fn(x) + 1.0))))
  assert record.status is Status.INCORRECT and (record.correct, record.robust) == (False, True)
  assert [r.split(": ")[0] for r in record.reasons] == ["seed 1", "seed 2",
                                                        "input family scaled (x * 100), seed 1"]
  assert all(r.split(": ", 1)[1].startswith("not allclose(") for r in record.reasons)
  assert record.max_abs_error == pytest.approx(1.0) and record.runtime_ms is None
  # 1 where relu is 0, against atol x the RMS of the reference (seeds differ by under 1%)
  assert record.max_rel_error == pytest.approx(1.0 / record.atol_used, rel=1e-2)
  assert record.rel_l2_error > 1.0


def test_evaluate_puts_rejections_before_failed_seeds(analysis):  # pylint: disable=unused-argument
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts(lambda x: x * 1.0))))
  assert record.status is Status.REJECTED and (record.correct, record.robust) == (False, False)
  assert record.reasons[0] == "not_input_copy: output equals input(s) ['x']"
  assert [r.split(":")[0] for r in record.reasons[1:]] == [
      "seed 1", "seed 2", "input family scaled (x * 100), seed 1"]


def test_evaluate_reports_a_load_error(analysis):  # pylint: disable=unused-argument
  record, saved = _evaluate(_report(_entry(artifacts=_artifacts()), load_error="SyntaxError: bad\nline 3"))
  assert (record.status, record.error_type, record.error, record.reasons) == (
      Status.ERROR, ErrorType.LOAD, "SyntaxError: bad\nline 3", ("SyntaxError: bad",))
  assert saved.stablehlo is None and saved.ptx is None


def test_evaluate_reports_an_export_failure():
  record, saved = _evaluate(_outcome(failure="violation", message="opened a socket\ndetail"))
  assert (record.status, record.error_type, record.error, record.reasons) == (
      Status.REJECTED, None, None, ("opened a socket",))
  assert (saved.jaxpr, saved.triton_ir, saved.stablehlo) == (None, None, None)


def test_evaluate_reports_a_failed_compile(analysis, monkeypatch):  # pylint: disable=unused-argument
  def refuse(*_, **__):
    raise RuntimeError("ptxas died\nat line 3")
  monkeypatch.setattr(judge, "compile_exported", refuse)
  _never(monkeypatch, "run", "timing")
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts())))
  assert (record.status, record.error_type, record.error, record.reasons) == (
      Status.ERROR, ErrorType.COMPILE, "RuntimeError: ptxas died\nat line 3",
      ("RuntimeError: ptxas died",))


@pytest.mark.parametrize("error, error_type, text", [
    (checks.OutputError("kernel returned tuple\nmore"), ErrorType.OUTPUT, "kernel returned tuple\nmore"),
    (RuntimeError("INTERNAL: boom\nstack"), ErrorType.RUNTIME, "RuntimeError: INTERNAL: boom\nstack"),
    (RuntimeError("RESOURCE_EXHAUSTED: 9 GiB"), ErrorType.OUT_OF_MEMORY,
     "RuntimeError: RESOURCE_EXHAUSTED: 9 GiB"),
])
def test_evaluate_reports_errors_raised_while_running(analysis, monkeypatch, error, error_type, text):  # pylint: disable=unused-argument
  def run_candidate(*_, **__):
    raise error
  monkeypatch.setattr(checks, "run_candidate", run_candidate)
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts())))
  first = text if error_type is ErrorType.OUTPUT else text.splitlines()[0]
  assert (record.status, record.error_type, record.error, record.reasons) == (
      Status.ERROR, error_type, text, (first,))
  assert record.compile.compile_s > 0


def test_evaluate_on_a_gpu_counts_unwritten_elements(analysis):  # pylint: disable=unused-argument
  """The GPU path on this CPU: the artifact is exported for cuda and cpu, so it still runs."""
  sentinel = checks.SENTINEL
  artifacts = _artifacts(lambda x: _relu_fn(x).at[0, :2].set(jnp.float32(sentinel)))
  record, _ = judge.evaluate_artifact(_item(_outcome(_report(_entry(artifacts=artifacts)))),
                                      _ctx(GPU_ENV))
  assert record.status is Status.REJECTED and (record.device, record.interpret) == ("gpu", False)
  assert record.reasons[0] == ("elements left unwritten: 2 of 262144 output elements kept the "
                               "poison value")
  assert [r.split(":")[0] for r in record.reasons[1:]] == [
      "seed 1", "seed 2", "input family scaled (x * 100), seed 1"]


def test_evaluate_on_a_gpu_rejects_what_memcheck_finds(analysis, monkeypatch):  # pylint: disable=unused-argument
  """A GPU judge runs memcheck on a kernel that passed its correctness runs, with the first
  seed; an access outside the buffers rejects it before it is timed."""
  seen = []

  def check(blob, **kwargs):
    seen.append(kwargs["seed"])
    return memcheck.Result(outcome=memcheck.Outcome.ERRORS, detail="Invalid __global__ read")
  monkeypatch.setattr(memcheck, "check", check)
  _never(monkeypatch, "timing")
  record, _ = judge.evaluate_artifact(_item(_outcome(_report(_entry(artifacts=_artifacts())))),
                                      _ctx(GPU_ENV))
  assert seen == [1]
  assert (record.status, record.correct, record.robust) == (Status.REJECTED, True, False)
  assert record.reasons == ("the kernel accessed device memory outside its buffers "
                            "(compute-sanitizer memcheck: Invalid __global__ read)",)
  assert (record.filters[-1].name, record.filters[-1].passed) == ("memcheck", False)


def test_evaluate_draws_seeds_from_the_os(analysis):  # pylint: disable=unused-argument
  report = _report(_entry(artifacts=_artifacts()))
  first, _ = _evaluate(report, seeds=(), num_seeds=3)
  second, _ = _evaluate(report, seeds=(), num_seeds=3)
  assert len(first.seeds) == 3 and all(0 <= s < 2 ** 31 for s in first.seeds)
  assert first.seeds != second.seeds and first.status is Status.PASS


def test_evaluate_checks_the_edge_shape_without_rejecting(analysis):  # pylint: disable=unused-argument
  with_edge = _report(_entry(artifacts=_artifacts()), _entry("edge", artifacts=_artifacts(size=Size.EDGE)))
  record, _ = _evaluate(with_edge, check_edge=True)
  assert (record.status, record.general_shapes, record.edge_error) == (Status.PASS, True, None)
  record, _ = _evaluate(_report(_entry(artifacts=_artifacts())), check_edge=True)
  assert (record.status, record.general_shapes) == (Status.PASS, False)
  assert record.edge_error == ("edge shape {'N': 1000, 'M': 300}: RuntimeError: the exporter "
                               "returned no export for size edge")


# ---------------------------------------------------------------------------------------------
# protocol: the exporter's answer, parsed strictly


REQUEST = protocol.ExportRequest(task="relu", source="src", filename="k.py",
                                 exports=(("small", ("cuda", "cpu")), ("edge", ("cpu",))))


def _answer(**fields):
  data = dict(exports=[dict(size="small", artifacts={"cpu": "YWJj"}, errors={"cuda": "no"},
                            stage="lowering", trace_s=1, lower_s=0.5)],
              pallas_calls=[])
  data.update(fields)
  return json.dumps(data).encode()


def _protocol_error(raw, request=REQUEST):
  with pytest.raises(protocol.ProtocolError) as e:
    protocol.decode(raw, request)
  return str(e.value)


def test_request_round_trips_through_json():
  assert protocol.ExportRequest.from_json(REQUEST.to_json()) == REQUEST
  quiet = dataclasses.replace(REQUEST, reports=False)
  assert protocol.ExportRequest.from_json(quiet.to_json()) == quiet
  assert REQUEST.platforms("small") == ("cuda", "cpu") and REQUEST.platforms("large") == ()


def test_decode_parses_a_full_answer():
  raw = _answer(load_error="E", jaxpr="{ lambda }", pallas_calls=[{"name": "k"}],
                input_writes=["k: input 0"], triton_ir=["ir"], lowers_tpu=True, tpu_error="t")
  assert protocol.decode(raw, REQUEST) == protocol.ExportReport(
      load_error="E", jaxpr="{ lambda }", pallas_calls=({"name": "k"},), input_writes=("k: input 0",),
      triton_ir=("ir",), lowers_tpu=True, tpu_error="t",
      exports=(protocol.SizeExport(size="small", artifacts={"cpu": b"abc"}, errors={"cuda": "no"},
                                   stage="lowering", trace_s=1.0, lower_s=0.5),))


def test_decode_makes_every_string_of_the_answer_text():
  """Red team round 15 (class 17): JSON's escapes carry what UTF-8 cannot encode, a lone
  surrogate from the candidate's exception or names; the answer is made text where it is read,
  each such character its escape, wherever it sits (an error, a key, a call's field)."""
  lone = "bad \ud800 here"
  raw = _answer(load_error=lone, pallas_calls=[{"name": lone, lone: [lone]}],
                exports=[dict(size="small", artifacts={}, errors={"cuda": lone})])
  assert b"\\ud800" in raw  # ASCII on the wire
  report = protocol.decode(raw, REQUEST)
  escaped = "bad \\ud800 here"
  assert report.load_error == escaped and report.exports[0].errors == {"cuda": escaped}
  assert report.pallas_calls == ({"name": escaped, escaped: [escaped]},)


def test_decode_defaults_for_what_the_exporter_may_leave_out():
  raw = json.dumps(dict(exports=[dict(size="edge", artifacts={}, errors={})], pallas_calls=[])).encode()
  report = protocol.decode(raw, REQUEST)
  assert report == protocol.ExportReport(
      load_error=None, jaxpr=None, pallas_calls=(), input_writes=(), triton_ir=(), lowers_tpu=None,
      tpu_error=None, exports=(protocol.SizeExport(size="edge", artifacts={}, errors={}, stage=None,
                                                   trace_s=None, lower_s=None),))
  assert isinstance(protocol.decode(_answer(), REQUEST).exports[0].trace_s, float)
  assert protocol.decode(_answer(lowers_tpu="yes"), REQUEST).lowers_tpu is None
  assert protocol.decode(_answer(lowers_tpu=False), REQUEST).lowers_tpu is False


def test_decode_reads_a_declared_config_sorted():
  raw = _answer(exports=[dict(size="edge", artifacts={}, errors={},
                              config={"splits": 8, "block_q": 32, "k_major": True, "x": "y"})])
  config = protocol.decode(raw, REQUEST).exports[0].config
  assert config == {"block_q": 32, "k_major": True, "splits": 8, "x": "y"}
  assert list(config) == ["block_q", "k_major", "splits", "x"]


@pytest.mark.parametrize("config", [
    [1, 2], {"a": [1]}, {"a": {"b": 1}}, {"a" * 65: 1}, {"a": "b" * 65},
    {f"k{i}": i for i in range(33)}, {"a": float("nan")}, {"a": float("-inf")},
])
def test_decode_refuses_a_config_that_is_not_a_few_scalars(config):
  raw = _answer(exports=[dict(size="edge", artifacts={}, errors={}, config=config)])
  assert "config" in _protocol_error(raw)


def test_decode_accepts_a_config_at_its_limits():
  """As many names as MAX_CONFIG_KEYS, names and string values of MAX_CONFIG_CHARS: a config
  at the limits is kept (one past them is refused, above)."""
  config = {f"{i:0{protocol.MAX_CONFIG_CHARS}d}": "v" * protocol.MAX_CONFIG_CHARS
            for i in range(protocol.MAX_CONFIG_KEYS)}
  raw = _answer(exports=[dict(size="edge", artifacts={}, errors={}, config=config)])
  assert protocol.decode(raw, REQUEST).exports[0].config == config


@pytest.mark.parametrize("key", ["trace_s", "lower_s"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), -0.5])
def test_decode_refuses_a_time_that_is_no_duration(key, value):
  """The exporter's times reach the record as its word: a number of seconds, or nothing."""
  raw = _answer(exports=[dict(size="edge", artifacts={}, errors={}, **{key: value})])
  assert repr(key) in _protocol_error(raw)


def test_decode_accepts_a_time_of_zero_seconds():
  """A stage can take no measurable time (a trace served from a cache): 0 is a duration."""
  raw = _answer(exports=[dict(size="edge", artifacts={}, errors={}, trace_s=0, lower_s=0.0)])
  export = protocol.decode(raw, REQUEST).exports[0]
  assert (export.trace_s, export.lower_s) == (0.0, 0.0)
  assert isinstance(export.trace_s, float)


@pytest.mark.parametrize("stage", [None, "trace", "lowering", "export"])
def test_decode_accepts_every_stage(stage):
  raw = _answer(exports=[dict(size="edge", artifacts={}, errors={}, stage=stage)])
  assert protocol.decode(raw, REQUEST).exports[0].stage == stage


def test_decode_reads_each_time_on_its_own():
  raw = _answer(exports=[dict(size="edge", artifacts={}, errors={}, trace_s=2)])
  assert (protocol.decode(raw, REQUEST).exports[0].trace_s,
          protocol.decode(raw, REQUEST).exports[0].lower_s) == (2.0, None)


def test_decode_sorts_platforms():
  raw = _answer(exports=[dict(size="small", artifacts={"cuda": "eHl6", "cpu": "YWJj"},
                              errors={})])
  assert list(protocol.decode(raw, REQUEST).exports[0].artifacts) == ["cpu", "cuda"]


@pytest.mark.parametrize("raw, message", [
    (b"\xff", "the exporter's answer is not JSON ("),
    (b"{", "the exporter's answer is not JSON ("),
    (b"[]", "the exporter's answer is not a JSON object"),
    (json.dumps({"pallas_calls": []}).encode(), "field 'exports': expected <class 'list'>, got NoneType"),
    (_answer(pallas_calls=None), "field 'pallas_calls': expected <class 'list'>, got NoneType"),
    (_answer(pallas_calls=[1]), "field 'pallas_calls': expected a list of objects"),
    (_answer(exports=["small"]), "an export entry is not an object"),
    (_answer(exports=[dict(size="huge", artifacts={}, errors={})]),
     "export for size 'huge', which was not requested"),
    (_answer(exports=[dict(size="edge", artifacts={"cuda": "YWJj"}, errors={"tpu": "x"})]),
     "exports for platforms ['cuda', 'tpu'], requested ['cpu']"),
    (_answer(exports=[dict(size="edge", artifacts={}, errors={}, stage="compile")]),
     "unknown stage 'compile'"),
    (_answer(exports=[dict(size="edge", artifacts={}, errors={}, trace_s=True)]),
     "field 'trace_s': expected (<class 'int'>, <class 'float'>), got bool"),
    (_answer(exports=[dict(size="edge", artifacts={}, errors={}, lower_s="1")]),
     "field 'lower_s': expected (<class 'int'>, <class 'float'>), got str"),
    (_answer(exports=[dict(size="edge", artifacts={}, errors={"cpu": 3})]),
     "field 'cpu': expected <class 'str'>, got int"),
    (_answer(exports=[dict(size="edge", artifacts=[], errors={})]),
     "field 'artifacts': expected <class 'dict'>, got list"),
    (_answer(exports=[dict(size=1, artifacts={}, errors={})]),
     "field 'size': expected <class 'str'>, got int"),
    (_answer(exports=[dict(size="edge", artifacts={"cpu": 3}, errors={})]),
     "artifact edge/cpu: not a base64 string within 67108864 bytes"),
    (_answer(exports=[dict(size="edge", artifacts={"cpu": "YW Jj"}, errors={})]),
     "artifact edge/cpu: invalid base64 ("),
    (_answer(exports=[dict(size="edge", artifacts={"cpu": "YWJjé"}, errors={})]),
     "artifact edge/cpu: invalid base64 ("),
    (_answer(exports=[dict(size="edge", artifacts={}, errors={})] * 2), "two exports for one size"),
    (_answer(jaxpr=1), "field 'jaxpr': expected <class 'str'>, got int"),
    (_answer(load_error=False), "field 'load_error': expected <class 'str'>, got bool"),
    (_answer(tpu_error=[]), "field 'tpu_error': expected <class 'str'>, got list"),
    (_answer(input_writes="k"), "field 'input_writes': expected a list of strings"),
    (_answer(triton_ir=["ir", 1]), "field 'triton_ir': expected a list of strings"),
])
def test_decode_refuses_malformed_answers(raw, message):
  assert _protocol_error(raw).startswith(message)


def _nested(levels: int) -> bytes:
  """An answer `levels` deep: the answer, pallas_calls and an entry (3), then arrays, after
  an export entry that opens and closes brackets of its own."""
  return _answer(pallas_calls=[{"n": functools.reduce(lambda v, _: [v], range(levels - 3), 0)}])


def test_decode_keeps_an_answer_as_deep_as_max_depth_and_refuses_one_deeper():
  """The depth is that of the brackets open at once: siblings closed before (the export entry)
  do not add to it, brackets inside a string (escaped quotes too) are no structure."""
  assert protocol.decode(_nested(protocol.MAX_DEPTH), REQUEST).pallas_calls[0]["n"] != 0
  deep = _nested(protocol.MAX_DEPTH + 1)
  assert _protocol_error(deep) == (
      f"the exporter's answer nests deeper than {protocol.MAX_DEPTH} levels")
  brackets = '\\"' + "[{" * protocol.MAX_DEPTH + '"[' * 3
  assert protocol.decode(_answer(jaxpr=brackets), REQUEST).jaxpr == brackets


def _with_values(values: int, text: str = "") -> bytes:
  """An answer of exactly `values` containers and elements (each `[`, `{` and separating `,`
  outside a string), its jaxpr `text`."""
  base = _answer(jaxpr=text, pallas_calls=[{"n": []}])
  bare = base.replace(json.dumps(text).encode(), b'""')
  count = bare.count(b",") + bare.count(b"[") + bare.count(b"{")
  return _answer(jaxpr=text, pallas_calls=[{"n": [0] * (values - count + 1)}])


def test_decode_keeps_an_answer_of_max_values_and_refuses_one_more():
  """Every container and every element the parse builds counts, whatever kind; what a string
  holds (brackets, commas) is one value however long."""
  text = ",[{" * protocol.MAX_VALUES
  for kept in (_with_values(protocol.MAX_VALUES), _with_values(protocol.MAX_VALUES, text)):
    assert len(protocol.decode(kept, REQUEST).pallas_calls[0]["n"]) > protocol.MAX_VALUES // 2
  refused = f"the exporter's answer holds more than {protocol.MAX_VALUES} values"
  assert _protocol_error(_with_values(protocol.MAX_VALUES + 1)) == refused
  only_lists = b'{"exports": [], "pallas_calls": [' + b"[]," * protocol.MAX_VALUES + b"[]]}"
  assert _protocol_error(only_lists) == refused
  only_objects = b'{"exports": [], "pallas_calls": [' + b"{}," * protocol.MAX_VALUES + b"{}]}"
  assert _protocol_error(only_objects) == refused


def test_decode_reads_an_unterminated_string_in_time_linear_in_the_answer():
  """`\\"` repeated outside any string: each `"` opens a string json never sees closed. The
  bound reads the answer once, not once per quote (quadratic: minutes for 128 KiB)."""
  raw = b'{"exports": [], "pallas_calls": []}' + b'\\"' * (1 << 16)
  start = time.perf_counter()
  assert _protocol_error(raw).startswith("the exporter's answer is not JSON (")
  assert time.perf_counter() - start < 5.0
  assert _protocol_error(b"\xff\xfe").startswith("the exporter's answer is not JSON (not UTF-8: ")


def test_decode_limits_sizes(monkeypatch):
  monkeypatch.setattr(protocol, "MAX_TEXT_CHARS", 8)     # "lowering", the stage, is 8 characters
  assert protocol.decode(_answer(jaxpr="abcdefgh"), REQUEST).jaxpr == "abcdefgh"
  assert _protocol_error(_answer(jaxpr="abcdefghi")) == "field 'jaxpr': 9 characters (limit 8)"
  assert protocol.decode(_answer(triton_ir=["abcd", "efgh"]), REQUEST).triton_ir == ("abcd", "efgh")
  assert _protocol_error(_answer(triton_ir=["abcd", "efghi"])) == \
      "field 'triton_ir': more than 8 characters"
  monkeypatch.setattr(protocol, "MAX_ARTIFACT_BYTES", 3000)   # base64: 4000 characters
  ok = _answer(exports=[dict(size="edge", artifacts={"cpu": "YWJj" * 1000}, errors={})])
  assert protocol.decode(ok, REQUEST).exports[0].artifacts == {"cpu": b"abc" * 1000}
  long = _answer(exports=[dict(size="edge", artifacts={"cpu": "YWJj" * 1002}, errors={})])
  assert _protocol_error(long) == "artifact edge/cpu: not a base64 string within 3000 bytes"
  raw = _answer()
  monkeypatch.setattr(protocol, "MAX_RESULT_BYTES", len(raw))
  assert protocol.decode(raw, REQUEST).exports[0].size == "small"
  monkeypatch.setattr(protocol, "MAX_RESULT_BYTES", len(raw) - 1)
  assert _protocol_error(raw) == f"the exporter's answer is {len(raw)} bytes (limit {len(raw) - 1})"


def test_export_report_finds_a_size():
  report = _report(_entry("small"), _entry("edge", stage="trace"))
  assert report.size("edge").stage == "trace" and report.size("large") is None


# ---------------------------------------------------------------------------------------------
# compare() computes on the arrays' device (jax) in float64: the same figures as NumPy.

def _one_pass(out, ref, tol):
  """compare()'s statistics computed in NumPy float64 over the whole array."""
  o, r = out.astype(np.float64), ref.astype(np.float64)
  err = np.abs(o - r)
  excess = err - (tol.atol + tol.rtol * np.abs(r))
  return (float(err.max()), float((err / np.maximum(np.abs(r), tol.atol)).max()),
          float(np.linalg.norm(err) / np.linalg.norm(r)), int(np.count_nonzero(excess > 0)),
          np.unravel_index(int(np.argmax(excess)), out.shape))


@pytest.mark.parametrize("on_device", [False, True])
def test_compare_matches_numpy_float64(on_device):
  rng = np.random.default_rng(5)
  ref = rng.standard_normal((9, 11)).astype(np.float32)
  out = ref.copy()
  out[6, 3] += 0.5      # the worst element
  out[8, 10] += 0.5     # as bad, later: the first one is named
  out[1, 2] += 0.25
  tol = Tolerance(kind=ToleranceClass.EXACT, rtol=1e-5, atol=1e-6)
  got = compare(jnp.asarray(out), jnp.asarray(ref), tol) if on_device else compare(out, ref, tol)
  max_abs, max_rel, rel_l2, violations, worst = _one_pass(out, ref, tol)
  assert got.max_abs_error == max_abs and got.max_rel_error == max_rel
  assert got.rel_l2_error == pytest.approx(rel_l2, rel=1e-12)
  assert f"{violations} of 99 elements off" in got.reason and violations == 3
  assert f"worst at index {tuple(int(i) for i in worst)}" in got.reason and worst == (6, 3)
  assert f"got {float(out[6, 3]):.6g}, expected {float(ref[6, 3]):.6g}" in got.reason


def test_compare_is_float64_not_float32():
  """1 + 2^-20 vs 1 at rtol 2^-21: a float64 difference; in float32 the excess would round."""
  tol = Tolerance(kind=ToleranceClass.EXACT, rtol=2.0 ** -21, atol=0.0)
  out, ref = f32(1.0 + 2.0 ** -20), f32(1.0)
  got = compare(jnp.asarray(out), jnp.asarray(ref), tol)
  assert not got.passed and got.max_abs_error == 2.0 ** -20


def test_compare_keeps_jax_in_32_bit_mode_around_it():
  compare(jnp.ones(3), jnp.ones(3), TOLERANCES[ToleranceClass.EXACT])
  assert jnp.ones(2).dtype == jnp.float32 and not jax.config.jax_enable_x64


def test_compare_finds_nan_anywhere_on_device():
  ref = jnp.ones(10, jnp.float32)
  got = compare(ref.at[9].set(jnp.nan), ref, TOLERANCES[ToleranceClass.EXACT])
  assert not got.passed and got.reason.startswith("1 of 10 elements are NaN/Inf")
  assert compare(ref.at[2].set(jnp.inf), ref, TOLERANCES[ToleranceClass.EXACT]).reason.startswith(
      "1 of 10")


def _raise_bare_assertion(x):
  if x != 2:
    raise AssertionError  # a lowering rule's bare assert (pytest would rewrite a real one)


def test_an_exception_without_a_message_says_where_it_was_raised():
  from pallasbench_dataset.evaluation.errors import short_error  # pylint: disable=import-outside-toplevel
  with pytest.raises(AssertionError) as info:
    _raise_bare_assertion(1)
  text = short_error(info.value)
  assert text.startswith("AssertionError: raised at ")
  assert "test_building_blocks.py:" in text and "in _raise_bare_assertion: raise AssertionError" in text
  assert short_error(ValueError("bad shape")) == "ValueError: bad shape"


def test_compile_empties_the_dump_folder_and_reads_only_its_own_ptx(tmp_path):
  """XLA writes files for every module it compiles into the dump folder; left there, they pile
  up over a run (a disk filled on the GPU machine). A compile returns only the PTX it dumped."""
  from pallasbench_dataset.evaluation.judge.compile_profile import compile_exported  # pylint: disable=import-outside-toplevel
  dump = tmp_path / "xla-dump"
  dump.mkdir()
  (dump / "module_0001.jit_pallasbench_candidate.ptx").write_text("stale ptx")
  (dump / "module_0002.jit__randint.config.pbtxt").write_text("another module")
  struct = jax.ShapeDtypeStruct((8,), jnp.float32)
  # A module no other test compiles (the suite shares one persistent cache): a fresh compile.
  scale = 1.0 + secrets.randbelow(2**20) / 2**20
  exported = jax.export.export(jax.jit(lambda x: jnp.sin(x) * scale), platforms=("cpu",))(struct)
  artifact = compile_exported(exported, [struct], dump)
  assert artifact.ptx == () and list(dump.iterdir()) == [] and artifact.cache_hit is False
  assert np.allclose(artifact.executable(jnp.ones(8)), np.sin(1.0) * scale)


# One compile of artifact `a` (x * 2) or `b` (x * 3) in a fresh process through the run's
# persistent cache, as a judge does: whether the cache served it, its answer, the cache's files.
_CACHED_COMPILE = """
import json, pathlib, sys
import jax, jax.numpy as jnp, numpy as np
from pallasbench_dataset.evaluation.judge import compile_profile
cache, which = pathlib.Path(sys.argv[1]), sys.argv[2]
compile_profile.use_persistent_cache(cache)
struct = jax.ShapeDtypeStruct((8,), jnp.float32)
factor = {"a": 2.0, "b": 3.0}[which]
exported = jax.export.export(jax.jit(lambda x: x * factor), platforms=("cpu",))(struct)
artifact = compile_profile.compile_exported(exported, [struct], None)
print(json.dumps({"hit": artifact.cache_hit, "out": float(artifact.executable(jnp.ones(8))[0]),
                  "entries": sorted(p.name for p in cache.glob("jit_pallasbench_candidate-*"))}))
"""


def _cached_compile(cache, which):
  done = subprocess.run([sys.executable, "-c", _CACHED_COMPILE, str(cache), which],
                        capture_output=True, text=True, check=True, timeout=120)
  return json.loads(done.stdout.splitlines()[-1])


def test_the_compile_cache_serves_an_artifact_only_its_own_entry(tmp_path):
  """JAX names a persistent cache entry by a hash of the module and its compile options, so a
  judge loads only the entry of the artifact it judges: entries of other artifacts, under
  their own names or planted under any other name, are never read, and a corrupt entry under
  the artifact's own name fails to decompress and is compiled afresh. A well-formed entry of
  another module put under the artifact's name would be loaded (the last step): what keeps
  it out is that only the project's compile stage and judges write the folder (the exporter,
  the one process running candidate code, can write nothing: test_sandbox_behaviours)."""
  first = _cached_compile(tmp_path, "a")
  assert (first["hit"], first["out"], len(first["entries"])) == (False, 2.0, 1)
  (own,) = first["entries"]
  other = _cached_compile(tmp_path, "b")
  (b_entry,) = set(other["entries"]) - {own}
  assert (other["hit"], other["out"]) == (False, 3.0)
  shutil.copy(tmp_path / b_entry, tmp_path / f"jit_pallasbench_candidate-{'0' * 64}-cache")
  assert _cached_compile(tmp_path, "a") == {"hit": True, "out": 2.0, "entries": sorted(
      [own, b_entry, f"jit_pallasbench_candidate-{'0' * 64}-cache"])}
  (tmp_path / own).write_bytes(b"not a compressed executable")
  corrupt = _cached_compile(tmp_path, "a")
  assert (corrupt["hit"], corrupt["out"]) == (False, 2.0)
  shutil.copy(tmp_path / b_entry, tmp_path / own)
  assert _cached_compile(tmp_path, "a")["out"] == 3.0  # the cache trusts its writers


def test_compile_returns_the_ptx_its_compile_dumped(tmp_path, monkeypatch):
  """A stand-in for XLA's dump: tracing the entry writes a PTX file (with a byte that is not
  UTF-8) and another module's file; the compile returns that PTX only, then empties the folder."""
  from pallasbench_dataset.evaluation.judge import compile_profile  # pylint: disable=import-outside-toplevel
  dump = tmp_path / "xla-dump"
  dump.mkdir()
  (dump / "module_0001.jit_pallasbench_candidate.ptx").write_text("stale ptx")
  named = compile_profile._named_entry  # pylint: disable=protected-access
  def dumping(exported):
    entry = named(exported)
    def pallasbench_candidate(*args):
      (dump / "module_0002.jit_pallasbench_candidate.ptx").write_bytes(b".version 8.0 \xff")
      (dump / "module_0003.jit__randint.config.pbtxt").write_text("another module")
      return entry(*args)
    return pallasbench_candidate
  monkeypatch.setattr(compile_profile, "_named_entry", dumping)
  struct = jax.ShapeDtypeStruct((8,), jnp.float32)
  exported = jax.export.export(jax.jit(jnp.sin), platforms=("cpu",))(struct)
  artifact = compile_profile.compile_exported(exported, [struct], dump)
  assert artifact.ptx == (".version 8.0 \ufffd",) and list(dump.iterdir()) == []


def _raise(error):
  raise error


@pytest.mark.parametrize("outcome, verdict, status", [
    (_outcome(failure="crash", message="died"), None, "error"),        # the export failed
    (_outcome(_report(load_error="no such module")), None, "error"),   # a Failure while judged
    (_outcome(_report()), lambda *_: _raise(RuntimeError("boom")), "error"),  # any other error
], ids=["export_failed", "load_error", "run_error"])
def test_each_evaluation_retires_the_candidate_s_analysis_helper_whatever_its_verdict(
    monkeypatch, outcome, verdict, status):
  """evaluate_artifact retires the helper its item's modules went to once the verdict is in,
  whichever way the verdict came (red team round 13: the memory one artifact's module grew a
  shared helper to refused the next artifact's), exactly once, and before it returns."""
  calls = []
  ctx = dataclasses.replace(_ctx(), analyser=types.SimpleNamespace(fresh=lambda: calls.append(1)))
  if verdict is not None:
    monkeypatch.setattr(judge, "_verdict", verdict)
  record, _ = judge.evaluate_artifact(_item(outcome), ctx)
  assert record.status == status
  assert calls == [1]


@pytest.mark.parametrize("outcome", ["compiled", "failed", "skipped"])
def test_precompile_retires_the_analysis_helper_once_the_artifact_is_admitted_or_not(
    analysis, monkeypatch, outcome):  # pylint: disable=unused-argument
  """The compile stage's helper read this item's module: it is retired right after the
  admission, whatever follows (compiled, refused by the compiler, or skipped), so the next
  item's module goes to a fresh helper, which imports while this one compiles."""
  artifact = CompiledArtifact(executable="exe", compile_s=0.005, ptx=(), cache_hit=False)
  compile_, _ = _timed_compile(0.0, artifact if outcome == "compiled" else None)
  monkeypatch.setattr(judge, "compile_exported", compile_)
  events = []
  analyser = analysis_process.ModuleAnalyser()
  monkeypatch.setattr(analyser, "fresh", lambda: events.append("fresh"))
  ctx = dataclasses.replace(_ctx(), analyser=analyser, stage=events.append)
  shape = (8, 16) if outcome == "skipped" else RELU.input_shapes(SMALL)[0]
  note = judge.precompile(judge.CompileItem(task="relu", size="small", blob=_blob(shape=shape)),
                          ctx)
  assert note.outcome == outcome
  assert events == {"compiled": ["module analysis", "fresh", "compile"],
                    "failed": ["module analysis", "fresh", "compile"],
                    "skipped": ["fresh"]}[outcome]  # (8, 16): refused before the analysis


@pytest.mark.parametrize("earlier", [(), ("the kernel writes to its input refs",)])
@pytest.mark.parametrize("error, reason", [
    (checks.OutputError("the output has shape (8, 8), not (8, 128)"),
     "the output has shape (8, 8), not (8, 128)"),
    (RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS"), "RuntimeError: CUDA_ERROR_ILLEGAL_ADDRESS"),
], ids=["output", "run"])
def test_an_error_in_the_run_keeps_the_reasons_found_before_it(monkeypatch, earlier, error,
                                                                reason):
  """The structure's reasons are recorded before the candidate runs: an error in its run adds
  its own reason after them, it does not replace them (the record says everything found)."""
  def verdict(item, spec, dims, seeds, ctx, state):  # pylint: disable=unused-argument
    if earlier:
      state.fields["reasons"] = earlier
    raise error
  monkeypatch.setattr(judge, "_verdict", verdict)
  record, _ = judge.evaluate_artifact(_item(_outcome(_report())), _ctx())
  assert record.status == "error"
  assert record.reasons == (*earlier, reason)


def test_fresh_seeds_are_drawn_from_the_whole_31_bit_range(monkeypatch):
  """Without seeds of its own an evaluation draws `num_seeds` from the OS over [0, 2**31): a
  kernel cannot have memorised the outputs of a handful of likely inputs."""
  drawn = []
  monkeypatch.setattr(judge.secrets, "randbelow", lambda n: drawn.append(n) or len(drawn))
  record, _ = judge.evaluate_artifact(
      _item(_outcome(failure="crash", message="died"), seeds=(), num_seeds=3), _ctx())
  assert drawn == [2**31] * 3
  assert record.seeds == (1, 2, 3)
