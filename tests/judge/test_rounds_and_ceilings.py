"""The judge's timing rounds and copy ceilings: which timed outputs are checked, the input
snapshot, the ABBA order of timing rounds, the label of a kept timed output, and the bytes a
copy ceiling counts.

Each test drives the real code (timing rounds with Python stand-ins for the compiled kernel,
the candidate checks on a tiny relu) and asserts what the behaviour is for, not how it is
written. They run in this process on the CPU, in a second or so together.
"""

import ctypes
import dataclasses
import types

import jax
import jax.numpy as jnp
import pytest

from pallasbench_dataset import filters
from pallasbench_dataset.evaluation.judge import ceilings, checks, timing
from pallasbench_dataset.evaluation.judge import core as judge
from pallasbench_dataset.evaluation.judge.ceilings import NOT_MEASURED
from pallasbench_dataset.evaluation.judge.environment import capture
from pallasbench_dataset.schema import Status
from pallasbench_dataset.tasks import get_task

RELU = get_task("relu")
TINY = types.MappingProxyType({"N": 8, "M": 16})  # relu at 8x16: 64 input sets fit in the L2 below


def _timed(executable, *, iterations: int, platform: str | None = None, **options) -> dict:
  """The judge's timing step on `executable` (the compiled kernel's stand-in), wall clock;
  `platform` "gpu": as a GPU judge decides what to check (the calls still run here)."""
  environment = capture(None)
  if platform:
    environment = dataclasses.replace(environment, platform=platform)
  ctx = judge.Context(environment=environment, ceilings=NOT_MEASURED, l2_bytes=1 << 20,
                      timing_method=timing.TimingMethod.WALLCLOCK, dump_dir=None)
  opts = judge.EvalOptions(timing_iterations=iterations, timing_rounds=2, warmup=1, **options)
  state = judge._State(fields={})  # pylint: disable=protected-access
  judge._time_and_roofline(executable, RELU, TINY, opts, ctx, state)  # pylint: disable=protected-access
  return state.fields


def _kept_calls(monkeypatch) -> list[frozenset[int]]:
  """The calls whose outputs the judge asks timing to keep, one set per timed candidate."""
  keeps = []
  real = timing.time_interleaved

  def spy(fns, sets, **kw):
    keeps.extend(kw.get("keep", ()))
    return real(fns, sets, **kw)
  monkeypatch.setattr(timing, "time_interleaved", spy)
  return keeps


def test_checked_timed_outputs_are_a_secret_sample_not_the_first_calls(monkeypatch):
  """A kernel honest on its warm-up and first three timed calls, lazy on the other 97: caught
  unless the sample is exactly the first three (1 in 161,700). And two evaluations draw other
  samples: a fixed draw could be learnt."""
  relu = jax.jit(RELU.reference)
  calls = []

  def honest_first(x):
    calls.append(1)
    return relu(x) if len(calls) <= 1 + judge.MIN_TIMED_OUTPUTS_CHECKED else jnp.zeros_like(x)
  keeps = _kept_calls(monkeypatch)
  fields = _timed(honest_first, iterations=100)
  assert fields["status"] is Status.REJECTED, fields["reasons"]
  assert any("computes differently when timed" in r for r in fields["reasons"])
  _timed(relu, iterations=100)
  first, second = keeps
  assert len(first) == len(second) == judge.MIN_TIMED_OUTPUTS_CHECKED
  assert first != second


def test_a_gpu_judge_checks_every_timed_output_its_host_budget_holds(monkeypatch):
  """State kept across calls can count them: a kernel honest through the correctness runs and
  the first timed calls, then fast and wrong on just over half (enough to move the median)
  escaped three checked calls 1 time in 10. Where timings earn a speedup (a GPU), every timed
  output that fits the host budget is checked: here all 40, so a kernel wrong on its last call
  alone is caught every time; on a CPU judge, three, as before."""
  relu = jax.jit(RELU.reference)
  made = []

  def wrong_at_the_end(x):
    made.append(1)
    return relu(x) if len(made) < 1 + 40 else jnp.zeros_like(x)
  keeps = _kept_calls(monkeypatch)
  flushes = []
  monkeypatch.setattr(timing.L2Flush, "__call__", lambda self: flushes.append(1))
  fields = _timed(wrong_at_the_end, iterations=40, platform="gpu")
  assert keeps[-1] == frozenset(range(40)) and fields["timed_outputs_checked"] == 40
  assert fields["timing_l2_resident"] is False and len(flushes) >= 2 * 41  # each call's inputs
  assert fields["status"] is Status.REJECTED
  assert fields["reasons"] == (fields["reasons"][0],) and fields["reasons"][0].startswith(
      "timed call 39 returned a wrong output"), fields["reasons"]
  made.clear()
  assert _timed(relu, iterations=40, platform="gpu")["status"] is Status.PASS
  assert _timed(relu, iterations=40)["timed_outputs_checked"] == judge.MIN_TIMED_OUTPUTS_CHECKED


