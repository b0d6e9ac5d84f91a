"""one_hot: float32 one-hot of ids (S,) int32 over NUM_CLASSES = 1024 -> (S, 1024), any S.

Ids outside [0, 1024) give all-zero rows, as jax.nn.one_hot does.

GPU fix: the output is cut into (block_s, block_c) tiles (16 x 256 by default) on a 2-D grid
(row blocks x class blocks); each program compares its ids with a column iota and masks the
row tail.

Tuning: `block_s`, `block_c` and the warps set how many output elements each thread writes at
once (bytes in flight) against how many programs share the GPU; `block_c` divides NUM_CLASSES.
The config comes from TUNED_CONFIGS for the GPU and shape class being compiled for, else from a
default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "one_hot"
FIX_APPLIED: Final = "2d_tiling"
FIX_REASON: Final = ("the TPU kernel builds the whole (S, 1024) output in one program, 2M "
                     "elements at the large size, past Triton's 2^20-element limit; masked "
                     "16 x 256 tiles on a 2-D grid fit, accept any S and spread the writes")
NUM_CLASSES: Final = 1024
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a tile each thread holds in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_s": (8, 16, 32, 64), "block_c": (128, 256, 512, 1024),
                       "num_warps": (2, 4, 8, 16)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "2048": dict(
            block_s=16, block_c=128, num_warps=4),
        "512": dict(
            block_s=8, block_c=128, num_warps=2),
    },
}


def _one_hot_kernel(ids_ref, o_ref, *, s: int, block_s: int, block_c: int):
  r0 = pl.program_id(0) * block_s
  c0 = pl.program_id(1) * block_c
  row_ok = r0 + jnp.arange(block_s) < s
  ids = pltriton.load(ids_ref.at[pl.ds(r0, block_s)], mask=row_ok, other=-1)
  # An id outside [0, NUM_CLASSES) equals no class index, so its row stays zero.
  hot = ids[:, None] == c0 + jnp.arange(block_c)[None, :]
  pltriton.store(o_ref.at[pl.ds(r0, block_s), pl.ds(c0, block_c)], hot.astype(jnp.float32),
                 mask=jnp.broadcast_to(row_ok[:, None], hot.shape))


def config_ok(config) -> bool:
  """Whether block_c divides NUM_CLASSES (the class blocks are not masked) and every thread
  holds between 1 and MAX_ELEMENTS_PER_THREAD elements of a tile."""
  threads = 32 * config["num_warps"]
  return (NUM_CLASSES % config["block_c"] == 0
          and threads <= config["block_s"] * config["block_c"] <= threads * MAX_ELEMENTS_PER_THREAD)


def _default_config() -> dict:
  return dict(block_s=16, block_c=256, num_warps=4)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '256x32'."""
  return ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)


def config_for(ids) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(ids))
  return dict(tuned) if tuned else _default_config()


def kernel(ids, *, interpret: bool = False, config=None):
  """The one-hot rows of ids; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  return _one_hot(ids, interpret=interpret, **{**config_for(ids), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _one_hot(ids, *, interpret: bool, block_s: int, block_c: int, num_warps: int):
  (s,) = ids.shape
  return pl.pallas_call(
      functools.partial(_one_hot_kernel, s=s, block_s=block_s, block_c=block_c),
      grid=(pl.cdiv(s, block_s), NUM_CLASSES // block_c),
      out_shape=jax.ShapeDtypeStruct((s, NUM_CLASSES), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(ids)
