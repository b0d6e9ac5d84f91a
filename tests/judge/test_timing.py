"""The timing round on the CPU: a timed call never runs beside an earlier call's output, each
output is poisoned in place before it is freed, and the checked outputs wait on the host.

On a GPU a Pallas kernel that reads past its refs finds whatever lies beside them; these tests
pin, on any host, what lies there (tests/judge/test_gpu.py runs the attack itself on the H200)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset.evaluation.judge import timing

_double = jax.jit(lambda x: x * 2.0)


@pytest.fixture
def poisoned(monkeypatch):
  """Every buffer `retire` poisons: (address before, address after, all NaN or all bits set)."""
  seen = []
  real = timing._poison_in_place  # pylint: disable=protected-access

  def spy(x):
    address = x.unsafe_buffer_pointer()
    out = real(x)
    flat = np.asarray(out).reshape(-1)
    full = bool(np.isnan(flat).all()) if flat.dtype.kind == "f" else bool((~flat == 0).all())
    seen.append((address, out.unsafe_buffer_pointer(), full))
    return out
  monkeypatch.setattr(timing, "_poison_in_place", spy)
  return seen


def test_no_earlier_output_is_alive_while_a_timed_call_runs(poisoned):
  """Two functions interleaved over two rounds, warm-up included: at the start of every call,
  every output returned before it has been deleted; the kept ones arrive as host copies."""
  outputs: list[jax.Array] = []
  alive_at_call: list[int] = []

  def fn(x):
    alive_at_call.append(sum(not o.is_deleted() for o in outputs))
    out = _double(x)
    outputs.append(out)
    return out

  sets = [(jnp.full((64, 64), float(i)),) for i in range(3)]
  kernel, baseline = timing.time_interleaved(
      [fn, fn], [sets, sets], iterations=6, rounds=2, warmup=2,
      method=timing.TimingMethod.WALLCLOCK, keep=[frozenset({1, 4})])
  assert len(outputs) == 2 * (2 + 6) and alive_at_call == [0] * len(outputs)
  assert all(o.is_deleted() for o in outputs)
  assert sorted(kernel.kept) == [1, 4] and baseline.kept == {}
  for call, out in kernel.kept.items():
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, 2.0 * (call % 3))
  assert len(poisoned) == len(outputs)
  assert all(before == after and full for before, after, full in poisoned), poisoned


def test_retire_poisons_every_buffer_of_an_output_in_place(poisoned):
  out = (_double(jnp.ones((8, 8))), jax.jit(lambda x: x + 1)(jnp.zeros((16,), jnp.int32)))
  assert timing.retire(out, keep=False) is None
  assert all(leaf.is_deleted() for leaf in out)
  assert [(before == after, full) for before, after, full in poisoned] == [(True, True)] * 2


def test_an_input_handed_back_as_the_output_is_left_alone(poisoned):
  """A function that returns its input's buffer (a Python callable may) leaves the input
  set's buffer as it was."""
  x = jnp.ones((8, 8))
  timing.retire(x, keep=False, args=(x,))
  assert poisoned == [] and not x.is_deleted() and float(x.sum()) == 64.0


def test_rounds_alternate_their_order_and_share_the_calls():
  """The warm-up calls come first, in order; then round r runs the functions in order when r is
  even and in reverse when it is odd (drift hits each alike), each taking ceil(iterations /
  rounds) timed calls, no more."""
  calls = []

  def named(name):
    def fn(x):
      calls.append(name)
      return _double(x)
    return fn
  sets = [(jnp.ones((8, 8)),)]
  timed = timing.time_interleaved([named("a"), named("b")], [sets, sets], iterations=3, rounds=3,
                                  warmup=1, method=timing.TimingMethod.WALLCLOCK)
  assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]
  assert [len(t.samples.samples_ms) for t in timed] == [3, 3]


def test_each_function_is_timed_on_a_feed_of_its_own():
  """One feed too many (or too few) is an error, not a function silently left out."""
  sets = [(jnp.ones((8, 8)),)]
  with pytest.raises(ValueError):
    timing.time_interleaved([_double], [sets, sets], iterations=1, rounds=1, warmup=1,
                            method=timing.TimingMethod.WALLCLOCK)


def test_only_the_calls_sampled_have_their_outputs_kept():
  """Rounds of ceil(iterations / rounds) calls can make more calls than `iterations`; the
  extra ones are no sample, and their outputs are not returned either."""
  sets = [(jnp.full((8, 8), 1.0),)]
  (timed,) = timing.time_interleaved([_double], [sets], iterations=3, rounds=2, warmup=0,
                                     method=timing.TimingMethod.WALLCLOCK,
                                     keep=[frozenset({2, 3})])
  assert len(timed.samples.samples_ms) == 3 and sorted(timed.kept) == [2]
