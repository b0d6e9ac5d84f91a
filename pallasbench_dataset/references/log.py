"""log: log(x + 1e-7), elementwise; x uniform in [0.1, 5)."""
import jax.numpy as jnp


def reference(x):
  return jnp.log(x + 1e-7)
