"""Positive control (add): 2-D (32, 128) BlockSpec tiles. Expected: pass."""
import functools

import jax
from jax.experimental import pallas as pl


def _add(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, interpret=False):
  spec = pl.BlockSpec((32, 128), lambda i, j: (i, j))
  return pl.pallas_call(_add, grid=(x.shape[0] // 32, x.shape[1] // 128), in_specs=[spec, spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x, y)
