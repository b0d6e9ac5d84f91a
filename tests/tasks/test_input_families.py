"""Input families beyond the nominal draw, and tolerances that follow the outputs' scale.

Every task has families that reach the regions where its formula can break, and every family
must be well conditioned where it is used: the XLA baseline passes it on this CPU at the
task's tolerance against the float64 reference at each precision it is kept at, and so does
every fixed kernel at float32 (interpret mode, `small`). A family left out at bfloat16 names
its bfloat16 replacement. The judge checks every family and names the one that failed; kernels
right only on the nominal band (no max subtracted, no epsilon, a partial range test) fail
there. A wrong output at the edge shape is incorrect, a refusal there only general_shapes False.
"""

import dataclasses
import functools
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset import Size, families, list_tasks
from pallasbench_dataset.evaluation.judge import checks
from pallasbench_dataset.families import (INT32_MAX, INT32_MIN, Affine, InputFamily,
                                          MatchedRows, OutOfRangeIds, ZeroRows)
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.precision import BFLOAT16, PRECISIONS
from pallasbench_dataset.tasks import (FAMILY_KEY_STREAM, REFERENCE_COMPILER_OPTIONS, get_task,
                                      input_family_rows)
from pallasbench_dataset.tolerance import (TOLERANCES, AtolScale, Tolerance, ToleranceClass,
                                           compare)

SPECS = list_tasks()
FAMILY_CASES = [pytest.param(spec, family, id=f"{spec.name}-{family.name}")
                for spec in SPECS for family in spec.families]
# At bfloat16: the families well conditioned there (InputFamily.precisions).
BF16_FAMILY_CASES = [pytest.param(low, family, id=f"{low.name}-{family.name}")
                     for low in (s.at_precision(BFLOAT16) for s in SPECS)
                     for family in low.families]
SEED = 17


def _baseline(spec):
  """What a user writes: the reference, jitted, float32, JAX's default precision."""
  return jax.jit(spec.reference)


@functools.cache
def _fixed_kernel(name):
  """kernels_gpu/<name>.py's entry point, loaded once so that a task's families share its
  compiled interpret-mode program."""
  return load_kernel("gpu", name).kernel


# ---------------------------------------------------------------------------------------------
# The registry's families

@pytest.mark.parametrize("spec", SPECS, ids=operator.attrgetter("name"))
def test_every_task_has_well_formed_families(spec):
  """Every task has a family at each precision, and a family left out at a precision names a
  replacement of the same task kept there."""
  names = [f.name for f in spec.families]
  assert len(set(names)) == len(names), names
  assert all(spec.at_precision(p).families for p in PRECISIONS), spec.name
  inputs = {i.name for i in spec.inputs}
  for family in spec.families:
    assert family.transforms and {t.input for t in family.transforms} <= inputs, family
    assert family.description.startswith(family.formula + ": ") and len(family.why) > 10
    assert "\n" not in family.description
    assert spec.family(family.name) is family
    left_out = set(PRECISIONS) - set(family.precisions)
    assert (family.replaced_by is None) == (not left_out), family
    if left_out:
      assert left_out <= set(spec.family(family.replaced_by).precisions), family
  with pytest.raises(KeyError, match=f"task {spec.name} has no input family 'nope'"):
    spec.family("nope")


def test_the_card_rows_list_every_family_and_every_task():
  rows = input_family_rows()
  assert {r["task"] for r in rows} == {s.name for s in SPECS}
  assert {"task": "softmax", "family": "shifted", "inputs": get_task("softmax").family(
      "shifted").description} in rows
  assert [r["family"] for r in rows if r["task"] == "one_hot"] == ["out_of_range"]
  assert len(rows) == sum(len(s.families) for s in SPECS)


