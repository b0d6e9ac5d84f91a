"""Negative control (relu): a leaky relu, close to but not relu. Expected: incorrect."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _leaky(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.where(x > 0, x, 0.01 * x)


def kernel(x, interpret=False):
  return pl.pallas_call(_leaky, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
