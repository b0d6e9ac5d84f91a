"""silu: x * sigmoid(x) = x / (1 + exp(-x)), elementwise; x (N, M) float32.

TPU-oriented original: row blocks of up to 1024 full-width rows, one grid step per block,
no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "silu"
BLOCK_ROWS: Final = 1024


def _silu_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = x / (1.0 + jnp.exp(-x))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, *, interpret: bool = False):
  n, m = x.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  spec = pl.BlockSpec((block_rows, m), lambda i: (i, 0))
  return pl.pallas_call(
      _silu_kernel, grid=(n // block_rows,), in_specs=[spec], out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret, name=TASK_NAME)(x)
