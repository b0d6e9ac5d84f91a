"""geglu: gelu_tanh(x @ w_gate) * (x @ w_up); x (M, K), w_gate and w_up (K, N) -> (M, N).

TPU-oriented original: blocks of up to 256 rows of x; every program holds the whole w_gate
and w_up, does both dots with float32 accumulation and fuses the tanh-form gelu gate and the
product before one store of a full-width (256, N) output block. No N or K tiling, no masking
(M must be a multiple of the block).
"""
import functools
import math
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "geglu"
BLOCK_M: Final = 256
SQRT_2_OVER_PI: Final = math.sqrt(2.0 / math.pi)


def _geglu_kernel(x_ref, w_gate_ref, w_up_ref, o_ref):
  x = x_ref[...]
  gate = jnp.dot(x, w_gate_ref[...], preferred_element_type=jnp.float32)
  up = jnp.dot(x, w_up_ref[...], preferred_element_type=jnp.float32)
  inner = SQRT_2_OVER_PI * (gate + 0.044715 * gate * gate * gate)
  o_ref[...] = 0.5 * gate * (1.0 + jnp.tanh(inner)) * up


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, w_gate, w_up, *, interpret: bool = False):
  m, k = x.shape
  n = w_gate.shape[1]
  block_m = min(BLOCK_M, m)
  if m % block_m:
    raise ValueError(f"{m=} must be a multiple of {block_m=}")
  weight = pl.BlockSpec((k, n), lambda i: (0, 0))
  return pl.pallas_call(
      _geglu_kernel, grid=(m // block_m,),
      in_specs=[pl.BlockSpec((block_m, k), lambda i: (i, 0)), weight, weight],
      out_specs=pl.BlockSpec((block_m, n), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), interpret=interpret,
      name=TASK_NAME)(x, w_gate, w_up)
