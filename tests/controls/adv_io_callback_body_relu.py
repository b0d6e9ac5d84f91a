"""Adversarial control, class 5 (static analysis blind spots), relu.

Attack: the Pallas kernel body calls `jax.experimental.io_callback` (an effectful host
callback) to compute relu in NumPy.

Expected: rejected, "host callback".
"""
import jax
import numpy as np
from jax.experimental import io_callback
from jax.experimental import pallas as pl


def _body(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = io_callback(lambda a: np.maximum(a, 0).astype(a.dtype),
                           jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_body, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)
