"""Honest control, red team round 18 (a false positive): a relu saved with a UTF-8 byte order
mark, as Windows editors and PowerShell's Out-File write it. Python runs such a file (`python
file.py`, `import`): the tokenizer drops the mark. Expected: pass. It is the shipped relu with
its max written as a select, so that it is no copy of the shipped kernel (test_attacks checks
that no honest control is named one).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "relu"
FIX_APPLIED: Final = "masked_edges"
FIX_REASON: Final = ("the TPU kernel's (1024, M) row blocks exceed Triton's 2^20-element limit "
                     "at medium and large sizes; flat 4096-element blocks with a masked tail fit "
                     "and accept any shape")
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a block each thread holds in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block": (1024, 2048, 4096, 8192, 16384), "num_warps": (2, 4, 8, 16)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "16384x16384": dict(
            block=1024, num_warps=8),
        "16384x16384:bfloat16": dict(
            block=2048, num_warps=8),
        "4096x4096": dict(
            block=1024, num_warps=8),
        "4096x4096:bfloat16": dict(
            block=2048, num_warps=8),
    },
}


def _relu_kernel(x_ref, o_ref, *, n: int, block: int):
  idx = pl.program_id(0) * block + jnp.arange(block)
  mask = idx < n
  x = pltriton.load(x_ref.at[pl.ds(pl.program_id(0) * block, block)], mask=mask, other=0.0)
  pltriton.store(o_ref.at[pl.ds(pl.program_id(0) * block, block)], jnp.where(x > 0.0, x, 0.0),
                 mask=mask)


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
  """max(x, 0); `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  return _relu(x, interpret=interpret, **{**config_for(x), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _relu(x, *, interpret: bool, block: int, num_warps: int):
  flat = x.reshape(-1)
  n = flat.size
  out = pl.pallas_call(
      functools.partial(_relu_kernel, n=n, block=block), grid=(pl.cdiv(n, block),),
      out_shape=jax.ShapeDtypeStruct(flat.shape, flat.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(flat)
  return out.reshape(x.shape)
