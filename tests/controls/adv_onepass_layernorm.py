"""Adversarial control, class 8 (correct on the nominal inputs only), layernorm.

The one-pass variance E[x^2] - E[x]^2: right on standard-normal rows, but it cancels when
the rows' mean is far from zero; on the shifted family (x + 35, rows whose mean is 35
standard deviations away) its outputs are off by about twice the tolerance, where a
two-pass variance stays inside it. One program per row, the row loaded whole.

Expected: incorrect, with a reason naming input family 'shifted'.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

EPS = 1e-5


def _row_layernorm(x_ref, o_ref, *, width: int):
  cols = jnp.arange(o_ref.shape[-1])
  row = pltriton.load(x_ref.at[pl.program_id(0)], mask=cols < width, other=0.0)
  mean = jnp.sum(row) / width
  var = jnp.sum(row * row) / width - mean * mean
  pltriton.store(o_ref.at[pl.program_id(0)], (row - mean) * jax.lax.rsqrt(var + EPS),
                 mask=cols < width)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, d = x.shape
  padded = pl.next_power_of_2(d)
  out = pl.pallas_call(functools.partial(_row_layernorm, width=d), grid=(n,),
                       out_shape=jax.ShapeDtypeStruct((n, padded), x.dtype),
                       interpret=interpret)(jnp.pad(x, ((0, 0), (0, padded - d))))
  return out[:, :d]
