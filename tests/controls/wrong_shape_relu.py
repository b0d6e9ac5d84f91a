"""Negative control (relu): returns only the left half of the columns. Expected: error (output_error)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _left_half(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[:, pl.ds(0, o_ref.shape[1])], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_left_half, out_shape=jax.ShapeDtypeStruct((x.shape[0], x.shape[1] // 2), x.dtype),
                        interpret=interpret)(x)
