"""cross_entropy (soft labels): per row -sum_c labels[c] * log_softmax(logits)[c]; (N, C) -> (N,).

labels are a probability distribution per row. TPU-oriented original: logits and labels in
blocks of up to 128 full rows, each reduced to a (128, 1) column block of an (N, 1) output
(flattened outside); one grid step per block, no masking (N must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "cross_entropy"
BLOCK_ROWS: Final = 128


def _cross_entropy_kernel(logits_ref, labels_ref, o_ref):
  logits = logits_ref[...]
  shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
  log_probs = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
  o_ref[...] = -jnp.sum(labels_ref[...] * log_probs, axis=-1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(logits, labels, *, interpret: bool = False):
  n, c = logits.shape
  block_rows = min(BLOCK_ROWS, n)
  if n % block_rows:
    raise ValueError(f"{n=} must be a multiple of {block_rows=}")
  rows = pl.BlockSpec((block_rows, c), lambda i: (i, 0))
  out = pl.pallas_call(
      _cross_entropy_kernel, grid=(n // block_rows,), in_specs=[rows, rows],
      out_specs=pl.BlockSpec((block_rows, 1), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((n, 1), logits.dtype), interpret=interpret,
      name=TASK_NAME)(logits, labels)
  return out[:, 0]
