"""Device timing: CUPTI kernel times where the GPU plugin has them, wall clock otherwise.

Several functions are timed in one process, interleaved in rounds (kernel, baseline,
baseline, kernel, ...) so that clock and thermal drift hit both alike. Each function has its
own inputs (its `Feed`): a candidate never runs on buffers the baseline used. The judge's feed
(core.TimingSets) draws each call's inputs just before it and then flushes the L2 (`L2Flush`),
so that a memory-bound kernel does not read them from it.
A sample is the device time of one call: the sum of the durations of every GPU kernel the
call launched (a Pallas kernel plus any XLA glue it needs), launch gaps excluded.

A kernel sees only its own buffers: a Pallas kernel on a GPU is raw pointer arithmetic, and
one that reads past its refs finds whatever the allocator placed beside them. So no output of
an earlier call is alive while a call runs, nor its bytes: each call's output is overwritten
in place with a poison pattern (donated to a fill, which XLA writes into the same buffer) and
freed before the next call starts. The outputs the judge checks afterwards are copied to the
host first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import jax
import jax.numpy as jnp
import numpy as np


class TimingMethod(enum.StrEnum):
  CUPTI = "cupti"
  WALLCLOCK = "wallclock"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Samples:
  method: TimingMethod
  samples_ms: tuple[float, ...]
  kernel_names: tuple[str, ...]  # the device kernels one call launched (CUPTI only)

  @property
  def median_ms(self) -> float:
    return statistics.median(self.samples_ms)

  def charged(self, ms: float) -> Samples:
    """These samples with `ms` of device time each call spent where the timer did not look."""
    return dataclasses.replace(self, samples_ms=tuple(s + ms for s in self.samples_ms))

  @property
  def iqr_ms(self) -> float:
    if len(self.samples_ms) < 4:
      return 0.0
    q = statistics.quantiles(self.samples_ms, n=4)
    return q[2] - q[0]


def _cupti_ext():
  """The CUPTI bindings of the jax CUDA plugin (what profiler.measure uses), or None."""
  try:
    from jax._src.lib import mosaic_gpu  # pylint: disable=import-outside-toplevel
    ext = mosaic_gpu._mosaic_gpu_ext  # pylint: disable=protected-access
  except (ImportError, AttributeError):
    return None
  return ext if hasattr(ext, "_cupti_init") else None


def available_method() -> TimingMethod:
  if jax.default_backend() == "gpu" and _cupti_ext() is not None:
    return TimingMethod.CUPTI
  return TimingMethod.WALLCLOCK


@contextlib.contextmanager
def _cupti_session(out: list) -> Iterator[None]:
  """Records the device kernels launched inside it into `out`. CUPTI stays attached to the
  process after the session (no cuptiFinalize): a session per timed call that detaches and
  attaches again costs more than the calls it times."""
  ext = _cupti_ext()
  ext._cupti_init()  # pylint: disable=protected-access
  try:
    yield
  finally:
    out.extend(ext._cupti_get_timings(False) or ())  # pylint: disable=protected-access


def _poison(x: jax.Array) -> jax.Array:
  """NaN for floating point, all bits set otherwise: what a retired output is left holding."""
  if jnp.issubdtype(x.dtype, jnp.inexact):
    return jnp.full_like(x, jnp.nan)
  return jnp.invert(jnp.zeros_like(x))


_poison_in_place = jax.jit(_poison, donate_argnums=0, keep_unused=True)


def retire(out: Any, keep: bool, args: tuple = ()) -> Any:
  """Ends a timed call's output on the device: its buffers poisoned in place and freed (except
  an input of the call, `args`, that jax handed back as the output). Returns a host copy when
  `keep`, else None."""
  # A copy: on a CPU a host view would share the buffer, and the buffer could not be donated.
  host = jax.tree.map(lambda a: np.array(a, copy=True), out) if keep else None
  inputs = {a.unsafe_buffer_pointer() for a in jax.tree.leaves(args) if isinstance(a, jax.Array)}
  for leaf in jax.tree.leaves(out):
    if (isinstance(leaf, jax.Array) and not leaf.is_deleted()
        and leaf.unsafe_buffer_pointer() not in inputs):
      jax.block_until_ready(_poison_in_place(leaf)).delete()
      if not leaf.is_deleted():  # a buffer XLA would not donate is freed unpoisoned
        leaf.delete()
  return host


def _cupti_call(fn: Callable, args: tuple) -> tuple[float, tuple[str, ...], Any]:
  """One call in a CUPTI session of its own (what `retire` runs is never in one)."""
  events: list = []
  with _cupti_session(events):
    out = jax.block_until_ready(fn(*args))
  if not events:
    raise RuntimeError("CUPTI saw no kernel launch for a call")
  return sum(ms for _, ms in events), tuple(name for name, _ in events), out


def _wallclock_call(fn: Callable, args: tuple) -> tuple[float, tuple[str, ...], Any]:
  t0 = time.perf_counter()
  out = jax.block_until_ready(fn(*args))
  return (time.perf_counter() - t0) * 1e3, (), out


class Feed:
  """Where one timed function's calls get their inputs. Call t is the t-th timed call, the
  warm-up calls before it t = -warmup .. -1; `after(t)` runs once call t's output is retired,
  outside any timed window."""

  __slots__ = ()

  def args(self, call: int) -> tuple:
    raise NotImplementedError

  def after(self, call: int) -> None:
    """Nothing, unless a feed says otherwise."""


@dataclasses.dataclass(frozen=True, slots=True)
class Cycle(Feed):
  """Fixed sets in rotation: timed call t takes set t % len, so the first timed call takes the
  first set, which the warm-up calls (on the last sets) left cold."""
  sets: Sequence[tuple]

  def args(self, call: int) -> tuple:
    return self.sets[call % len(self.sets)]


def _round(fn: Callable, feed: Feed, start: int, n: int, method: TimingMethod,
           keep: frozenset[int]):
  """n calls from call `start` on; each output retired before the next call (kept ones copied
  to the host first). The kernel names are the first call's."""
  one_call = _cupti_call if method is TimingMethod.CUPTI else _wallclock_call
  samples, names, kept = [], (), {}
  for call in range(start, start + n):
    args = feed.args(call)
    ms, launched, out = one_call(fn, args)
    samples.append(ms)
    names = names or launched
    host = retire(out, keep=call in keep, args=args)
    if call in keep:
      kept[call] = host
    feed.after(call)
  return samples, names, kept


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Timed:
  """One function's samples, and the outputs of the calls asked for, on the host: call ->
  output (the call's inputs are its feed's to say)."""
  samples: Samples
  kept: dict[int, Any]


