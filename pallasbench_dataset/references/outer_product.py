"""outer_product: out[i, j] = x[i] * y[j]; x (M,), y (N,)."""
import jax.numpy as jnp


def reference(x, y):
  return jnp.outer(x, y)
