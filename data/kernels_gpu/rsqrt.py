"""rsqrt: 1 / sqrt(x + 1e-5) elementwise; x (N, M) float32 in [0.1, 5), any shape.

GPU fix: the array is viewed flat and cut into 1-D blocks (4096 elements by default), far below
Triton's 2^20-element tensor limit; the last block is masked, so any size works.

Tuning: `block` and the warps set how many elements each thread loads at once (bytes in flight)
against how many programs share the GPU. The config comes from TUNED_CONFIGS for the GPU and
shape class being compiled for, else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "rsqrt"
FIX_APPLIED: Final = "masked_edges"
FIX_REASON: Final = ("the TPU kernel's (1024, M) row blocks exceed Triton's 2^20-element limit "
                     "at medium and large sizes; flat 4096-element blocks with a masked tail fit "
                     "and accept any shape")
EPS: Final = 1e-5
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a block each thread holds in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block": (1024, 2048, 4096, 8192, 16384), "num_warps": (2, 4, 8, 16)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "16384x16384": dict(
            block=1024, num_warps=8),
        "16384x16384:bfloat16": dict(
            block=1024, num_warps=4),
        "4096x4096": dict(
            block=1024, num_warps=8),
        "4096x4096:bfloat16": dict(
            block=2048, num_warps=8),
    },
}


def _rsqrt_kernel(x_ref, o_ref, *, n: int, block: int):
  start = pl.program_id(0) * block
  mask = start + jnp.arange(block) < n
  x = pltriton.load(x_ref.at[pl.ds(start, block)], mask=mask, other=1.0).astype(jnp.float32)
  pltriton.store(o_ref.at[pl.ds(start, block)],
                 jax.lax.rsqrt(x + EPS).astype(o_ref.dtype), mask=mask)


def config_ok(config) -> bool:
  """Whether every thread holds between 1 and MAX_ELEMENTS_PER_THREAD elements of a block."""
  threads = 32 * config["num_warps"]
  return threads <= config["block"] <= threads * MAX_ELEMENTS_PER_THREAD


def _default_config() -> dict:
  return dict(block=4096, num_warps=8)


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
  """1 / sqrt(x + 1e-5); `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  return _rsqrt(x, interpret=interpret, **{**config_for(x), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _rsqrt(x, *, interpret: bool, block: int, num_warps: int):
  flat = x.reshape(-1)
  n = flat.size
  out = pl.pallas_call(
      functools.partial(_rsqrt_kernel, n=n, block=block), grid=(pl.cdiv(n, block),),
      out_shape=jax.ShapeDtypeStruct(flat.shape, flat.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(flat)
  return out.reshape(x.shape)
