"""batched_matmul: out[b] = x[b] @ y[b]; x (B, M, K), y (B, K, N) -> (B, M, N).

TPU-oriented original: one batch entry per program on a (B,) grid; blocks (1, M, K), (1, K, N)
and (1, M, N) hold a whole matrix each, and the kernel does one batched dot over the unit batch
dimension with float32 accumulation. No M, N or K tiling.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "batched_matmul"


def _batched_matmul_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = jnp.einsum("bmk,bkn->bmn", x_ref[...], y_ref[...],
                          preferred_element_type=jnp.float32)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, *, interpret: bool = False):
  b, m, k = x.shape
  n = y.shape[2]
  return pl.pallas_call(
      _batched_matmul_kernel, grid=(b,),
      in_specs=[pl.BlockSpec((1, m, k), lambda i: (i, 0, 0)),
                pl.BlockSpec((1, k, n), lambda i: (i, 0, 0))],
      out_specs=pl.BlockSpec((1, m, n), lambda i: (i, 0, 0)),
      out_shape=jax.ShapeDtypeStruct((b, m, n), jnp.float32), interpret=interpret,
      name=TASK_NAME)(x, y)