def test_family_derives_its_inputs_from_the_nominal_draw():
  spec = get_task("mse_loss")
  nominal = spec.make_inputs(Size.SMALL, 3)
  offset = spec.family_inputs(spec.family("offset"), Size.SMALL, 3)
  np.testing.assert_array_equal(offset[0], nominal[0])                    # pred untouched
  np.testing.assert_array_equal(offset[1], nominal[1] + np.float32(10.0))  # target + 10
  scaled = spec.family_inputs(spec.family("scaled_down"), Size.SMALL, 3)
  for got, x in zip(scaled, nominal):
    assert got.dtype == jnp.float32
    np.testing.assert_array_equal(got, x * np.float32(1e-3))
  assert spec.family("offset").description.startswith("target + 10: ")
  assert spec.family("scaled_down").formula == "pred * 0.001, target * 0.001"


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_compiled_family_has_the_bits_of_its_transforms_run_op_by_op(precision):
  """A family's transforms run as one program (families._derived) with the bits they had
  when each op ran as a program of its own (the body called uncompiled): the inputs the judge
  checks on are the ones the registry documents, whatever XLA fuses."""
  for spec in (s.at_precision(precision) for s in SPECS):
    dims = spec.dims(Size.SMALL)
    nominal = spec.make_inputs(dims, SEED)
    names = tuple(i.name for i in spec.inputs)
    for family in spec.families:
      key = jax.random.fold_in(jax.random.fold_in(jax.random.key(SEED), spec.task_id),
                               FAMILY_KEY_STREAM)
      compiled = spec.family_inputs(family, dims, SEED)
      op_by_op = families._derived.__wrapped__(
          nominal, key, family=family, names=names, dims=tuple(sorted(dims.items())))
      for name, got, want in zip(names, compiled, op_by_op, strict=True):
        assert got.dtype == want.dtype and np.asarray(got).tobytes() == np.asarray(
            want).tobytes(), f"{spec.name} {family.name} {name}"


def test_affine_text_and_an_unknown_input():
  assert Affine(input="x", shift=-30.0).describe() == "x - 30"
  assert Affine(input="x", scale=2.0, shift=1.0).describe() == "x * 2 + 1"
  family = InputFamily(name="f", why="w", transforms=(Affine(input="z", scale=2.0),))
  with pytest.raises(KeyError, match=r"transforms \['z'\], not inputs of the task"):
    family.derive(get_task("relu").make_inputs(Size.SMALL, 0), get_task("relu").inputs)


@pytest.mark.parametrize(("spec", "family"), FAMILY_CASES)
def test_xla_baseline_and_fixed_kernel_pass_every_family_on_cpu(spec, family):
  """The check that a family is well conditioned: the float32 XLA baseline, as a user runs it,
  passes against the float64 reference at the task's own tolerance; and so does the fixed
  kernel (interpret mode). At `small`, the size the judge runs on a CPU."""
  inputs = spec.family_inputs(family, Size.SMALL, SEED)
  assert any(not np.array_equal(x, y) for x, y in zip(inputs, spec.make_inputs(Size.SMALL, SEED)))
  want = spec.expected(*inputs)
  result = compare(_baseline(spec)(*inputs), want, spec.tolerance)
  assert result.passed, f"baseline, {spec.name} {family.name}: {result.reason}"
  result = compare(_fixed_kernel(spec.name)(*inputs, interpret=True), want, spec.tolerance)
  assert result.passed, f"kernels_gpu, {spec.name} {family.name}: {result.reason}"


@pytest.mark.parametrize(("spec", "family"), BF16_FAMILY_CASES)
def test_xla_baseline_passes_every_family_at_bfloat16_on_cpu(spec, family):
  """The same check at bfloat16: the bfloat16 XLA baseline passes every family the task keeps
  there against the float64 reference on the same bfloat16 inputs (the fixed kernels at
  bfloat16: tests/kernels/test_trees.py, and the judge checks them on every family)."""
  inputs = spec.family_inputs(family, Size.SMALL, SEED)
  assert all(x.dtype == jnp.dtype(i.dtype) for x, i in zip(inputs, spec.inputs))
  result = compare(_baseline(spec)(*inputs), spec.expected(*inputs), spec.tolerance)
  assert result.passed, f"bfloat16 baseline, {spec.name} {family.name}: {result.reason}"


def test_the_shifted_layernorm_separates_two_pass_from_one_pass_variance():
  """x + 35 is well conditioned for a two-pass variance and not for E[x^2] - E[x]^2."""
  spec = get_task("layernorm")

  def one_pass(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(x * x, axis=-1, keepdims=True) - mean * mean
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)
  nominal = spec.make_inputs(Size.SMALL, SEED)
  shifted = spec.family_inputs(spec.family("shifted"), Size.SMALL, SEED)
  assert compare(jax.jit(one_pass)(*nominal), spec.expected(*nominal), spec.tolerance).passed
  assert not compare(jax.jit(one_pass)(*shifted), spec.expected(*shifted), spec.tolerance).passed
  assert compare(_baseline(spec)(*shifted), spec.expected(*shifted), spec.tolerance).passed


