"""fused_softmax_cross_entropy (hard labels): logsumexp(logits[i]) - logits[i, labels[i]]; (N, V), (N,) -> (N,)."""
import jax
import jax.numpy as jnp


def reference(logits, labels):
  target = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
  return jax.nn.logsumexp(logits, axis=-1) - target
