"""pwm_scan: out[p] = sum_j sum_c seq[p + j, c] * pwm[c, j] (valid cross-correlation); (L, 4), (4, W) -> (L - W + 1,)."""
import jax.numpy as jnp


def reference(seq_onehot, pwm):
  width = pwm.shape[1]
  positions = seq_onehot.shape[0] - width + 1
  out = jnp.zeros((positions,), jnp.float32)
  for j in range(width):
    out = out + jnp.sum(seq_onehot[j:j + positions] * pwm[:, j], axis=-1)
  return out