def test_a_gpu_judge_flushes_the_l2_before_every_call_of_the_eager_baseline_too(monkeypatch):
  """The eager baseline is timed like the kernel and the jitted baseline: on a GPU each of its
  calls (warm-up included) starts from a flushed L2, or its column would read cached inputs."""
  relu = jax.jit(RELU.reference)
  flushes, eager_at = [], []
  monkeypatch.setattr(timing.L2Flush, "__call__", lambda self: flushes.append(1))
  real = judge._eager_fields  # pylint: disable=protected-access

  def eager(*args):
    eager_at.append(len(flushes))
    return real(*args)
  monkeypatch.setattr(judge, "_eager_fields", eager)
  fields = _timed(relu, iterations=6, platform="gpu")
  assert fields["eager_baseline_ms"] > 0 and eager_at == [2 * (6 + 1)]
  assert len(flushes) == 3 * (6 + 1)


@pytest.mark.parametrize("output_bytes, iterations, comparable, checked", [
    (64 << 20, 50, True, 50),     # matmul at large: every call
    (128 << 20, 50, True, 32),    # linear_bias_relu at large: 4 GiB of copies
    (1 << 30, 50, True, 4),
    (1000 << 20, 50, True, 4),    # a whole number of copies: 4 GiB / 1000 MiB is 4.096
    (3 << 30, 50, True, 3),       # never fewer than three
    (1 << 30, 2, True, 2),        # never more than the calls
    (4, 50, False, 3),            # interpret mode: three
    (4, 2, False, 2)])
def test_the_timed_outputs_checked_fill_the_host_budget_on_a_gpu_only(
    output_bytes, iterations, comparable, checked):
  assert judge.timed_outputs_checked(output_bytes, iterations, comparable=comparable) == checked


def _write_in_place(x: jax.Array, value: float) -> None:
  """What a GPU kernel writing its input ref does: the input's own buffer changes (here the
  CPU buffer, through its address)."""
  jax.block_until_ready(x)
  data = (ctypes.c_float * x.size)(*([value] * x.size))
  ctypes.memmove(x.unsafe_buffer_pointer(), data, ctypes.sizeof(data))


def test_input_snapshot_is_a_copy_so_an_input_written_in_place_is_caught():
  relu = jax.jit(RELU.reference)

  def overwrites_its_input(x):
    out = jax.block_until_ready(relu(x))
    _write_in_place(x, 7.0)
    return out
  runs = checks.run_candidate(overwrites_its_input, RELU, TINY, (1, 2), on_gpu=False, edge=None)
  assert runs.mutated == ("input x was mutated in place",)
  assert checks.run_candidate(relu, RELU, TINY, (1, 2), on_gpu=False, edge=None).mutated == ()


def test_timed_calls_that_rewrite_their_inputs_are_rejected():
  """A kernel right on each set's first call that then zeroes the set (its later calls on it
  return relu(0) = 0, right for the buffers it was given): rejected, since the kept outputs are
  checked against their sets drawn again, and the sets against what their seeds draw."""
  relu = jax.jit(RELU.reference)

  def zeroes_what_it_read(x):
    out = jax.block_until_ready(relu(x))
    _write_in_place(x, 0.0)
    return out
  fields = _timed(zeroes_what_it_read, iterations=40)
  assert fields["status"] is Status.REJECTED
  assert any("a kernel's inputs are read-only" in r for r in fields["reasons"]), fields["reasons"]
  assert _timed(relu, iterations=40)["status"] is Status.PASS


def test_a_warm_up_call_that_rewrites_its_input_is_named_as_that_warm_up_call():
  """The reason names the call whose input set changed: the one warm-up call is warm-up call 0
  (counted from the first warm-up, as the timed calls are from the first timed one)."""
  relu = jax.jit(RELU.reference)
  calls = []

  def zeroes_its_first_input(x):
    out = jax.block_until_ready(relu(x))
    if not calls:
      _write_in_place(x, 0.0)
    calls.append(1)
    return out
  fields = _timed(zeroes_its_first_input, iterations=4)
  assert fields["status"] is Status.REJECTED
  assert len(fields["reasons"]) == 1 and fields["reasons"][0].startswith(
      "the input set of warm-up call 0 was changed by the timed calls"), fields["reasons"]


