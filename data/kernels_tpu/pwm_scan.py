"""pwm_scan: out[p] = sum_j sum_c seq[p + j, c] * pwm[c, j], p = 0..L-W (valid cross-correlation).

seq_onehot (L, 4) one-hot A/C/G/T, pwm (4, W) -> (L - W + 1,). TPU-oriented original: one
program (grid (1,)) holds the whole sequence, the motif transposed to (W, 4) and the whole
output as an (L - W + 1, 1) column. A Python loop over the W motif positions multiplies the
shifted window seq[j:j + P] by motif row j, and one lane sum over the 4 bases finishes it.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "pwm_scan"


def _pwm_scan_kernel(seq_ref, pwm_t_ref, o_ref):
  positions = o_ref.shape[0]
  acc = jnp.zeros((positions, seq_ref.shape[1]), jnp.float32)
  for j in range(pwm_t_ref.shape[0]):  # unrolled over the W motif positions
    acc = acc + seq_ref[j:j + positions, :] * pwm_t_ref[j:j + 1, :]
  o_ref[...] = jnp.sum(acc, axis=-1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(seq_onehot, pwm, *, interpret: bool = False):
  length, bases = seq_onehot.shape
  width = pwm.shape[1]
  positions = length - width + 1
  if positions < 1:
    raise ValueError(f"{length=} must be at least the motif {width=}")
  out = pl.pallas_call(
      _pwm_scan_kernel, grid=(1,),
      in_specs=[pl.BlockSpec((length, bases), lambda i: (0, 0)),
                pl.BlockSpec((width, bases), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((positions, 1), lambda i: (0, 0)),
      out_shape=jax.ShapeDtypeStruct((positions, 1), jnp.float32), interpret=interpret,
      name=TASK_NAME)(seq_onehot, pwm.T)
  return out[:, 0]
