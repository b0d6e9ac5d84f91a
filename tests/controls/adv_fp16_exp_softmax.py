"""Adversarial control, class 8 (correct on the nominal inputs only), softmax.

A max-subtracted row softmax that computes exp in float16 (about 2.4e-3 relative error):
inside an absolute atol of 1e-4, which is 2.5% of a 256-wide softmax's outputs, but far
outside rtol 1e-4 once atol follows the outputs' scale. One program per row.

Expected: incorrect, 'not allclose' on the nominal seeds.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton


def _row_softmax(x_ref, o_ref, *, width: int):
  cols = jnp.arange(o_ref.shape[-1])
  row = pltriton.load(x_ref.at[pl.program_id(0)], mask=cols < width, other=-jnp.inf)
  e = jnp.exp((row - jnp.max(row)).astype(jnp.float16)).astype(jnp.float32)
  pltriton.store(o_ref.at[pl.program_id(0)], e / jnp.sum(e), mask=cols < width)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  padded = pl.next_power_of_2(m)
  out = pl.pallas_call(functools.partial(_row_softmax, width=m), grid=(n,),
                       out_shape=jax.ShapeDtypeStruct((n, padded), x.dtype),
                       interpret=interpret)(jnp.pad(x, ((0, 0), (0, padded - m))))
  return out[:, :m]
