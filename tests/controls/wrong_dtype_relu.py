"""Negative control (relu): returns float16. Expected: error (output_error)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0).astype(o_ref.dtype)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float16),
                        interpret=interpret)(x)
