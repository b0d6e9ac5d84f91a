"""layernorm: per row (x - mean) / sqrt(var + 1e-5), population variance, no gain or bias."""
import jax
import jax.numpy as jnp

EPS = 1e-5


def reference(x):
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + EPS)
