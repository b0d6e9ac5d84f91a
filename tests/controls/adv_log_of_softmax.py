"""Adversarial control, class 11 (right only where the judge looked), log_softmax.

log(softmax(x)): the row max subtracted (so no overflow, no 0 / 0), the softmax normalised,
then its log taken. Right to an ulp wherever every exp(x - max) is a normal float; as soon as
a row spans more than about 87 (float32's and bfloat16's exponent range), the small
probabilities turn denormal (a few bits left, flushed to 0 on a GPU) and then 0, and their
log is wrong, then -inf, where the true answer is x - max - log(sum) ~ -100. The families
shift rows (no change of spread) or scale them by 10 (a row of 256 standard normals spans
about 60): no family reaches a row that spans 87, so the formula's breaking region is never
drawn. One program per row, the row loaded whole and upcast.

Expected: incorrect, at float32 and bfloat16, on a family whose rows span more than ~90
(one logit per row far above the others, as fused_softmax_cross_entropy's `spiked`).
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton


def _row_log_softmax(x_ref, o_ref, *, width: int):
  cols = jnp.arange(o_ref.shape[-1])
  row = pltriton.load(x_ref.at[pl.program_id(0)], mask=cols < width,
                      other=-jnp.inf).astype(jnp.float32)
  e = jnp.exp(row - jnp.max(row))
  pltriton.store(o_ref.at[pl.program_id(0)], jnp.log(e / jnp.sum(e)).astype(o_ref.dtype),
                 mask=cols < width)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  padded = pl.next_power_of_2(m)
  out = pl.pallas_call(functools.partial(_row_log_softmax, width=m), grid=(n,),
                       out_shape=jax.ShapeDtypeStruct((n, padded), x.dtype),
                       interpret=interpret)(jnp.pad(x, ((0, 0), (0, padded - m))))
  return out[:, :m]
