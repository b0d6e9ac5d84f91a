"""cosine_sim: per row sum(x y) / (||x|| ||y|| + 1e-8); x, y (N, M) -> (N,).

TPU-oriented original: x and y in blocks of up to 256 full rows, the three row sums taken in
one pass and written to a (256, 1) column block of an (N, 1) output (flattened outside); one
grid step per block, no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "cosine_sim"
BLOCK_ROWS: Final = 256
EPS: Final = 1e-8


def _cosine_sim_kernel(x_ref, y_ref, o_ref):
  x = x_ref[...]
  y = y_ref[...]
  dot = jnp.sum(x * y, axis=-1, keepdims=True)
  norm_x = jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True))
  norm_y = jnp.sqrt(jnp.sum(y * y, axis=-1, keepdims=True))
  o_ref[...] = dot / (norm_x * norm_y + EPS)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, *, interpret: bool = False):
  n, m = x.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  rows = pl.BlockSpec((block_rows, m), lambda i: (i, 0))
  out = pl.pallas_call(
      _cosine_sim_kernel, grid=(n // block_rows,), in_specs=[rows, rows],
      out_specs=pl.BlockSpec((block_rows, 1), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((n, 1), x.dtype), interpret=interpret,
      name=TASK_NAME)(x, y)
  return out[:, 0]