def time_interleaved(fns: Sequence[Callable], feeds: Sequence[Feed | Sequence[tuple]], *,
                     iterations: int, rounds: int, warmup: int, method: TimingMethod,
                     keep: Sequence[frozenset[int]] = ()) -> list[Timed]:
  """Times fns[j] on the inputs of feeds[j] (a Feed, or fixed sets in a Cycle); `iterations`
  samples each, over `rounds` rounds. keep[j] names timed calls (0-based) of fns[j] whose
  outputs are returned, copied to the host; every other output is poisoned and freed as soon
  as its call ends."""
  feeds = [f if isinstance(f, Feed) else Cycle(f) for f in feeds]
  per_round = max(1, -(-iterations // rounds))
  for fn, feed in zip(fns, feeds, strict=True):
    for call in range(-warmup, 0):
      args = feed.args(call)
      retire(jax.block_until_ready(fn(*args)), keep=False, args=args)
      feed.after(call)
  samples: list[list[float]] = [[] for _ in fns]
  names: list[tuple[str, ...]] = [() for _ in fns]
  kept: list[dict[int, Any]] = [{} for _ in fns]
  for r in range(rounds):
    order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
    for j in order:
      wanted = keep[j] if j < len(keep) else frozenset()
      got, names[j], outputs = _round(fns[j], feeds[j], r * per_round, per_round, method,
                                      wanted)
      samples[j].extend(got)
      kept[j].update(outputs)
  return [Timed(samples=Samples(method=method, samples_ms=tuple(s[:iterations]), kernel_names=n),
                kept={c: v for c, v in k.items() if c < iterations})
          for s, n, k in zip(samples, names, kept)]


L2_MULTIPLE: Final = 4


@functools.partial(jax.jit, donate_argnums=0)
def _touch(x: jax.Array) -> jax.Array:
  return x + 1


class L2Flush:
  """Pushes out of the L2 what the last writes left there (an input set just drawn): a scratch
  buffer of L2_MULTIPLE x the L2, read and written in place."""

  __slots__ = ("_scratch",)

  def __init__(self, l2_bytes: int):
    self._scratch = jnp.zeros((max(L2_MULTIPLE * l2_bytes // 4, 1),), jnp.uint32)

  def __call__(self) -> None:
    self._scratch = jax.block_until_ready(_touch(self._scratch))
