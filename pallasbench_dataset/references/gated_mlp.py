"""gated_mlp: (silu(x @ w_gate) * (x @ w_up)) @ w_down; x (M, D), w_gate, w_up (D, F), w_down (F, D)."""
import jax
import jax.numpy as jnp


def reference(x, w_gate, w_up, w_down):
  hidden = jax.nn.silu(jnp.matmul(x, w_gate)) * jnp.matmul(x, w_up)
  return jnp.matmul(hidden, w_down)
