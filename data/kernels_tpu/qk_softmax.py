"""qk_softmax: softmax(q k^T / sqrt(d)) per row; q, k (S, d) -> (S, S).

TPU-oriented original: blocks of up to 128 query rows; every program holds the whole of k, forms
its (128, S) score rows with one dot (float32 accumulation, k contracted on its last dimension,
no transpose) and normalises them in one pass; no masking (S must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "qk_softmax"
BLOCK_Q: Final = 128


def _qk_softmax_kernel(q_ref, k_ref, o_ref):
  scale = q_ref.shape[-1] ** -0.5
  s = jax.lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                          preferred_element_type=jnp.float32) * scale
  e = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
  o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(q, k, *, interpret: bool = False):
  s, d = q.shape
  block_q = min(BLOCK_Q, s)
  if s % block_q:
    raise ValueError(f"{s=} must be a multiple of {block_q=}")
  return pl.pallas_call(
      _qk_softmax_kernel, grid=(s // block_q,),
      in_specs=[pl.BlockSpec((block_q, d), lambda i: (i, 0)),
                pl.BlockSpec((s, d), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((block_q, s), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((s, s), jnp.float32), interpret=interpret,
      name=TASK_NAME)(q, k)
