"""Negative control (relu): correct output, but zeroes its input buffer. Expected: rejected."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _relu_and_clobber(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)
  x_ref[...] = jnp.zeros(x_ref.shape, x_ref.dtype)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu_and_clobber, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
