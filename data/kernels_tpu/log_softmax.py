"""log_softmax: per row (x - max) - log(sum(exp(x - max))); x (N, M).

TPU-oriented original: blocks of up to 128 full rows, so every row's max and sum are taken in
one pass over the block; one grid step per block, no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "log_softmax"
BLOCK_ROWS: Final = 128


def _log_softmax_kernel(x_ref, o_ref):
  x = x_ref[...]
  shifted = x - jnp.max(x, axis=-1, keepdims=True)
  o_ref[...] = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, *, interpret: bool = False):
  n, m = x.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  spec = pl.BlockSpec((block_rows, m), lambda i: (i, 0))
  return pl.pallas_call(
      _log_softmax_kernel, grid=(n // block_rows,), in_specs=[spec], out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret, name=TASK_NAME)(x)
