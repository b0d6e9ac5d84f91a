"""The judge's own logic, driven in this process with injected kernels, timings and platforms.

Paths that only a GPU reaches (poisoned and sentinel outputs, donated inputs, ceilings) and
the order of candidate and reference runs are exercised here on the CPU, so a judge that
loses one of its checks fails a test without a GPU.
"""

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset.evaluation import protocol
from pallasbench_dataset.evaluation.judge import checks
from pallasbench_dataset.evaluation.judge import core as judge
from pallasbench_dataset.evaluation.judge import timing
from pallasbench_dataset.evaluation.judge.ceilings import NOT_MEASURED, Ceilings
from pallasbench_dataset.evaluation.judge.environment import capture
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.schema import ErrorType, Status
from pallasbench_dataset.tasks import Size, get_task
from pallasbench_dataset.tolerance import TOLERANCES, ToleranceClass, compare

RELU = get_task("relu")
DIMS = RELU.dims(Size.SMALL)
OPTIONS = judge.EvalOptions(seeds=(3, 4, 5), check_edge=True, timing_iterations=8,
                            timing_rounds=2, warmup=1)


def _ctx(ceilings=NOT_MEASURED) -> judge.Context:
  return judge.Context(environment=capture(None), ceilings=ceilings,
                       timing_method=timing.TimingMethod.WALLCLOCK, l2_bytes=1 << 20, dump_dir=None)


def _reference(spec=RELU):
  return jax.jit(spec.reference)


# ---------------------------------------------------------------------------------------------
# Tolerances: the limits themselves are pinned by outputs just inside and just outside them.

@pytest.mark.parametrize("kind", list(ToleranceClass))
def test_tolerance_passes_inside_and_fails_outside(kind):
  tol = TOLERANCES[kind]
  ref = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
  bound = tol.atol + tol.rtol * np.abs(ref)
  inside = (ref + 0.5 * bound * (np.arange(ref.size) == 7)).astype(np.float32)  # one element
  outside = (ref + 2.0 * bound * (np.arange(ref.size) == 7)).astype(np.float32)
  assert compare(inside, ref, tol).passed
  result = compare(outside, ref, tol)
  assert not result.passed and "1 of 4096 elements off" in result.reason


def test_matmul_tolerance_bounds_the_relative_l2_error():
  """Every element within allclose, but a systematic error the L2 limit must catch."""
  tol = TOLERANCES[ToleranceClass.MATMUL]
  ref = np.random.default_rng(1).standard_normal(4096).astype(np.float32)
  out = (ref + 0.9 * tol.atol).astype(np.float32)
  result = compare(out, ref, tol)
  assert not result.passed and "relative L2 error" in result.reason
  assert result.rel_l2_error > tol.max_rel_l2


def test_compare_fails_nan_where_the_reference_is_finite():
  ref = np.ones(16, np.float32)
  out = ref.copy()
  out[3] = np.nan
  assert "NaN/Inf" in compare(out, ref, TOLERANCES[ToleranceClass.EXACT]).reason


# ---------------------------------------------------------------------------------------------
# The candidate's runs, with the GPU-only checks switched on.

def _verdict(fn, *, on_gpu=True, edge=None, spec=RELU):
  runs = checks.run_candidate(fn, spec, DIMS, OPTIONS.seeds, on_gpu=on_gpu, edge=edge)
  return runs, checks.judge_outputs(runs, spec, DIMS, edge[1] if edge else None)


def test_honest_kernel_passes_every_runtime_check():
  runs, verdict = _verdict(_reference())
  assert runs.unwritten == 0 and runs.mutated == ()
  assert verdict.correct and verdict.rejections == () and all(f.passed for f in verdict.filters)


