"""linear_bias_relu: relu(x @ w + b); x (M, K), w (K, N), b (N,) -> (M, N).

TPU-oriented original: blocks of up to 512 rows of x; every program holds the whole w and the
bias (as a (1, N) row), does one dot with float32 accumulation and fuses the bias add and the
relu before one store of a full-width (512, N) output block. No N or K tiling, no masking (M
must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "linear_bias_relu"
BLOCK_M: Final = 512


def _linear_bias_relu_kernel(x_ref, w_ref, b_ref, o_ref):
  acc = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
  o_ref[...] = jnp.maximum(acc + b_ref[...], 0.0)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, w, b, *, interpret: bool = False):
  m, k = x.shape
  n = w.shape[1]
  block_m = min(BLOCK_M, m)
  if m % block_m:
    raise ValueError(f"{m=} must be a multiple of {block_m=}")
  return pl.pallas_call(
      _linear_bias_relu_kernel, grid=(m // block_m,),
      in_specs=[pl.BlockSpec((block_m, k), lambda i: (i, 0)),
                pl.BlockSpec((k, n), lambda i: (0, 0)),
                pl.BlockSpec((1, n), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((block_m, n), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), interpret=interpret,
      name=TASK_NAME)(x, w, b.reshape(1, n))