# ---------------------------------------------------------------------------------------------
# The reference and the tolerance rule

def test_expected_is_float64_rounded_to_float32():
  spec = get_task("layernorm")
  (x,) = spec.family_inputs(spec.family("shifted"), Size.SMALL, SEED)
  got = spec.expected(x)
  xd = np.asarray(x, np.float64)
  centered = xd - xd.mean(axis=-1, keepdims=True)
  want = centered / np.sqrt((centered ** 2).mean(axis=-1, keepdims=True) + 1e-5)
  assert got.dtype == jnp.float32
  np.testing.assert_array_equal(np.asarray(got), want.astype(np.float32))
  ids = get_task("one_hot").make_inputs(Size.SMALL, 0)
  assert get_task("one_hot").expected(*ids).dtype == jnp.float32  # integer inputs as they are


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_reference_compiled_with_its_casts_has_the_bits_of_the_reference_between_casts(
    precision):
  """TaskSpec.expected compiles the widening, the reference and the rounding as one program;
  its outputs are those of the reference compiled alone between eager casts."""
  for spec in (s.at_precision(precision) for s in SPECS):
    inputs = spec.make_inputs(Size.SMALL, SEED)
    with jax.enable_x64(True), jax.default_matmul_precision("highest"):
      wide = [x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x
              for x in inputs]
      alone = jax.jit(spec.reference, compiler_options=REFERENCE_COMPILER_OPTIONS)(*wide)
      want = alone.astype(spec.output_dtype)
    got = spec.expected(*inputs)
    assert got.dtype == want.dtype and np.asarray(got).tobytes() == np.asarray(
        want).tobytes(), spec.name


def test_task_tolerances_scale_atol_by_the_reference_rms():
  assert {t.atol_scale for t in TOLERANCES.values()} == {AtolScale.REFERENCE_RMS}
  tol = TOLERANCES[ToleranceClass.REDUCTION]
  ref = np.full(64, 4e-3, np.float32)            # a softmax row's outputs
  off = (ref * (1 + 2.4e-3)).astype(np.float32)  # float16's relative error
  absolute = dataclasses.replace(tol, atol_scale=AtolScale.ABSOLUTE)
  assert compare(off, ref, absolute).passed        # 1e-4 absolute is 2.5% of these outputs
  scaled = compare(off, ref, tol)
  assert not scaled.passed and scaled.atol_used == pytest.approx(4e-7)
  assert "atol=4e-07 = 0.0001 x RMS 0.004 of the reference" in scaled.reason


@pytest.mark.parametrize("scale", [1e-6, 1e-3, 1.0, 1e3, 1e6])
def test_a_scaled_comparison_does_not_depend_on_the_scale(scale):
  tol = TOLERANCES[ToleranceClass.TRANSCENDENTAL]
  rng = np.random.default_rng(0)
  ref = rng.standard_normal(4096)
  inside = ref + 0.5 * tol.atol * np.sqrt(np.mean(ref ** 2)) * (np.arange(4096) % 7 == 0)
  outside = ref + 1.5 * (tol.atol * np.sqrt(np.mean(ref ** 2)) + tol.rtol * np.abs(ref)) * (
      np.arange(4096) == 5)
  as32 = lambda a: (a * scale).astype(np.float32)  # noqa: E731
  assert compare(as32(inside), as32(ref), tol).passed
  assert not compare(as32(outside), as32(ref), tol).passed


def test_a_zero_reference_keeps_the_class_atol():
  tol = TOLERANCES[ToleranceClass.EXACT]
  zeros = np.zeros(8, np.float32)
  near = np.full(8, 0.5e-6, np.float32)
  result = compare(near, zeros, tol)
  assert result.passed and result.atol_used == tol.atol
  assert not compare(np.full(8, 2e-6, np.float32), zeros, tol).passed


def test_an_absolute_tolerance_is_used_as_it_is():
  tol = Tolerance(kind=ToleranceClass.EXACT, rtol=0.0, atol=0.25)
  assert tol.atol_scale is AtolScale.ABSOLUTE
  result = compare(np.float32([100.0, 0.25]), np.float32([100.0, 0.0]), tol)
  assert result.passed and result.atol_used == 0.25
  assert "atol=0.25)" in compare(np.float32([0.0, 0.5]), np.float32([0.0, 0.0]), tol).reason


