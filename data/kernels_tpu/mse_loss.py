"""mse_loss: per row mean((pred - target)^2); pred, target (N, M) -> (N,).

TPU-oriented original: pred and target in blocks of up to 256 full rows, each reduced to a
(256, 1) column block of an (N, 1) output (flattened outside); one grid step per block, no
masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "mse_loss"
BLOCK_ROWS: Final = 256


def _mse_loss_kernel(pred_ref, target_ref, o_ref):
  diff = pred_ref[...] - target_ref[...]
  o_ref[...] = jnp.mean(diff * diff, axis=-1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(pred, target, *, interpret: bool = False):
  n, m = pred.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  rows = pl.BlockSpec((block_rows, m), lambda i: (i, 0))
  out = pl.pallas_call(
      _mse_loss_kernel, grid=(n // block_rows,), in_specs=[rows, rows],
      out_specs=pl.BlockSpec((block_rows, 1), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((n, 1), pred.dtype), interpret=interpret,
      name=TASK_NAME)(pred, target)
  return out[:, 0]
