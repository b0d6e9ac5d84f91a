"""log: log(x + 1e-7), elementwise; x (N, M) float32, uniform in [0.1, 5).

TPU-oriented original: row blocks of up to 1024 full-width rows, one grid step per block,
no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "log"
BLOCK_ROWS: Final = 1024
EPS: Final = 1e-7


def _log_kernel(x_ref, o_ref):
  o_ref[...] = jnp.log(x_ref[...] + EPS)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, *, interpret: bool = False):
  n, m = x.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  spec = pl.BlockSpec((block_rows, m), lambda i: (i, 0))
  return pl.pallas_call(
      _log_kernel, grid=(n // block_rows,), in_specs=[spec], out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret, name=TASK_NAME)(x)
