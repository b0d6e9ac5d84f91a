"""Negative control (matmul): x @ y in XLA, copied through a trivial kernel. Expected: rejected."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _copy(p_ref, o_ref):
  o_ref[...] = p_ref[...]


def kernel(x, y, interpret=False):
  product = jnp.matmul(x, y)
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(product.shape, product.dtype),
                        interpret=interpret)(product)
