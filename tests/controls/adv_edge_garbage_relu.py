"""Adversarial control, class 8 (correct on the nominal inputs only), relu.

(256, 256) blocks on a grid of n // 256 by m // 256: exact on the registered sizes (all
multiples), but at the edge shape (1000 x 300) the tail rows and columns are never written
(NaN in interpret mode, stale memory on a GPU): garbage returned, not a refusal. Evaluated
with the edge check on.

Expected: incorrect, with a reason naming the edge shape; general_shapes False.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = (256, 256)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  n, m = x.shape
  spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))
  return pl.pallas_call(_relu, grid=(n // BLOCK[0], m // BLOCK[1]), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
