"""Negative control (relu): NaN wherever x < -3. Expected: incorrect."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _relu_nan(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.where(x < -3.0, jnp.nan, jnp.maximum(x, 0.0))


def kernel(x, interpret=False):
  return pl.pallas_call(_relu_nan, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
