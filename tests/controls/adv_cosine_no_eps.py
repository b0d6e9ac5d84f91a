"""Adversarial control, class 8 (correct on the nominal inputs only), cosine_sim.

sum(x y) / (|x| |y|) per row without the + 1e-8: right wherever the norms are far from zero,
NaN (0 / 0) on an all-zero row, where the task's epsilon gives 0. Blocks of 16 whole rows.

Expected: incorrect, on the family with zero rows.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 16


def _row_cosine(x_ref, y_ref, o_ref):
  x = x_ref[...].astype(jnp.float32)
  y = y_ref[...].astype(jnp.float32)
  norms = jnp.sqrt(jnp.sum(x * x, axis=1)) * jnp.sqrt(jnp.sum(y * y, axis=1))
  o_ref[...] = (jnp.sum(x * y, axis=1) / norms).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, interpret=False):
  n, m = x.shape
  if n % BLOCK_ROWS or m != pl.next_power_of_2(m):
    raise ValueError(f"{x.shape=}: rows must be a multiple of {BLOCK_ROWS=}, columns a power of 2")
  rows = pl.BlockSpec((BLOCK_ROWS, m), lambda i: (i, 0))
  return pl.pallas_call(_row_cosine, grid=(n // BLOCK_ROWS,), in_specs=[rows, rows],
                        out_specs=pl.BlockSpec((BLOCK_ROWS,), lambda i: (i,)),
                        out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
                        interpret=interpret)(x, y)
