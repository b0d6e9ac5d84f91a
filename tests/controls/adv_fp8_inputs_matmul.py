"""Adversarial control, class 9 (below the task's precision), matmul at bfloat16.

A tiled matmul with a float32 accumulator whose operand tiles are rounded through float8 e4m3
(4 significant bits) before the dot: what a kernel gains by feeding float8 tensor cores. The
output is stored as bfloat16. 64 x 64 output tiles, the whole K strip per program (K <= 256
at `small`).

Expected at bfloat16: incorrect, 'not allclose' or the relative L2 bound on the nominal seeds.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 64


def _fp8(x):
  return x.astype(jnp.float8_e4m3fn).astype(x.dtype)


def _matmul_kernel(x_ref, y_ref, o_ref):
  acc = jnp.dot(_fp8(x_ref[...]), _fp8(y_ref[...]), preferred_element_type=jnp.float32)
  o_ref[...] = acc.astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, interpret=False):
  (m, k), n = x.shape, y.shape[1]
  return pl.pallas_call(
      _matmul_kernel, grid=(m // BLOCK, n // BLOCK),
      in_specs=[pl.BlockSpec((BLOCK, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), interpret=interpret)(x, y)
