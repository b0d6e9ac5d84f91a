"""Honest control, class 6 (honest but unusual), relu -- two kernels and an intermediate.

The neighbour of adv_stale_temp_relu: a buffer that lives only inside the call. The first
kernel writes every element of an intermediate (the mask x > 0, as 0.0 or 1.0) and the second
reads it with x and returns x * mask. The intermediate is a kernel result that @main does not
return, like adv_stale_temp_relu's memo, but every element of it is written by this call
before anything reads it.

Expected: pass.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _mask(x_ref, m_ref):
  m_ref[...] = (x_ref[...] > 0.0).astype(m_ref.dtype)


def _apply(x_ref, m_ref, o_ref):
  o_ref[...] = x_ref[...] * m_ref[...]


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  grid = (pl.cdiv(x.shape[0], ROWS),)
  shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
  mask = pl.pallas_call(_mask, grid=grid, in_specs=[spec], out_specs=spec, out_shape=shape,
                        interpret=interpret)(x)
  return pl.pallas_call(_apply, grid=grid, in_specs=[spec, spec], out_specs=spec,
                        out_shape=shape, interpret=interpret)(x, mask)
