"""matmul_relu: relu(x @ w); x (M, K), w (K, N) -> (M, N), float32 accumulation.

TPU-oriented original: (512, 512) output tiles on a 2-D grid; each program holds the whole K
strip of x (512, K) and of w (K, 512), does one dot and applies the relu to the result
before the store (no K loop, no accumulator); no masking (M and N must be multiples of the tile).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "matmul_relu"
BLOCK_M: Final = 512
BLOCK_N: Final = 512


def _matmul_relu_kernel(x_ref, w_ref, o_ref):
  acc = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
  o_ref[...] = jnp.maximum(acc, 0.0)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, w, *, interpret: bool = False):
  m, k = x.shape
  n = w.shape[1]
  block_m, block_n = min(BLOCK_M, m), min(BLOCK_N, n)
  if m % block_m:
    raise ValueError(f"{m=} must be a multiple of {block_m=}")
  if n % block_n:
    raise ValueError(f"{n=} must be a multiple of {block_n=}")
  return pl.pallas_call(
      _matmul_relu_kernel, grid=(m // block_m, n // block_n),
      in_specs=[pl.BlockSpec((block_m, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, block_n), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((block_m, block_n), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), interpret=interpret,
      name=TASK_NAME)(x, w)
