"""Adversarial control, class 11 (right only where the judge looked), cross_entropy.

-sum(labels * log(softmax(logits))) per row, the softmax with its row max subtracted: right
to an ulp while every exp(logit - max) is a normal float, wrong (denormal, flushed to 0 on a
GPU) and then inf (labels * log(0)) once a row's logits span more than about 87, where the
stable logsumexp(logits) - sum(labels * logits) is exact. The soft labels are positive in
every column, so one underflowed column is enough. The task's families shift the logits (no
change of spread) or scale them by 10 (a row of 64 standard normals spans about 50): none
reaches a row that spans 87 (fused_softmax_cross_entropy has `spiked` for this; the
soft-label loss has no such family). One program per row, the row loaded whole and upcast.

Expected: incorrect, at float32 and bfloat16, on a family whose logits span more than ~90.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton


def _row_loss(x_ref, t_ref, o_ref, *, width: int):
  cols = jnp.arange(x_ref.shape[-1])
  row = pltriton.load(x_ref.at[pl.program_id(0)], mask=cols < width,
                      other=-jnp.inf).astype(jnp.float32)
  labels = pltriton.load(t_ref.at[pl.program_id(0)], mask=cols < width,
                         other=0.0).astype(jnp.float32)
  e = jnp.exp(row - jnp.max(row))
  logp = jnp.log(e / jnp.sum(e))
  loss = -jnp.sum(jnp.where(cols < width, labels * logp, 0.0))
  o_ref[pl.program_id(0)] = loss.astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(logits, labels, interpret=False):
  n, c = logits.shape
  padded = pl.next_power_of_2(c)
  pad = ((0, 0), (0, padded - c))
  return pl.pallas_call(functools.partial(_row_loss, width=c), grid=(n,),
                        out_shape=jax.ShapeDtypeStruct((n,), logits.dtype),
                        interpret=interpret)(jnp.pad(logits, pad), jnp.pad(labels, pad))