def test_while_the_kernel_runs_none_of_the_baseline_s_inputs_exist(monkeypatch):
  """On a GPU a kernel's refs are raw pointers: one could read or write the baseline's inputs
  (to slow it down, or to change what it computes) if they were alive beside its own. Each of
  the baseline's calls draws its inputs just before it and frees them after, so while a
  kernel's call runs the baseline holds none; and the baseline's calls are checked for writes."""
  relu = jax.jit(RELU.reference)
  feeds, held = [], []
  real = timing.time_interleaved

  def spy(fns, sets, **kw):
    feeds.append(sets[1])
    return real(fns, sets, **kw)
  monkeypatch.setattr(timing, "time_interleaved", spy)

  def looks_at_the_baseline_s(x):
    held.append(feeds[-1]._current)  # pylint: disable=protected-access
    return relu(x)
  fields = _timed(looks_at_the_baseline_s, iterations=40)
  assert fields["status"] is Status.PASS and held == [()] * 41
  checked = []
  monkeypatch.setattr(judge.TimingSets, "mutations",
                      lambda self: checked.append(self.whose) or [])
  _timed(relu, iterations=4)
  assert checked == ["", "the baseline's "]


def test_candidate_and_baseline_alternate_order_every_round_so_drift_hits_both_alike(monkeypatch):
  """Under a clock that drifts (each call takes one unit longer than the one before, whoever
  makes it), two identical functions timed in ABBA order get the same median; in AB, AB
  order the first would always look faster."""
  clock, made = [0.0], [0]

  def drifting(x):
    clock[0] += made[0]  # whole seconds: every sample is exact
    made[0] += 1
    return x
  monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
  x = jnp.zeros(4)
  first, second = timing.time_interleaved(
      [drifting, drifting], [[(x,)], [(x,)]], iterations=8, rounds=2, warmup=0,
      method=timing.TimingMethod.WALLCLOCK)
  assert sorted(first.samples.samples_ms + second.samples.samples_ms) == [1e3 * k for k in range(16)]
  assert first.samples.median_ms == second.samples.median_ms


def test_kept_timed_outputs_are_labelled_with_their_call():
  """Every kept output says which call made it, over both rounds and with more sets than calls
  in a round: the judge compares it with the reference of what its feed gave that call."""
  sets = [(jnp.full(4, float(k)),) for k in range(3)]
  calls = range(10)
  (timed,) = timing.time_interleaved([lambda x: x + 0.0], [sets], iterations=10, rounds=2,
                                     warmup=1, method=timing.TimingMethod.WALLCLOCK,
                                     keep=[frozenset(calls)])
  assert sorted(timed.kept) == list(calls)
  for call, out in timed.kept.items():
    assert float(out[0]) == float(call % len(sets)), (call, out)


def test_copy_ceiling_counts_the_bytes_read_and_written(monkeypatch):
  """A copy of N bytes moves 2N (read, then written); a read-only sum moves N; a matmul of
  n^3 multiply-adds does 2n^3 flops. Timed alike, the copy's rate is twice the read's."""
  monkeypatch.setattr(ceilings.jax, "default_backend", lambda: "gpu")
  monkeypatch.setattr(ceilings, "COPY_ELEMENTS", 1 << 10)
  monkeypatch.setattr(ceilings, "MATMUL_N", 8)

  def fake(fns, sets, *, iterations, rounds, warmup, method):
    return [timing.Timed(samples=timing.Samples(method=method, samples_ms=(0.5, 0.5),
                                                kernel_names=()), kept={}) for _ in fns]
  monkeypatch.setattr(ceilings, "time_interleaved", fake)
  got = ceilings.measure(timing.TimingMethod.WALLCLOCK)
  nbytes = (1 << 10) * 4
  assert got.read_gbps == pytest.approx(nbytes / 0.5 / 1e6)
  assert got.copy_gbps == pytest.approx(2 * got.read_gbps)
  assert got.matmul_tflops == pytest.approx(2 * 8**3 / 0.5 / 1e9)


# ---------------------------------------------------------------------------------------------
# More behaviours that a plausible edit of the judge would break.