# ---------------------------------------------------------------------------------------------
# The judge's checks on the families and the edge shape

RELU = get_task("relu")
SOFTMAX = get_task("softmax")
TINY = {"N": 8, "M": 16}
TINY_EDGE = {"N": 3, "M": 5}
SEEDS = (1, 2)


def _no_max_softmax(x):
  e = jnp.exp(x)
  return e / jnp.sum(e, axis=-1, keepdims=True)


def test_judge_runs_every_family_on_its_seed_and_names_the_one_that_failed():
  runs = checks.run_candidate(jax.jit(_no_max_softmax), SOFTMAX, TINY, SEEDS, on_gpu=False,
                              edge=None)
  assert len(runs.family_outputs) == len(SOFTMAX.families) == 4
  verdict = checks.judge_outputs(runs, SOFTMAX, TINY, None)
  assert all(c.passed for c in verdict.comparisons) and not verdict.correct
  overflow, underflow, spiked = verdict.failures(SEEDS)
  assert overflow.startswith("input family shifted (x + 100), seed 1: ")
  assert underflow.startswith("input family shifted_down (x - 100), seed 2: ")
  assert spiked.startswith("input family spiked (x with one element per row set to 100), "
                           "seed 2: ")
  assert "NaN/Inf" in overflow and "NaN/Inf" in underflow and "NaN/Inf" in spiked
  assert [what for what, _ in verdict.other_comparisons] == [
      "input family shifted (x + 100), seed 1", "input family shifted_down (x - 100), seed 2",
      "input family peaked (x * 10), seed 1",
      "input family spiked (x with one element per row set to 100), seed 2"]
  honest = checks.run_candidate(jax.jit(SOFTMAX.reference), SOFTMAX, TINY, SEEDS, on_gpu=False,
                                edge=None)
  assert checks.judge_outputs(honest, SOFTMAX, TINY, None).correct


def test_family_outputs_are_the_kernels_on_the_family_inputs():
  runs = checks.run_candidate(jax.jit(RELU.reference), RELU, TINY, SEEDS, on_gpu=False, edge=None)
  (scaled,) = runs.family_outputs
  want = RELU.reference(*RELU.family_inputs(RELU.family("scaled"), TINY, SEEDS[0]))
  np.testing.assert_array_equal(scaled, want)


def test_wrong_at_the_edge_shape_is_incorrect_a_refusal_is_not():
  relu = jax.jit(RELU.reference)
  right = checks.run_candidate(relu, RELU, TINY, SEEDS, on_gpu=False, edge=(relu, TINY_EDGE))
  good = checks.judge_outputs(right, RELU, TINY, TINY_EDGE)
  assert good.correct and good.general_shapes is True and good.failures(SEEDS) == []

  garbage = dataclasses.replace(right, edge_output=right.edge_output.at[0].set(jnp.nan))
  wrong = checks.judge_outputs(garbage, RELU, TINY, TINY_EDGE)
  assert not wrong.correct and wrong.general_shapes is False and wrong.rejections == ()
  (failure,) = wrong.failures(SEEDS)
  assert failure.startswith("edge shape {'N': 3, 'M': 5}, seed 1: 5 of 15 elements are NaN")

  refused = dataclasses.replace(right, edge_output=None, edge_error="ValueError: no")
  verdict = checks.judge_outputs(refused, RELU, TINY, TINY_EDGE)
  assert verdict.correct and verdict.general_shapes is False and verdict.failures(SEEDS) == []
  assert verdict.edge_error == "edge shape {'N': 3, 'M': 5}: ValueError: no"


def test_the_agent_prompt_states_the_atol_rule_and_the_families():
  from pallasbench_dataset.evolve import prompt  # pylint: disable=import-outside-toplevel
  text = prompt.describe(SOFTMAX, "gpu")
  assert "allclose(rtol=0.0001, atol=0.0001 x RMS(reference))" in text
  assert SOFTMAX.family("shifted").description in text
  assert get_task("one_hot").family("out_of_range").description in prompt.describe(
      get_task("one_hot"), "gpu")


# ---------------------------------------------------------------------------------------------
# The transforms beyond affine maps

