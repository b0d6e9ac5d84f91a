"""nucleotide_onehot: (L,) codes 0..3 = A,C,G,T -> (L, 4) float32 one-hot; code 4 (N) gives a zero row."""
import jax
import jax.numpy as jnp


def reference(seq):
  return jax.nn.one_hot(seq, 4, dtype=jnp.float32)
