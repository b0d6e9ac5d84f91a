"""triangle_update: AlphaFold-style triangle multiplicative update, outgoing edges.

x = layernorm_C(z) (no affine, eps 1e-5); a = (x @ w_a) * mask[..., None]; b = (x @ w_b) * mask[..., None];
t[i, j, c] = sum_k a[i, k, c] * b[j, k, c]; out = z + sigmoid(x @ w_g) * (layernorm_C(t) @ w_o).
z (N, N, C), mask (N, N) in {0, 1}, w_a, w_b, w_g, w_o (C, C) -> (N, N, C).
"""
import jax
import jax.numpy as jnp

EPS = 1e-5


def _layernorm(x):
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + EPS)


def reference(z, mask, w_a, w_b, w_g, w_o):
  x = _layernorm(z)
  a = jnp.matmul(x, w_a) * mask[..., None]
  b = jnp.matmul(x, w_b) * mask[..., None]
  t = jnp.einsum("ikc,jkc->ijc", a, b)
  return z + jax.nn.sigmoid(jnp.matmul(x, w_g)) * jnp.matmul(_layernorm(t), w_o)
