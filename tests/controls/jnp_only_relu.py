"""Negative control (relu): plain jax.numpy, no Pallas at all. Expected: rejected."""
import jax.numpy as jnp


def kernel(x, interpret=False):
  return jnp.maximum(x, 0.0)
