"""log_softmax: per row (x - max) - log(sum(exp(x - max)))."""
import jax


def reference(x):
  return jax.nn.log_softmax(x, axis=-1)
