"""Honest control, class 15 (the verdict cache), relu: a data-dependent fast path done right.

The neighbour of adv_cache_lottery_relu: the same corner test picks one of two formulas for
the block (x * (x > 0) when the corner looks "lucky", max(x, 0) otherwise), and both are relu,
exactly. Every evaluation passes it, so judging its pass again on fresh seeds only costs time.

Expected: pass (test_attacks.py), every time it is judged.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 64


def _body(x_ref, corner_ref, o_ref):
  x = x_ref[...]
  lucky = corner_ref[0, 0] > 4.5 * jnp.abs(corner_ref[0, 1])
  o_ref[...] = jnp.where(lucky, x * (x > 0.0).astype(x.dtype), jnp.maximum(x, 0.0))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  corner = pl.BlockSpec((8, x.shape[1]), lambda i: (0, 0))
  return pl.pallas_call(_body, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec, corner],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x, x)
