"""Adversarial control, class 8 (correct on the nominal inputs only), softmax.

exp(x) / sum(exp(x)) per row without subtracting the row max: right on standard-normal rows,
but exp overflows float32 above 88, so on the shifted family (x + 100) every output is
inf / inf = NaN. One program per row, the row loaded whole (padded to a power of two).

Expected: incorrect, with a reason naming input family 'shifted' and NaN outputs.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton


def _row_softmax(x_ref, o_ref, *, width: int):
  cols = jnp.arange(o_ref.shape[-1])
  row = pltriton.load(x_ref.at[pl.program_id(0)], mask=cols < width, other=-jnp.inf)
  e = jnp.exp(row)
  pltriton.store(o_ref.at[pl.program_id(0)], e / jnp.sum(e), mask=cols < width)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  padded = pl.next_power_of_2(m)
  out = pl.pallas_call(functools.partial(_row_softmax, width=m), grid=(n,),
                       out_shape=jax.ShapeDtypeStruct((n, padded), x.dtype),
                       interpret=interpret)(jnp.pad(x, ((0, 0), (0, padded - m))))
  return out[:, :m]