def test_sentinel_left_in_the_output_is_reported_as_unwritten():
  """On a GPU the allocator hands the output a buffer full of the sentinel; a kernel that skips
  elements leaves it there. Simulated: the function returns the sentinel where it wrote nothing."""
  relu = _reference()

  def half_written(x):
    rows = jnp.arange(x.shape[0])[:, None] < x.shape[0] // 2
    return jnp.where(rows, relu(x), jnp.float32(checks.SENTINEL))
  runs, verdict = _verdict(half_written)
  assert runs.unwritten == RELU.output_shape(DIMS)[0] // 2 * RELU.output_shape(DIMS)[1]
  assert any("elements left unwritten" in r for r in verdict.rejections)
  assert not verdict.correct


def test_poisoned_output_fails_the_comparison():
  relu = _reference()
  runs, verdict = _verdict(lambda x: relu(x).at[0, 0].set(checks.POISON))
  assert not verdict.correct and "NaN/Inf" in verdict.comparisons[0].reason


def test_donated_input_is_reported():
  relu = _reference()

  def donating(x):
    out = relu(x)
    jax.block_until_ready(out)
    x.delete()
    return out
  runs, verdict = _verdict(donating)
  assert runs.mutated == ("input x was donated (deleted) by the kernel",)
  assert runs.mutated[0] in verdict.rejections


def test_replayed_output_is_reported_as_cached():
  relu = _reference()
  first = []

  def replaying(x):
    first.append(first[0] if first else relu(x))
    return jnp.array(first[-1])
  _, verdict = _verdict(replaying)
  assert any("output cached across calls" in r for r in verdict.rejections)


def test_edge_shape_is_compared_and_reported_without_rejecting():
  relu = _reference()
  edge_dims = RELU.dims(Size.EDGE)
  _, good = _verdict(relu, edge=(relu, edge_dims))
  assert good.general_shapes is True and good.edge_error is None
  _, bad = _verdict(relu, edge=(lambda x: relu(x) + 1.0, edge_dims))
  assert bad.general_shapes is False and "edge shape" in bad.edge_error
  assert not bad.correct and bad.rejections == ()  # wrong there: incorrect, not rejected


def test_wrong_output_structure_is_an_output_error():
  with pytest.raises(checks.OutputError, match="expected one array"):
    _verdict(lambda x: (x, x), on_gpu=False)


def test_candidate_runs_finish_before_any_reference_exists(monkeypatch):
  """The candidate's program can read device memory: no expected output may exist while it runs."""
  order = []
  relu = _reference()
  expected = checks.expected

  def candidate(x):
    order.append("candidate")
    return relu(x)

  def reference(spec, inputs):
    order.append("reference")
    return expected(spec, inputs)
  monkeypatch.setattr(checks, "expected", reference)
  _verdict(candidate, edge=(candidate, RELU.dims(Size.EDGE)))
  assert order.index("reference") > len(order) - 1 - order[::-1].index("candidate")


# ---------------------------------------------------------------------------------------------
# Timing: direction of the speedup, timed outputs, ceilings.

def _timed(executable, ceilings=NOT_MEASURED):
  state = judge._State(fields={})  # pylint: disable=protected-access
  judge._time_and_roofline(executable, RELU, DIMS, OPTIONS, _ctx(ceilings), state)  # pylint: disable=protected-access
  return state.fields


def test_speedup_is_baseline_time_over_candidate_time():
  relu = _reference()

  def slow(x):
    time.sleep(0.004)
    return relu(x)
  fields = _timed(slow)
  assert fields["status"] is Status.PASS and fields["timed_outputs_checked"] == 3
  assert fields["runtime_ms"] > fields["baseline_ms"] and fields["speedup"] < 1
  assert fields["speedup"] == pytest.approx(fields["baseline_ms"] / fields["runtime_ms"])


