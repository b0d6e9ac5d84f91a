"""geglu: gelu_tanh(x @ w_gate) * (x @ w_up); x (M, K), w_gate and w_up (K, N)."""
import jax
import jax.numpy as jnp


def reference(x, w_gate, w_up):
  return jax.nn.gelu(jnp.matmul(x, w_gate), approximate=True) * jnp.matmul(x, w_up)
