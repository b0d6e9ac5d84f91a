"""Adversarial control, class 9 (below the task's precision), softmax at bfloat16.

A max-subtracted row softmax computed in float32 whose result is rounded through float8 e4m3
(4 significant bits: up to 6% relative error) before it is stored as bfloat16: half the bytes
of a bfloat16 output's precision thrown away. One program per row.

Expected at bfloat16: incorrect, 'not allclose' on the nominal seeds.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton


def _row_softmax(x_ref, o_ref, *, width: int):
  cols = jnp.arange(o_ref.shape[-1])
  row = pltriton.load(x_ref.at[pl.program_id(0)], mask=cols < width,
                      other=-jnp.inf).astype(jnp.float32)
  e = jnp.exp(row - jnp.max(row))
  low = (e / jnp.sum(e)).astype(jnp.float8_e4m3fn)
  pltriton.store(o_ref.at[pl.program_id(0)], low.astype(o_ref.dtype), mask=cols < width)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  padded = pl.next_power_of_2(m)
  out = pl.pallas_call(functools.partial(_row_softmax, width=m), grid=(n,),
                       out_shape=jax.ShapeDtypeStruct((n, padded), x.dtype),
                       interpret=interpret)(jnp.pad(x, ((0, 0), (0, padded - m))))
  return out[:, :m]
