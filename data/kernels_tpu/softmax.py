"""softmax: per row exp(x - max) / sum(exp(x - max)); x (N, M).

TPU-oriented original: blocks of up to 128 full rows, so every row's max and sum are taken in
one pass over the block; one grid step per block, no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "softmax"
BLOCK_ROWS: Final = 128


def _softmax_kernel(x_ref, o_ref):
  x = x_ref[...]
  e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
  o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, *, interpret: bool = False):
  n, m = x.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  spec = pl.BlockSpec((block_rows, m), lambda i: (i, 0))
  return pl.pallas_call(
      _softmax_kernel, grid=(n // block_rows,), in_specs=[spec], out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret, name=TASK_NAME)(x)
