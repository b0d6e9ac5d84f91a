"""sigmoid_bce: elementwise BCE with logits, stable form max(z, 0) - z t + log1p(exp(-|z|)); t in [0, 1]."""
import jax.numpy as jnp


def reference(logits, targets):
  z = logits
  return jnp.maximum(z, 0.0) - z * targets + jnp.log1p(jnp.exp(-jnp.abs(z)))
