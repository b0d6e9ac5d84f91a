"""Adversarial control, class 9 (below the task's precision), layernorm at float32.

A float32 task answered in bfloat16: the row is rounded to bfloat16 as it is loaded, the
statistics are taken in float32 (two passes), and the result is rounded to bfloat16 before it
is stored as float32. Half the bytes' worth of work, errors of 2^-9 relative and more. One
program per row.

Expected at float32: incorrect, 'not allclose(rtol=0.0001' on the nominal seeds.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

EPS = 1e-5


def _row_layernorm(x_ref, o_ref, *, width: int):
  cols = jnp.arange(o_ref.shape[-1])
  ok = cols < width
  row = pltriton.load(x_ref.at[pl.program_id(0)], mask=ok, other=0.0)
  row = row.astype(jnp.bfloat16).astype(jnp.float32)
  mean = jnp.sum(row) / width
  centered = jnp.where(ok, row - mean, 0.0)
  out = centered * jax.lax.rsqrt(jnp.sum(centered * centered) / width + EPS)
  pltriton.store(o_ref.at[pl.program_id(0)],
                 out.astype(jnp.bfloat16).astype(o_ref.dtype), mask=ok)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, d = x.shape
  padded = pl.next_power_of_2(d)
  out = pl.pallas_call(functools.partial(_row_layernorm, width=d), grid=(n,),
                       out_shape=jax.ShapeDtypeStruct((n, padded), x.dtype),
                       interpret=interpret)(jnp.pad(x, ((0, 0), (0, padded - d))))
  return out[:, :d]
