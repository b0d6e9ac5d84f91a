"""Hardware ceilings measured in the same run: memory bandwidth and the matmul rate per precision.

Bandwidth is the larger of a 1 GiB device copy (bytes read + written) and a 1 GiB read-only
reduction, so read-mostly kernels are not judged against a copy's lower rate. The matmul
rate is XLA's 8192^3 product at default precision, once per rate a precision is held against
(`Precision.ceiling`), in that precision's dtype: float32 (TF32 on NVIDIA GPUs, the same
precision a Pallas `jnp.dot` gets) and bfloat16 (tensor cores at about twice the rate). A task
is held against the rate of its own precision (`matmul_for`), since a bfloat16 contraction
held against the TF32 rate would be "impossible" at parity with XLA. A kernel
above either ceiling is a measurement error, once
the judge has measured the ceilings again (`Ceilings.raised`): one measurement can read low (the
matmul ceiling once read 331 TFLOP/s against 415-419 in every other run on the same GPU kind).
"""

from __future__ import annotations

import dataclasses
from typing import Final

import jax
import jax.numpy as jnp

from pallasbench_dataset.evaluation.judge.timing import TimingMethod, time_interleaved
from pallasbench_dataset.precision import PRECISIONS, get_precision
from pallasbench_dataset.schema import RunIdentity, RunInfo

COPY_ELEMENTS: Final = 1 << 28   # 1 GiB of float32
MATMUL_N: Final = 8192


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Ceilings:
  copy_gbps: float | None
  read_gbps: float | None
  matmul_tflops: float | None
  method: str
  matmul_bf16_tflops: float | None = None  # absent from runs before bfloat16 was measured

  @property
  def bandwidth_gbps(self) -> float | None:
    rates = [r for r in (self.copy_gbps, self.read_gbps) if r is not None]
    return max(rates) if rates else None

  def matmul_for(self, precision: str) -> float | None:
    """The matmul rate a task at `precision` is held against, the one its descriptor names
    (None: not measured, so no compute ceiling; never another precision's rate). A ValueError
    for an unknown precision, or one whose rate is not measured here."""
    return getattr(self, _matmul_ceiling(precision))

  def to_json(self) -> dict:
    return {**_rates(self), "bandwidth_gbps": self.bandwidth_gbps, "method": self.method}

  def run_info(self, run: RunIdentity) -> RunInfo:
    """A record's `run`: the run as the driver names it, with these ceilings (the judge's
    own measurement, on the records of its evaluations and of those it never reported), each
    as `ceiling_<its name>`."""
    return RunInfo(command=run.command, run_id=run.run_id, gpu_index=run.gpu_index,
                   **{f"ceiling_{f.name}": getattr(self, f.name) for f in dataclasses.fields(self)})

  def raised(self, other: Ceilings) -> Ceilings:
    """Each ceiling the higher of the two measurements: a measured rate is a lower bound on
    what the hardware can do, so the higher one is the better estimate."""
    def higher(a: float | None, b: float | None) -> float | None:
      return max((v for v in (a, b) if v is not None), default=None)
    others = _rates(other)
    return Ceilings(**{name: higher(rate, others[name]) for name, rate in _rates(self).items()},
                    method=self.method)


def _rates(ceilings: Ceilings) -> dict[str, float | None]:
  """Each measured rate of `ceilings` by its field's name (bandwidths, then matmul rates)."""
  return {f.name: getattr(ceilings, f.name) for f in dataclasses.fields(ceilings)
          if f.name != "method"}


# The matmul rates measured: the ones the registered precisions are held against
# (Precision.ceiling), in the registry's order, each a field of Ceilings.
MATMUL_CEILINGS: Final = tuple(dict.fromkeys(p.ceiling for p in PRECISIONS.values()))


def _matmul_ceiling(precision: str) -> str:
  """The matmul rate (a field of Ceilings) a task at `precision` is held against, the one its
  descriptor names; a ValueError for an unknown precision, or one whose rate is not measured."""
  ceiling = get_precision(precision).ceiling
  if ceiling not in MATMUL_CEILINGS:
    raise ValueError(f"precision {precision!r} is held against {ceiling!r}, which the judge "
                     f"does not measure; measured matmul rates: {', '.join(MATMUL_CEILINGS)}")
  return ceiling


NOT_MEASURED: Final = Ceilings(copy_gbps=None, read_gbps=None, matmul_tflops=None,
                               method="not measured (CPU: interpret-mode timings are not comparable)")


def measure(method: TimingMethod) -> Ceilings:
  """Measures the ceilings on the default GPU; CPU runs get NOT_MEASURED."""
  if jax.default_backend() != "gpu":
    return NOT_MEASURED
  # Each matmul rate in the dtype of the first precision held against it.
  dtypes: dict[str, str] = {}
  for precision in PRECISIONS.values():
    dtypes.setdefault(_matmul_ceiling(precision.name), precision.dtype)
  x = jax.random.normal(jax.random.key(0), (COPY_ELEMENTS,), jnp.float32)
  a, b = (jax.random.normal(jax.random.key(i), (MATMUL_N, MATMUL_N), jnp.float32) for i in (1, 2))
  copy = jax.jit(lambda v: v * 1.5 + 0.5)
  read = jax.jit(jnp.sum)
  matmul = jax.jit(jnp.matmul)
  copy_t, read_t = (t.samples for t in time_interleaved(
      [copy, read], [[(x,)], [(x,)]], iterations=10, rounds=2, warmup=2, method=method))
  # One precision at a time, as the float32 rate was always measured: alone on the GPU.
  matmul_tflops = {
      ceiling: 2 * MATMUL_N**3 / time_interleaved(
          [matmul], [[(a.astype(dtype), b.astype(dtype))]], iterations=10, rounds=1, warmup=2,
          method=method)[0].samples.median_ms / 1e9
      for ceiling, dtype in dtypes.items()}
  nbytes = COPY_ELEMENTS * 4
  return Ceilings(
      copy_gbps=2 * nbytes / copy_t.median_ms / 1e6,
      read_gbps=nbytes / read_t.median_ms / 1e6,
      **matmul_tflops,
      method=f"{method.value}: 1 GiB copy and read-only sum, {MATMUL_N}^3 "
             f"{' and '.join(dtypes.values())} XLA matmuls at default precision, median of 10")
