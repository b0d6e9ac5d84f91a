"""pwm_scan: out[p] = sum_j sum_c seq[p + j, c] * pwm[c, j] (a valid 1-D cross-correlation);
seq_onehot (L, 4), pwm (4, W) float32 -> (L - W + 1,), any L >= W.

GPU fix: each program scores block_p consecutive positions (256 by default). For every tap
j (a static loop: W is known at trace time) it reads the (block_p, 4) window
seq[p0 + j : p0 + j + block_p] straight from the whole-array ref, so neighbouring blocks
share their W - 1 halo rows without any copy, and accumulates window * pwm[:, j] summed over
the 4 channels in float32 multiply-adds (no TF32 dot: the task has reduction tolerance). Rows
past L read as 0 and positions past L - W are not stored, so the output length need not be a
power of two.

Tuning: `block_p` and the warps set how many window rows each thread loads per tap (bytes in
flight) against how many programs share the GPU. The tap loop is unrolled at trace time, so
Triton has no loop to pipeline and the stages stay 1. The config comes from TUNED_CONFIGS for
the GPU and shape class being compiled for, else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "pwm_scan"
FIX_APPLIED: Final = "masked_edges"
FIX_REASON: Final = ("the TPU kernel's single program loads (L - W + 1)-row windows and stores "
                     "an (L - W + 1, 1) column, not powers of two, which Triton refuses; masked "
                     "256-position blocks with halo windows take any L and W")
CHANNELS: Final = 4  # A, C, G, T: the window width that config_ok sizes registers for
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a window each thread holds in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_p": (64, 128, 256, 512, 1024, 2048), "num_warps": (1, 2, 4, 8, 16)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024x4,4x16": dict(
            block_p=64, num_warps=8),
        "1024x4,4x16:bfloat16": dict(
            block_p=64, num_warps=8),
        "4096x4,4x16": dict(
            block_p=64, num_warps=8),
        "4096x4,4x16:bfloat16": dict(
            block_p=64, num_warps=8),
    },
}


def _pwm_scan_kernel(seq_ref, pwm_ref, o_ref, *, block_p: int):
  length = seq_ref.shape[0]
  width = pwm_ref.shape[1]
  p0 = pl.program_id(0) * block_p
  pos = p0 + jnp.arange(block_p)
  acc = jnp.zeros((block_p,), jnp.float32)
  for j in range(width):
    window = pltriton.load(seq_ref.at[pl.ds(p0 + j, block_p), :],
                           mask=(pos + j < length)[:, None], other=0.0)
    acc += jnp.sum(window * pwm_ref[:, j][None, :], axis=1)
  pltriton.store(o_ref.at[pl.ds(p0, block_p)], acc, mask=pos < length - width + 1)


def config_ok(config) -> bool:
  """Whether every thread holds between 1 and MAX_ELEMENTS_PER_THREAD elements of a window."""
  threads = 32 * config["num_warps"]
  return threads <= config["block_p"] * CHANNELS <= threads * MAX_ELEMENTS_PER_THREAD


def _default_config() -> dict:
  return dict(block_p=256, num_warps=4)


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


def config_for(seq_onehot, pwm) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(seq_onehot, pwm))
  return dict(tuned) if tuned else _default_config()


def kernel(seq_onehot, pwm, *, interpret: bool = False, config=None):
  """The pwm's scores at every valid position; `config` (keys of CONFIG_SPACE) overrides the
  tuned one."""
  return _pwm_scan(seq_onehot, pwm, interpret=interpret,
                   **{**config_for(seq_onehot, pwm), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _pwm_scan(seq_onehot, pwm, *, interpret: bool, block_p: int, num_warps: int):
  length, channels = seq_onehot.shape
  width = pwm.shape[1]
  if pwm.shape[0] != channels or channels & (channels - 1):
    raise ValueError(f"{seq_onehot.shape=} and {pwm.shape=} must be (L, C), (C, W), "
                     "C a power of two")
  if not 1 <= width <= length:
    raise ValueError(f"{width=} must be in [1, {length=}]")
  positions = length - width + 1
  return pl.pallas_call(
      functools.partial(_pwm_scan_kernel, block_p=block_p),
      grid=(pl.cdiv(positions, block_p),),
      out_shape=jax.ShapeDtypeStruct((positions,), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(seq_onehot, pwm)
