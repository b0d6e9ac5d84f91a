"""pwm_scan: out[p] = sum_j sum_c seq[p + j, c] * pwm[c, j] (a valid 1-D cross-correlation);
seq_onehot (L, 4), pwm (4, W) float32 -> (L - W + 1,), any L >= W.

GPU fix: each program scores BLOCK_P consecutive positions. For every tap j (a static loop:
W is known at trace time) it reads the (BLOCK_P, 4) window seq[p0 + j : p0 + j + BLOCK_P]
straight from the whole-array ref, so neighbouring blocks share their W - 1 halo rows
without any copy, and accumulates window * pwm[:, j] summed over the 4 channels in float32
multiply-adds (no TF32 dot: the task has reduction tolerance). Rows past L read as 0 and
positions past L - W are not stored, so the output length need not be a power of two.
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
BLOCK_P: Final = 256
NUM_WARPS: Final = 4


def _pwm_scan_kernel(seq_ref, pwm_ref, o_ref):
  length = seq_ref.shape[0]
  width = pwm_ref.shape[1]
  p0 = pl.program_id(0) * BLOCK_P
  pos = p0 + jnp.arange(BLOCK_P)
  acc = jnp.zeros((BLOCK_P,), jnp.float32)
  for j in range(width):
    window = pltriton.load(seq_ref.at[pl.ds(p0 + j, BLOCK_P), :],
                           mask=(pos + j < length)[:, None], other=0.0)
    acc += jnp.sum(window * pwm_ref[:, j][None, :], axis=1)
  pltriton.store(o_ref.at[pl.ds(p0, BLOCK_P)], acc, mask=pos < length - width + 1)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(seq_onehot, pwm, *, interpret: bool = False):
  length, channels = seq_onehot.shape
  width = pwm.shape[1]
  if pwm.shape[0] != channels or channels & (channels - 1):
    raise ValueError(f"{seq_onehot.shape=} and {pwm.shape=} must be (L, C), (C, W), "
                     "C a power of two")
  if not 1 <= width <= length:
    raise ValueError(f"{width=} must be in [1, {length=}]")
  positions = length - width + 1
  return pl.pallas_call(
      _pwm_scan_kernel, grid=(pl.cdiv(positions, BLOCK_P),),
      out_shape=jax.ShapeDtypeStruct((positions,), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=NUM_WARPS, num_stages=1),
      interpret=interpret, name=TASK_NAME)(seq_onehot, pwm)