def test_timing_adds_the_eager_baseline_and_the_seconds_of_each_part():
  state = judge._State(fields={})  # pylint: disable=protected-access
  start = time.perf_counter()
  judge._time_and_roofline(_reference(), RELU, DIMS, OPTIONS, _ctx(NOT_MEASURED), state)  # pylint: disable=protected-access
  wall_s = time.perf_counter() - start
  fields, seconds = state.fields, state.seconds
  assert fields["eager_baseline_ms"] > 0 and len(fields["eager_baseline_samples_ms"]) > 1
  assert fields["speedup_eager"] == pytest.approx(fields["eager_baseline_ms"] / fields["runtime_ms"])
  assert seconds["timing_s"] > 0 and seconds["eager_s"] > 0
  assert seconds["timing_s"] + seconds["eager_s"] <= wall_s


def test_timed_outputs_are_checked():
  """Correct while warmed up, wrong on every timed call: caught whichever calls are sampled."""
  relu = _reference()
  calls = []

  def lazy_when_timed(x):
    calls.append(1)
    return relu(x) if len(calls) <= OPTIONS.warmup else jnp.zeros_like(x)
  fields = _timed(lazy_when_timed)
  assert fields["status"] is Status.REJECTED
  assert any("computes differently when timed" in r for r in fields["reasons"])


def test_a_ceiling_below_the_baseline_is_raised_to_the_baselines_rate():
  """A measured ceiling below what XLA reached in the same evaluation is not the limit: XLA's
  rate is (the reference timed as the candidate is held against it, not rejected by a tiny
  ceiling; rejections above a ceiling: tests/judge/test_building_blocks.py, with injected
  timings)."""
  tiny = Ceilings(copy_gbps=1e-6, read_gbps=None, matmul_tflops=None, method="test")
  fields = _timed(_reference(), tiny)
  roof = fields["roofline"]
  assert roof.ceiling_gbps_source == "baseline" and roof.ceiling_method == "test"
  assert roof.ceiling_gbps == pytest.approx(RELU.min_bytes(DIMS) / fields["baseline_ms"] / 1e6)


def test_candidate_and_baseline_never_share_input_buffers(monkeypatch):
  seen = []
  real = timing.time_interleaved

  def spy(fns, sets, **kw):
    seen.append(sets)
    return real(fns, sets, **kw)
  monkeypatch.setattr(timing, "time_interleaved", spy)
  _timed(_reference())
  kernel_sets, baseline_sets = seen[0]
  assert kernel_sets is not baseline_sets
  kernel_seeds = set(kernel_sets._given.values())  # pylint: disable=protected-access
  assert kernel_seeds and not kernel_seeds & set(baseline_sets._given.values())  # pylint: disable=protected-access


# ---------------------------------------------------------------------------------------------
# Artifacts: the judge believes nothing but bytes that implement the task's interface.

def _exported(platform="cpu", size=Size.SMALL, task="relu"):
  spec = get_task(task)
  fn = functools.partial(load_kernel("gpu", task).kernel, interpret=platform == "cpu")
  structs = [jax.ShapeDtypeStruct(i.concrete_shape(spec.dims(size)), i.dtype) for i in spec.inputs]
  return export_for(platform, fn, *structs).serialize()


def test_artifact_checks_refuse_what_does_not_implement_the_task():
  with pytest.raises(judge.Failure, match="header does not read"):
    judge.load_artifact(b"\x00garbage", RELU, DIMS, "cpu")
  with pytest.raises(judge.Failure, match="inputs .* differ"):
    judge.load_artifact(_exported(size=Size.MEDIUM), RELU, DIMS, "cpu")
  with pytest.raises(judge.Failure, match="not cpu"):
    judge.load_artifact(_exported("cuda"), RELU, DIMS, "cpu")
  with pytest.raises(judge.Failure, match="inputs .* differ"):
    judge.load_artifact(_exported(task="add"), RELU, DIMS, "cpu")
  assert judge.load_artifact(_exported(), RELU, DIMS, "cpu").in_avals[0].shape == DIMS_SHAPE()


def DIMS_SHAPE():
  return RELU.input_shapes(DIMS)[0]