def test_out_of_range_ids_span_the_whole_int32_range():
  """Out-of-range ids of every bit length and both signs, the extremes among them, so that a
  range test exact only for some band (a mask of low bits) fails; in-range ids are kept."""
  spec = get_task("one_hot")
  family = spec.family("out_of_range")
  (nominal,) = (np.asarray(x) for x in spec.make_inputs(Size.SMALL, SEED))
  (ids,) = (np.asarray(x) for x in spec.family_inputs(family, Size.SMALL, SEED))
  outside = ids[(ids < 0) | (ids >= 1024)].astype(np.int64)
  assert {INT32_MIN, -1, 1024, INT32_MAX} <= set(outside.tolist())
  assert 0.15 < outside.size / ids.size < 0.4
  assert outside.min() < -(1 << 24) and outside.max() > (1 << 24)
  assert ((outside & 2047) < 1024).any()        # a low-bits range test lights a column here
  kept = (ids >= 0) & (ids < 1024)
  np.testing.assert_array_equal(ids[kept & (ids == nominal)], nominal[kept & (ids == nominal)])
  (other,) = (np.asarray(x) for x in spec.family_inputs(family, Size.SMALL, SEED + 1))
  assert not np.array_equal((ids < 0) | (ids >= 1024), (other < 0) | (other >= 1024))


def test_spikes_end_ids_hard_labels_and_copies_change_only_what_they_say():
  fused, gather = get_task("fused_softmax_cross_entropy"), get_task("embedding_lookup")
  logits = np.asarray(fused.family_inputs(fused.family("spiked"), Size.SMALL, SEED)[0])
  assert np.array_equal((logits == 100.0).sum(axis=1), np.ones(logits.shape[0]))
  nominal = np.asarray(fused.make_inputs(Size.SMALL, SEED)[0])
  np.testing.assert_array_equal(logits[logits != 100.0], nominal[logits != 100.0])
  v = gather.dims(Size.SMALL)["V"]
  ids = np.asarray(gather.family_inputs(gather.family("end_ids"), Size.SMALL, SEED)[1])
  moved = ids != np.asarray(gather.make_inputs(Size.SMALL, SEED)[1])
  assert moved.any() and set(ids[moved].tolist()) <= {0, v - 1}
  bce = get_task("sigmoid_bce").at_precision(BFLOAT16)
  z, t = bce.family_inputs(bce.family("saturated_hard"), Size.SMALL, SEED)
  assert set(np.unique(np.asarray(t, np.float32)).tolist()) == {0.0, 1.0}
  assert np.abs(np.asarray(z, np.float32)).max() > 88
  block = get_task("transformer_block")
  inputs = block.family_inputs(block.family("self_matched"), Size.SMALL, SEED)
  np.testing.assert_array_equal(inputs[1], inputs[2] * np.float32(20.0))
  assert [f.formula for f in (fused.family("spiked"), gather.family("end_ids"),
                              bce.family("saturated_hard"), block.family("self_matched"))] == [
      "logits with one element per row set to 100", "ids with 50% at 0 or V - 1",
      "logits * 30, round(targets)", "wq = wk * 20"]


def test_zero_rows_of_one_family_share_their_rows_and_follow_the_seed():
  spec = get_task("rmsnorm_residual")
  family = spec.family("zero_rows")
  assert all(isinstance(t, ZeroRows) for t in family.transforms)
  x, residual = (np.asarray(a) for a in spec.family_inputs(family, Size.SMALL, SEED))
  zero = ~x.any(axis=1)
  np.testing.assert_array_equal(zero, ~residual.any(axis=1))
  assert zero[0] and 0.1 < zero.mean() < 0.45
  nominal = np.asarray(spec.make_inputs(Size.SMALL, SEED)[0])
  np.testing.assert_array_equal(x[~zero], nominal[~zero])
  other = np.asarray(spec.family_inputs(family, Size.SMALL, SEED + 1)[0])
  assert not np.array_equal(zero, ~other.any(axis=1))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_matched_queries_overflow_exp_and_leave_one_hot_rows(precision):
  """Each query points along one key: its score is far past exp's overflow at 88.7 in most
  rows, and each row of the softmax is one-hot, whatever rounding the scores carry."""
  spec = get_task("qk_softmax").at_precision(precision)
  family = spec.family("matched")
  assert isinstance(family.transforms[0], MatchedRows)
  q, k = spec.family_inputs(family, Size.SMALL, SEED)
  scores = np.asarray(q, np.float64) @ np.asarray(k, np.float64).T / np.sqrt(q.shape[1])
  assert np.mean(scores.max(axis=1) > 88.8) > 0.8
  top2 = np.sort(scores, axis=1)[:, -2:]
  assert np.min(top2[:, 1] - top2[:, 0]) > 15   # the second term is below e^-15
  assert np.min(np.asarray(spec.expected(q, k), np.float32).max(axis=1)) > 0.999


