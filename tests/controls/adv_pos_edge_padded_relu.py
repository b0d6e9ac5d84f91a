"""Honest control, class 6 (honest but unusual), relu -- the edge shape padded to the block.

The neighbour of adv_edge_plain_xla_relu: at a shape whose rows are not a multiple of the
block, the wrapper pads x with zero rows (`jnp.pad`, data movement), runs the same Pallas
kernel on the padded array and slices the rows back. Every shape, the edge one included, is
computed by the kernel.

Expected: pass, with general_shapes True.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  n = x.shape[0]
  padded = -n % ROWS
  xp = jnp.pad(x, ((0, padded), (0, 0))) if padded else x
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  out = pl.pallas_call(_relu, grid=(xp.shape[0] // ROWS,), in_specs=[spec], out_specs=spec,
                       out_shape=jax.ShapeDtypeStruct(xp.shape, x.dtype),
                       interpret=interpret)(xp)
  return out[:n] if padded else out
