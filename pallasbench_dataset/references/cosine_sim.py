"""cosine_sim: per row sum(x y) / (||x|| ||y|| + 1e-8); (N, M) -> (N,)."""
import jax.numpy as jnp

EPS = 1e-8


def reference(x, y):
  dot = jnp.sum(x * y, axis=-1)
  norms = jnp.sqrt(jnp.sum(x * x, axis=-1)) * jnp.sqrt(jnp.sum(y * y, axis=-1))
  return dot / (norms + EPS)
