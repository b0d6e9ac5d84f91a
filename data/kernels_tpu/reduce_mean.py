"""reduce_mean: row means of x (N, M) -> (N,).

TPU-oriented original: input blocks of up to 256 full rows, each reduced in one pass to a
(256, 1) column block of an (N, 1) output (2-D blocks, as Mosaic prefers), flattened outside;
one grid step per block, no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "reduce_mean"
BLOCK_ROWS: Final = 256


def _reduce_mean_kernel(x_ref, o_ref):
  o_ref[...] = jnp.mean(x_ref[...], axis=-1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, *, interpret: bool = False):
  n, m = x.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  out = pl.pallas_call(
      _reduce_mean_kernel, grid=(n // block_rows,),
      in_specs=[pl.BlockSpec((block_rows, m), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((block_rows, 1), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((n, 1), x.dtype), interpret=interpret, name=TASK_NAME)(x)
  return out[:, 0]
