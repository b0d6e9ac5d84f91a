"""sigmoid_bce: elementwise BCE with logits, max(z, 0) - z t + log1p(exp(-|z|)); z, t (N, M).

The stable form never exponentiates a positive number; targets t are in [0, 1]. TPU-oriented
original: logits, targets and the output in row blocks of up to 1024 full-width rows, one grid
step per block, no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "sigmoid_bce"
BLOCK_ROWS: Final = 1024


def _sigmoid_bce_kernel(logits_ref, targets_ref, o_ref):
  z = logits_ref[...]
  o_ref[...] = jnp.maximum(z, 0.0) - z * targets_ref[...] + jnp.log1p(jnp.exp(-jnp.abs(z)))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(logits, targets, *, interpret: bool = False):
  n, m = logits.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  spec = pl.BlockSpec((block_rows, m), lambda i: (i, 0))
  return pl.pallas_call(
      _sigmoid_bce_kernel, grid=(n // block_rows,), in_specs=[spec, spec], out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(logits.shape, logits.dtype), interpret=interpret,
      name=TASK_NAME)(logits, targets)
