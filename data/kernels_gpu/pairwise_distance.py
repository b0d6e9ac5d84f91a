"""pairwise_distance: out[i, j] = sqrt(sum_d (x[i, d] - x[j, d])^2 + 1e-8); x (N, D) float32
-> (N, N), any N, D.

GPU fix: each program owns one (block, block) tile of the distance matrix and loops over
the D features; per feature it loads column d of its row block and of its column block
(strided loads from the whole-array ref; the same few rows are reread from cache) and adds
the squared outer difference to a float32 accumulator. The differences are exact, unlike the
|x_i|^2 + |x_j|^2 - 2 x_i.x_j form, whose float32 (let alone TF32) cancellation swamps the
1e-4 distances on the diagonal. Loads and the store are masked, so N need not be a block
multiple, and no (N, N, D) difference tensor ever exists.

Tuning: with `chunk` > 1 a program loads (block, chunk) row tiles, contiguous along the
features (coalesced), and adds the squared (block, block, chunk) differences summed over the
chunk; features past D are zero on both sides and add nothing. `block` and the warps set how
many programs share the GPU. The config comes from TUNED_CONFIGS for the GPU and shape class
being compiled for, else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "pairwise_distance"
FIX_APPLIED: Final = "2d_tiling"
FIX_REASON: Final = ("the TPU kernel builds the whole (N, N, D) difference tensor in one program, "
                     "past Triton's tensor limit; (64, 64) output tiles accumulate exact squared "
                     "differences over a loop on D, with masked edges")
EPS: Final = 1e-8
MAX_TILE_ELEMENTS: Final = 1 << 16  # the (block, block, chunk) differences, kept in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block": (16, 32, 64), "chunk": (1, 4, 8, 16), "num_warps": (1, 2, 4, 8),
                       "num_stages": (1, 2)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024x64": dict(
            block=64, chunk=1, num_warps=1, num_stages=2),
        "1024x64:bfloat16": dict(
            block=64, chunk=1, num_warps=2, num_stages=1),
        "256x32": dict(
            block=16, chunk=16, num_warps=8, num_stages=1),
        "256x32:bfloat16": dict(
            block=16, chunk=1, num_warps=4, num_stages=1),
    },
}


def _pairwise_distance_kernel(x_ref, o_ref, *, block: int, chunk: int):
  n, d = x_ref.shape
  i, j = pl.program_id(0), pl.program_id(1)
  rows = i * block + jnp.arange(block)
  cols = j * block + jnp.arange(block)

  if chunk == 1:
    def feature(f, acc):
      xi = pltriton.load(x_ref.at[pl.ds(i * block, block), f], mask=rows < n, other=0.0)
      xj = pltriton.load(x_ref.at[pl.ds(j * block, block), f], mask=cols < n, other=0.0)
      diff = xi[:, None] - xj[None, :]
      return acc + diff * diff
    steps = d
  else:
    def feature(c, acc):
      fs = c * chunk + jnp.arange(chunk)
      xi = pltriton.load(x_ref.at[pl.ds(i * block, block), pl.ds(c * chunk, chunk)],
                         mask=(rows[:, None] < n) & (fs[None, :] < d), other=0.0)
      xj = pltriton.load(x_ref.at[pl.ds(j * block, block), pl.ds(c * chunk, chunk)],
                         mask=(cols[:, None] < n) & (fs[None, :] < d), other=0.0)
      diff = xi[:, None, :] - xj[None, :, :]
      return acc + jnp.sum(diff * diff, axis=2)
    steps = pl.cdiv(d, chunk)

  acc = jax.lax.fori_loop(0, steps, feature, jnp.zeros((block, block), jnp.float32))
  pltriton.store(o_ref.at[pl.ds(i * block, block), pl.ds(j * block, block)],
                 jnp.sqrt(acc + EPS), mask=(rows[:, None] < n) & (cols[None, :] < n))


def config_ok(config) -> bool:
  """Whether the differences of one chunk stay a register-sized tile."""
  return config["block"] * config["block"] * config["chunk"] <= MAX_TILE_ELEMENTS


def _default_config() -> dict:
  return dict(block=64, chunk=1, num_warps=4, num_stages=2)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '256x32',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(x) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x))
  return dict(tuned) if tuned else _default_config()


def kernel(x, *, interpret: bool = False, config=None):
  """Pairwise distances of x's rows; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  out = _pairwise_distance(x, interpret=interpret, **{**config_for(x), **(config or {})})
  return out.astype(x.dtype)


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _pairwise_distance(x, *, interpret: bool, block: int, chunk: int, num_warps: int,
                       num_stages: int):
  n = x.shape[0]
  return pl.pallas_call(
      functools.partial(_pairwise_distance_kernel, block=block, chunk=chunk),
      grid=(pl.cdiv(n, block), pl.cdiv(n, block)),
      out_shape=jax.ShapeDtypeStruct((n, n), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(x)
