"""gelu (tanh form): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise."""
import jax


def reference(x):
  return jax.nn.gelu(x, approximate=True)
