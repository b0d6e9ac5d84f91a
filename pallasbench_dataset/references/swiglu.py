"""swiglu: silu(x @ w_gate) * (x @ w_up); x (M, K), w_gate and w_up (K, N)."""
import jax
import jax.numpy as jnp


def reference(x, w_gate, w_up):
  return jax.nn.silu(jnp.matmul(x, w_gate)) * jnp.matmul(x, w_up)