# ---------------------------------------------------------------------------------------------
# Kernels right only on the nominal band fail on the families; the baseline passes them

def _softmax_rows(s):
  e = jnp.exp(s)
  return e / jnp.sum(e, axis=-1, keepdims=True)


def _scores(q, k):
  return jnp.dot(q, k.T, preferred_element_type=jnp.float32) * q.shape[-1] ** -0.5


def _bit_exp(x):
  """exp with 2^n built from exponent bits and n never clamped."""
  n = jnp.floor(x * 1.4426950408889634 + 0.5)
  r = x - n * 0.6931471805599453
  p = 1 + r * (1 + r * (0.5 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r / 720)))))
  return p * jax.lax.bitcast_convert_type((n.astype(jnp.int32) + 127) << 23, jnp.float32)


def _naive_bce(z, t):
  p = jax.nn.sigmoid(z.astype(jnp.float32))
  t = t.astype(jnp.float32)
  return (-(t * jnp.log(p) + (1 - t) * jnp.log(1 - p))).astype(z.dtype)


def _norm_no_eps(x):
  x32 = x.astype(jnp.float32)
  c = x32 - jnp.mean(x32, axis=-1, keepdims=True)
  return (c / jnp.sqrt(jnp.mean(c * c, axis=-1, keepdims=True))).astype(x.dtype)


def _log_of_softmax(x):
  x32 = x.astype(jnp.float32)
  return jnp.log(jax.nn.softmax(x32, axis=-1)).astype(x.dtype)


def _soft_loss_of_log_of_softmax(logits, labels):
  probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
  return (-jnp.sum(labels.astype(jnp.float32) * jnp.log(probs), axis=-1)).astype(logits.dtype)


def _expanded_mse(p, t):
  p, t = p.astype(jnp.float32), t.astype(jnp.float32)
  return jnp.mean(p * p, -1) + jnp.mean(t * t, -1) - 2 * jnp.mean(p * t, -1)


def _distance_by_norms(x):
  x32 = x.astype(jnp.float32)
  norms = jnp.sum((x32 * x32)[:, ::-1], axis=-1)  # summed in another order than the dot's
  dots = jnp.dot(x32, x32.T, precision=jax.lax.Precision.HIGHEST)
  squared = jnp.maximum(norms[:, None] + norms[None, :] - 2 * dots, 0.0)
  return jnp.sqrt(squared + 1e-8).astype(x.dtype)


def _pwm_by_base_code(seq, pwm):
  width = pwm.shape[1]
  codes = jnp.sum(seq.astype(jnp.int32) * jnp.arange(4), axis=-1)
  weights = pwm.astype(jnp.float32)[codes]  # (L, W): the weight of each position's base
  positions = seq.shape[0] - width + 1
  return sum(weights[j:j + positions, j] for j in range(width))


