"""Positive control (relu): the math inside the kernel calls jax.nn.relu on a row block. Expected: pass."""
import functools

import jax
from jax.experimental import pallas as pl


def _body(x_ref, o_ref):
  o_ref[...] = jax.nn.relu(x_ref[...])


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  rows = 64
  spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_body, grid=(pl.cdiv(x.shape[0], rows),), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)
