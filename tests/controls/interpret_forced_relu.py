"""Negative control (relu): always interpret=True, so on a GPU it never runs as a kernel.
Expected: rejected on a GPU; indistinguishable from a real kernel on the CPU."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=True)(x)