CHEATS = {
    # name: (task, precision, the kernel, the family it must fail on)
    "nomax_qk_softmax": ("qk_softmax", "float32",
                         lambda q, k: _softmax_rows(_scores(q, k)).astype(q.dtype), "matched"),
    "nomax_qk_softmax_bf16": ("qk_softmax", "bfloat16",
                              lambda q, k: _softmax_rows(_scores(q, k)).astype(q.dtype), "matched"),
    "nomax_attention_bf16": ("flash_attention", "bfloat16", lambda q, k, v: jnp.dot(
        _softmax_rows(_scores(q, k)), v.astype(jnp.float32)).astype(q.dtype), "matched"),
    "nomax_mha": ("multi_head_attention", "float32", lambda q, k, v: jax.vmap(
        lambda a, b, c: _softmax_rows(_scores(a, b)) @ c)(q, k, v), "matched"),
    "nomax_fused_loss_bf16": ("fused_softmax_cross_entropy", "bfloat16", lambda x, labels: (
        jnp.log(jnp.sum(jnp.exp(x.astype(jnp.float32)), axis=-1))
        - jnp.take_along_axis(x, labels[:, None], axis=-1)[:, 0]).astype(x.dtype), "spiked"),
    "exp_no_underflow": ("exp", "float32", _bit_exp, "underflow"),
    "naive_bce_bf16": ("sigmoid_bce", "bfloat16", _naive_bce, "saturated_hard"),
    "cosine_no_eps": ("cosine_sim", "float32", lambda x, y: jnp.sum(x * y, axis=-1) / (
        jnp.linalg.norm(x, axis=-1) * jnp.linalg.norm(y, axis=-1)), "zero_rows"),
    "layernorm_no_eps_bf16": ("layernorm", "bfloat16", _norm_no_eps, "zero_rows"),
    "log_no_eps": ("log", "float32", jnp.log, "zeros"),
    "rsqrt_no_eps": ("rsqrt", "float32", jax.lax.rsqrt, "zeros"),
    "tanh_by_exp": ("tanh", "float32",
                    lambda x: (jnp.exp(2 * x) - 1) / (jnp.exp(2 * x) + 1), "small"),
    "one_hot_low_bits": ("one_hot", "float32", lambda ids: (
        (ids[:, None] & 2047) == jnp.arange(1024)).astype(jnp.float32), "out_of_range"),
    # red team round 11: regions no family reached before
    "log_of_softmax": ("log_softmax", "float32", _log_of_softmax, "spiked"),
    "log_of_softmax_bf16": ("log_softmax", "bfloat16", _log_of_softmax, "spiked"),
    "log_of_softmax_loss": ("cross_entropy", "float32", _soft_loss_of_log_of_softmax, "spiked"),
    "log_of_softmax_loss_bf16": ("cross_entropy", "bfloat16", _soft_loss_of_log_of_softmax,
                                 "spiked"),
    "expanded_mse": ("mse_loss", "float32", _expanded_mse, "near"),
    "distance_by_norms": ("pairwise_distance", "float32", _distance_by_norms, "shifted"),
    "pwm_by_base_code": ("pwm_scan", "float32", _pwm_by_base_code, "unknown_bases"),
    "pwm_by_base_code_bf16": ("pwm_scan", "bfloat16", _pwm_by_base_code, "unknown_bases"),
}


@pytest.mark.parametrize("name", list(CHEATS))
def test_a_kernel_right_only_on_the_nominal_band_fails_on_its_family(name):
  """Each cheat passes every nominal seed and fails exactly where its formula breaks, at the
  precision named; the baseline, run the same way, passes every family."""
  task, precision, cheat, family = CHEATS[name]
  spec = get_task(task).at_precision(precision)
  dims = spec.dims(Size.SMALL)
  runs = checks.run_candidate(jax.jit(cheat), spec, dims, SEEDS, on_gpu=False, edge=None)
  verdict = checks.judge_outputs(runs, spec, dims, None)
  assert all(c.passed for c in verdict.comparisons), verdict.failures(SEEDS)
  assert not verdict.correct
  failed = {what.split(" (")[0] for what, c in verdict.other_comparisons if not c.passed}
  assert f"input family {family}" in failed, verdict.failures(SEEDS)
  honest = checks.run_candidate(jax.jit(spec.reference), spec, dims, SEEDS, on_gpu=False,
                                edge=None)
  assert checks.judge_outputs(honest, spec, dims, None).correct


def test_a_float32_contraction_carrying_bfloat16_precision_fails():
  """A float32 matmul whose output is rounded to bfloat16 fails by the relative L2 bound on
  the nominal draw; one whose operands are rounded to TF32 (a GPU's default) passes."""
  spec = get_task("matmul")
  inputs = spec.make_inputs(Size.SMALL, SEED)
  want = spec.expected(*inputs)
  rounded = compare((inputs[0] @ inputs[1]).astype(jnp.bfloat16).astype(jnp.float32), want,
                    spec.tolerance)
  assert not rounded.passed and rounded.reason.startswith("relative L2 error")
  tf32 = [jax.lax.reduce_precision(x, 8, 10) for x in inputs]
  assert compare(tf32[0] @ tf32[1], want, spec.tolerance).passed
