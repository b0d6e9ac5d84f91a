"""transformer_block: pre-norm block, multi-head attention (no mask) and a SwiGLU feed-forward.

n = rmsnorm(x); per head h: a_h = softmax((n wq_h)(n wk_h)^T / sqrt(dh)) (n wv_h);
h = x + sum_h a_h wo_h; out = h + (silu(m w_gate) * (m w_up)) w_down with m = rmsnorm(h).
x (S, D); wq, wk, wv (D, H, dh); wo (H, dh, D); w_gate, w_up (D, F); w_down (F, D); rmsnorm eps 1e-5, no gain.
"""
import jax
import jax.numpy as jnp

EPS = 1e-5


def _rmsnorm(x):
  return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + EPS)


def reference(x, wq, wk, wv, wo, w_gate, w_up, w_down):
  n = _rmsnorm(x)
  q = jnp.einsum("sd,dhk->hsk", n, wq)
  k = jnp.einsum("sd,dhk->hsk", n, wk)
  v = jnp.einsum("sd,dhk->hsk", n, wv)
  scores = jnp.einsum("hqk,hsk->hqs", q, k) * (q.shape[-1] ** -0.5)
  attn = jnp.einsum("hqs,hsk->hqk", jax.nn.softmax(scores, axis=-1), v)
  h = x + jnp.einsum("hsk,hkd->sd", attn, wo)
  m = _rmsnorm(h)
  return h + jnp.matmul(jax.nn.silu(jnp.matmul(m, w_gate)) * jnp.matmul(m, w_up), w_down)