def test_iqr_is_the_spread_between_the_first_and_third_quartiles():
  samples = timing.Samples(method=timing.TimingMethod.WALLCLOCK,
                           samples_ms=(8.0, 1.0, 7.0, 2.0, 6.0, 3.0, 5.0, 4.0), kernel_names=())
  assert samples.iqr_ms == 6.75 - 2.25  # quartiles of 1..8 (exclusive method)
  assert dataclasses.replace(samples, samples_ms=(1.0, 2.0, 9.0)).iqr_ms == 0.0  # too few


def test_each_function_gets_exactly_the_iterations_asked_for_over_uneven_rounds():
  """5 iterations in 2 rounds: 3 calls a round are made, 5 samples kept, no output kept of a
  call beyond them; each function has its warm-up calls first."""
  made = {"a": 0, "b": 0}

  def counted(name):
    def fn(x):
      made[name] += 1
      return x
    return fn
  x = jnp.zeros(4)
  first, second = timing.time_interleaved(
      [counted("a"), counted("b")], [[(x,)], [(x,)]], iterations=5, rounds=2, warmup=2,
      method=timing.TimingMethod.WALLCLOCK, keep=[frozenset(range(5))])
  assert len(first.samples.samples_ms) == len(second.samples.samples_ms) == 5
  assert sorted(first.kept) == [0, 1, 2, 3, 4] and second.kept == {}
  assert made == {"a": 2 + 6, "b": 2 + 6}


class _FakeCupti:
  """The CUPTI bindings' two calls, fed by the timed functions: each 'launches' kernels."""

  def __init__(self):
    self.events = []

  def _cupti_init(self):
    self.events.clear()

  def _cupti_get_timings(self, finalize):
    # A session per timed call: detaching CUPTI at its end (finalize) costs more than the call.
    assert not finalize, "a timing session detached CUPTI"
    return list(self.events)


def test_a_cupti_sample_is_the_sum_of_every_kernel_one_call_launched(monkeypatch):
  """A call that launches a Pallas kernel and an XLA glue kernel costs both (each call is
  timed in a CUPTI session of its own); a call whose launches CUPTI did not see is an error."""
  ext = _FakeCupti()
  monkeypatch.setattr(timing, "_cupti_ext", lambda: ext)
  durations = iter([1.0, 0.25, 2.0, 0.5, 3.0, 0.75, 4.0, 1.0])

  def two_kernels(x):
    ext.events += [("pallas", next(durations)), ("glue", next(durations))]
    return x
  x = jnp.zeros(4)
  (timed,) = timing.time_interleaved([two_kernels], [[(x,)]], iterations=4, rounds=1, warmup=0,
                                     method=timing.TimingMethod.CUPTI)
  assert timed.samples.samples_ms == (1.25, 2.5, 3.75, 5.0)
  assert timed.samples.kernel_names == ("pallas", "glue")

  def launches_nothing(x):
    return x
  with pytest.raises(RuntimeError, match="CUPTI saw no kernel launch for a call"):
    timing.time_interleaved([launches_nothing], [[(x,)]], iterations=2, rounds=1, warmup=0,
                            method=timing.TimingMethod.CUPTI)


def test_degeneracy_threshold_is_scaled_to_the_reference_not_the_candidates_output():
  """A candidate must not set its own bar: one huge element in its output leaves the filters'
  threshold where the reference puts it."""
  relu = jax.jit(RELU.reference)
  runs = checks.run_candidate(relu, RELU, TINY, (1, 2), on_gpu=False, edge=None)
  loud = dataclasses.replace(runs, outputs=(runs.outputs[0].at[0, 0].set(1e6), runs.outputs[1]))
  verdict = checks.judge_outputs(loud, RELU, TINY, None)
  reference = RELU.expected(*RELU.make_inputs(TINY, 1))
  assert {f.threshold for f in verdict.filters} == {filters.threshold(reference)}


def test_a_wallclock_sample_lasts_until_the_output_is_ready(monkeypatch):
  """Dispatch is asynchronous: a sample that stopped the clock when the call returned, not when
  its output was ready, would time the launch only."""
  clock = [0.0]

  class Pending:
    """An output still being computed: ready one second after it is waited for."""

    def block_until_ready(self):
      clock[0] += 1.0
      return self
  monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
  (timed,) = timing.time_interleaved([Pending], [[()]], iterations=2, rounds=1, warmup=0,
                                     method=timing.TimingMethod.WALLCLOCK)
  assert timed.samples.samples_ms == (1000.0, 1000.0)
