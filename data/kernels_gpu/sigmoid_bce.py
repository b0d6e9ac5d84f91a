"""sigmoid_bce: elementwise BCE with logits z and targets t in [0, 1], stable form
max(z, 0) - z t + log1p(exp(-|z|)); logits, targets (N, M) float32, any (equal) shape.

GPU fix: both arrays are viewed flat and cut into 1-D blocks (4096 elements by default), far
below Triton's 2^20-element tensor limit; the last block is masked, so any size works.

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

TASK_NAME: Final = "sigmoid_bce"
FIX_APPLIED: Final = "masked_edges"
FIX_REASON: Final = ("the TPU kernel's (1024, M) row blocks reach 4M elements at the large "
                     "size, past Triton's 2^20-element limit, and N must divide by the block; "
                     "flat 4096-element blocks with a masked tail fit and accept any shape")
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a block each thread holds in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block": (1024, 2048, 4096, 8192, 16384), "num_warps": (2, 4, 8, 16)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "2048x1024,2048x1024": dict(
            block=2048, num_warps=16),
        "2048x1024,2048x1024:bfloat16": dict(
            block=2048, num_warps=8),
        "8192x4096,8192x4096": dict(
            block=2048, num_warps=16),
        "8192x4096,8192x4096:bfloat16": dict(
            block=4096, num_warps=8),
    },
}


def _sigmoid_bce_kernel(z_ref, t_ref, o_ref, *, n: int, block: int):
  start = pl.program_id(0) * block
  mask = start + jnp.arange(block) < n
  z = pltriton.load(z_ref.at[pl.ds(start, block)], mask=mask, other=0.0).astype(jnp.float32)
  t = pltriton.load(t_ref.at[pl.ds(start, block)], mask=mask, other=0.0).astype(jnp.float32)
  # exp(-|z|) <= 1 never overflows, and log1p keeps precision where it is tiny.
  loss = jnp.maximum(z, 0.0) - z * t + jnp.log1p(jnp.exp(-jnp.abs(z)))
  pltriton.store(o_ref.at[pl.ds(start, block)], loss.astype(o_ref.dtype), mask=mask)


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


def config_for(logits, targets) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(logits, targets))
  return dict(tuned) if tuned else _default_config()


def kernel(logits, targets, *, interpret: bool = False, config=None):
  """The elementwise BCE of the logits; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  return _sigmoid_bce(logits, targets, interpret=interpret,
                      **{**config_for(logits, targets), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _sigmoid_bce(logits, targets, *, interpret: bool, block: int, num_warps: int):
  if logits.shape != targets.shape:
    raise ValueError(f"{logits.shape=} must equal {targets.shape=}")
  n = logits.size
  out = pl.pallas_call(
      functools.partial(_sigmoid_bce_kernel, n=n, block=block), grid=(pl.cdiv(n, block),),
      out_shape=jax.ShapeDtypeStruct((n,), logits.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(logits.reshape(-1), targets.reshape(-1))
  return out.reshape(logits.shape)
