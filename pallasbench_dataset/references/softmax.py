"""softmax: per row exp(x - max) / sum(exp(x - max))."""
import jax


def reference(x):
  return jax.nn.softmax(x, axis=-1)
