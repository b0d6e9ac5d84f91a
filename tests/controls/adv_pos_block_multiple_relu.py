"""Honest control, class 6 (honest but unusual), relu.

Works only on shapes that are multiples of its (128, 128) blocks and says so: it raises
ValueError otherwise. Evaluated with the edge check ON (the edge shape, 1000 x 300, is not
a multiple).

Expected: pass, with general_shapes False, edge_error set (the ValueError) and no reasons.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = (128, 128)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  n, m = x.shape
  if n % BLOCK[0] or m % BLOCK[1]:
    raise ValueError(f"shape {x.shape} is not a multiple of the {BLOCK} blocks")
  spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))
  return pl.pallas_call(_relu, grid=(n // BLOCK[0], m // BLOCK[1]), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
