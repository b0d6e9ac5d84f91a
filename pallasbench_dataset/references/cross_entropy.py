"""cross_entropy (soft labels): per row -sum_c labels[c] * log_softmax(logits)[c]; (N, C) -> (N,)."""
import jax
import jax.numpy as jnp


def reference(logits, labels):
  return -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)
