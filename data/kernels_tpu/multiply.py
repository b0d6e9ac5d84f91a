"""multiply: x * y, elementwise; x, y (N, M) float32.

TPU-oriented original: x, y and the output in row blocks of up to 1024 full-width rows,
one grid step per block, no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
from jax.experimental import pallas as pl

TASK_NAME: Final = "multiply"
BLOCK_ROWS: Final = 1024


def _multiply_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] * y_ref[...]


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, *, interpret: bool = False):
  n, m = x.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  spec = pl.BlockSpec((block_rows, m), lambda i: (i, 0))
  return pl.pallas_call(
      _multiply_kernel, grid=(n // block_rows,), in_specs=[spec, spec], out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret,
      name=TASK_NAME)(x, y)