def _outcome(artifacts: dict, errors=None, size="small", **report):
  entry = protocol.SizeExport(size=size, artifacts=artifacts, errors=errors or {}, stage=None,
                              trace_s=0.01, lower_s=0.02)
  fields = dict(load_error=None, exports=(entry,), jaxpr=None, pallas_calls=(), input_writes=(),
                triton_ir=(), lowers_tpu=None, tpu_error=None)
  fields.update(report)
  return protocol.ExportOutcome(report=protocol.ExportReport(**fields), failure=None, message=None,
                                output="", layers=("test",), wall_s=0.1)


def _judge(outcome, options=dataclasses.replace(OPTIONS, check_edge=False)):
  item = judge.JudgeItem(task="relu", variant="candidate", size="small", kernel_sha256="0" * 64,
                         export=outcome, options=options)
  record, _ = judge.evaluate_artifact(item, _ctx())
  return record


def test_judge_passes_an_honest_artifact_in_this_process():
  record = _judge(_outcome({"cuda": _exported("cuda"), "cpu": _exported()}))
  assert record.status is Status.PASS and record.reasons == () and record.judge_version == judge.JUDGE_VERSION == "4"
  assert record.compile.exporter_reported and record.compile.compile_s > 0
  assert record.compile.trace_s == 0.01 and record.sandbox == ("test",)


def test_a_cpu_artifact_without_a_device_export_is_not_believed():
  record = _judge(_outcome({"cpu": _exported()}, errors={"cuda": "LoweringError: x"}))
  assert record.status is Status.REJECTED
  assert any("structure cannot be checked" in r for r in record.reasons)


def test_exporter_claims_can_only_add_rejections():
  record = _judge(_outcome({"cuda": _exported("cuda"), "cpu": _exported()},
                           input_writes=("relu: input 0",)))
  assert record.status is Status.REJECTED and "inputs mutated in place" in record.reasons[0]


def test_export_failures_become_records():
  for failure, status, error_type in (("timeout", Status.TIMEOUT, ErrorType.TIMEOUT),
                                      ("over_budget", Status.REJECTED, ErrorType.TIMEOUT),
                                      ("violation", Status.REJECTED, None),
                                      ("malformed", Status.REJECTED, None),
                                      ("crash", Status.ERROR, ErrorType.CRASH),
                                      ("memory", Status.ERROR, ErrorType.OUT_OF_MEMORY)):
    outcome = protocol.ExportOutcome(report=None, failure=failure, message=f"{failure} happened",
                                     output="", layers=(), wall_s=0.0)
    record = _judge(outcome)
    assert (record.status, record.error_type) == (status, error_type), failure
    assert record.reasons == (f"{failure} happened",)


def test_nan_in_the_reference_does_not_hide_the_worst_element():
  ref = np.array([np.nan, 1.0, 2.0], np.float32)
  out = np.array([np.nan, 5.0, 2.0], np.float32)
  result = compare(out, ref, TOLERANCES[ToleranceClass.EXACT])
  assert "worst at index (1,), got 5, expected 1" in result.reason
  assert result.max_rel_error == pytest.approx(4.0)


def test_a_structure_rejection_ends_the_evaluation_before_compiling(monkeypatch):
  """Rejected on what it exported, the kernel is never compiled or run: a run that would have
  failed leaves the verdict as it was."""
  def never(*_, **__):
    pytest.fail("a rejected artifact reached the compiler or the device")
  monkeypatch.setattr(judge, "compile_exported", never)
  monkeypatch.setattr(checks, "run_candidate", never)
  record = _judge(_outcome({"cuda": _exported("cuda"), "cpu": _exported()},
                           input_writes=("relu: input 0",)))
  assert record.status is Status.REJECTED and record.error_type is None
  assert record.reasons == ("the kernel writes to its input refs (relu: input 0): inputs "
                            "mutated in place",), record.reasons
