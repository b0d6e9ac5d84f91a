"""clamp: clip(x, -1, 1), elementwise; x is normal * 2 so that clipping happens."""
import jax.numpy as jnp


def reference(x):
  return jnp.clip(x, -1.0, 1.0)
