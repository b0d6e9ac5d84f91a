"""Negative control (sigmoid): writes 0.5 everywhere, sigmoid's mean. Expected: rejected."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _half(x_ref, o_ref):
  o_ref[...] = jnp.full(o_ref.shape, 0.5, o_ref.dtype)


def kernel(x, interpret=False):
  return pl.pallas_call(_half, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
