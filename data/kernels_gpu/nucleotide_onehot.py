"""nucleotide_onehot: seq (L,) int32 codes 0..3 = A,C,G,T -> (L, 4) float32 one-hot, any L.

Code 4 (N, unknown) and any other code give an all-zero row, as jax.nn.one_hot does.

GPU fix: a 1-D grid over blocks of block_l positions (256 by default); each program compares
its codes with a 4-wide iota and writes a (block_l, 4) tile, masking the tail rows.

Tuning: `block_l` and the warps set how many rows each thread encodes at once (bytes in
flight) against how many programs share the GPU. The config comes from TUNED_CONFIGS for the
GPU and shape class being compiled for, else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "nucleotide_onehot"
FIX_APPLIED: Final = "masked_edges"
FIX_REASON: Final = ("the TPU kernel encodes the whole sequence in one (L, 4) block, not a power "
                     "of two for L = 1001, which Triton rejects; masked 256-row blocks accept any "
                     "L and spread the work over programs")
NUM_BASES: Final = 4
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a tile each thread holds in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_l": (64, 128, 256, 512, 1024, 2048, 4096),
                       "num_warps": (1, 2, 4, 8, 16)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "16384": dict(
            block_l=256, num_warps=8),
        "4096": dict(
            block_l=256, num_warps=8),
    },
}


def _nucleotide_onehot_kernel(seq_ref, o_ref, *, length: int, block_l: int):
  r0 = pl.program_id(0) * block_l
  row_ok = r0 + jnp.arange(block_l) < length
  codes = pltriton.load(seq_ref.at[pl.ds(r0, block_l)], mask=row_ok, other=NUM_BASES)
  hot = codes[:, None] == jnp.arange(NUM_BASES)[None, :]
  pltriton.store(o_ref.at[pl.ds(r0, block_l), :], hot.astype(jnp.float32),
                 mask=jnp.broadcast_to(row_ok[:, None], hot.shape))


def config_ok(config) -> bool:
  """Whether every thread holds between 1 and MAX_ELEMENTS_PER_THREAD elements of a tile."""
  threads = 32 * config["num_warps"]
  return threads <= config["block_l"] * NUM_BASES <= threads * MAX_ELEMENTS_PER_THREAD


def _default_config() -> dict:
  return dict(block_l=256, num_warps=4)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '256x32'."""
  return ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)


def config_for(seq) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(seq))
  return dict(tuned) if tuned else _default_config()


def kernel(seq, *, interpret: bool = False, config=None):
  """The one-hot rows of seq; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  return _nucleotide_onehot(seq, interpret=interpret, **{**config_for(seq), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _nucleotide_onehot(seq, *, interpret: bool, block_l: int, num_warps: int):
  (length,) = seq.shape
  return pl.pallas_call(
      functools.partial(_nucleotide_onehot_kernel, length=length, block_l=block_l),
      grid=(pl.cdiv(length, block_l),),
      out_shape=jax.ShapeDtypeStruct((length, NUM_BASES), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(seq)
