"""Adversarial control, class 8 (correct on the nominal inputs only), sigmoid_bce.

The textbook form -(t log(sigmoid(z)) + (1 - t) log(1 - sigmoid(z))), in float32 inside the
kernel: right for moderate logits, inf once 1 - sigmoid(z) rounds to 0 (z above about 17)
where t < 1. At bfloat16 the float32 saturation family is left out (the bfloat16 baseline
fails it), so only a saturating family conditioned for bfloat16 catches it. Blocks of 32
whole rows.

Expected at bfloat16: incorrect, on the saturated family with hard labels.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 32


def _bce_kernel(z_ref, t_ref, o_ref):
  z = z_ref[...].astype(jnp.float32)
  t = t_ref[...].astype(jnp.float32)
  p = 1.0 / (1.0 + jnp.exp(-z))
  o_ref[...] = (-(t * jnp.log(p) + (1.0 - t) * jnp.log(1.0 - p))).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(logits, targets, interpret=False):
  n, m = logits.shape
  if n % BLOCK_ROWS or m != pl.next_power_of_2(m):
    raise ValueError(f"{logits.shape=}: rows must be a multiple of {BLOCK_ROWS=}, columns a "
                     "power of 2")
  block = pl.BlockSpec((BLOCK_ROWS, m), lambda i: (i, 0))
  return pl.pallas_call(_bce_kernel, grid=(n // BLOCK_ROWS,), in_specs=[block, block],
                        out_specs=block, out_shape=jax.ShapeDtypeStruct(logits.shape, logits.dtype),
                        interpret=interpret)(logits, targets)
