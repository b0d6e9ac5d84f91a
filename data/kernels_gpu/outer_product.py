"""outer_product: out[i, j] = x[i] * y[j]; x (M,), y (N,) float32 -> (M, N), any M and N.

GPU fix: the output is cut into (block_m, block_n) tiles (32 x 256 by default) on a 2-D grid,
far below Triton's 2^20-element tensor limit; each program loads its slices of x and y and
writes their broadcast product, with row and column masks on the edge tiles, so any M and N
work.

Tuning: `block_m`, `block_n` and the warps set how many output elements each thread writes at
once (bytes in flight) against how many programs share the GPU; a wider `block_n` writes longer
contiguous runs of each row. The config comes from TUNED_CONFIGS for the GPU and shape class
being compiled for, else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "outer_product"
FIX_APPLIED: Final = "2d_tiling"
FIX_REASON: Final = ("the TPU kernel writes the whole (M, N) output from one program, 16M "
                     "elements at the large size, past Triton's 2^20-element limit; masked "
                     "32 x 256 output tiles on a 2-D grid fit and spread the writes over the GPU")
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a tile each thread holds in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_m": (8, 16, 32, 64, 128), "block_n": (64, 128, 256, 512, 1024),
                       "num_warps": (2, 4, 8, 16)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024,1024": dict(
            block_m=64, block_n=64, num_warps=4),
        "1024,1024:bfloat16": dict(
            block_m=32, block_n=128, num_warps=8),
        "4096,4096": dict(
            block_m=16, block_n=128, num_warps=8),
        "4096,4096:bfloat16": dict(
            block_m=8, block_n=1024, num_warps=4),
    },
}


def _outer_product_kernel(x_ref, y_ref, o_ref, *, m: int, n: int, block_m: int, block_n: int):
  r0 = pl.program_id(0) * block_m
  c0 = pl.program_id(1) * block_n
  row_ok = r0 + jnp.arange(block_m) < m
  col_ok = c0 + jnp.arange(block_n) < n
  x = pltriton.load(x_ref.at[pl.ds(r0, block_m)], mask=row_ok, other=0.0).astype(jnp.float32)
  y = pltriton.load(y_ref.at[pl.ds(c0, block_n)], mask=col_ok, other=0.0).astype(jnp.float32)
  pltriton.store(o_ref.at[pl.ds(r0, block_m), pl.ds(c0, block_n)],
                 (x[:, None] * y[None, :]).astype(o_ref.dtype),
                 mask=row_ok[:, None] & col_ok[None, :])


def config_ok(config) -> bool:
  """Whether every thread holds between 1 and MAX_ELEMENTS_PER_THREAD elements of a tile."""
  threads = 32 * config["num_warps"]
  return threads <= config["block_m"] * config["block_n"] <= threads * MAX_ELEMENTS_PER_THREAD


def _default_config() -> dict:
  return dict(block_m=32, block_n=256, num_warps=4)


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


def config_for(x, y) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x, y))
  return dict(tuned) if tuned else _default_config()


def kernel(x, y, *, interpret: bool = False, config=None):
  """The outer product of x and y; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  return _outer_product(x, y, interpret=interpret, **{**config_for(x, y), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _outer_product(x, y, *, interpret: bool, block_m: int, block_n: int, num_warps: int):
  (m,), (n,) = x.shape, y.shape
  return pl.pallas_call(
      functools.partial(_outer_product_kernel, m=m, n=n, block_m=block_m, block_n=block_n),
      grid=(pl.cdiv(m, block_m), pl.cdiv(n, block_n)),
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(x, y)
