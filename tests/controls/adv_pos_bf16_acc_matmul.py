"""Positive control (matmul at bfloat16): bfloat16 operands straight into the dot with a
float32 accumulator across the K loop, rounded once to bfloat16 on the store (the pattern of
a tensor-core kernel). 64 x 64 output tiles. Expected at bfloat16: pass.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 64


def _matmul_kernel(x_ref, y_ref, o_ref, *, k_steps: int):
  def body(kk, acc):
    x = x_ref[:, pl.ds(kk * BLOCK, BLOCK)]
    y = y_ref[pl.ds(kk * BLOCK, BLOCK), :]
    return acc + jnp.dot(x, y, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, k_steps, body, jnp.zeros((BLOCK, BLOCK), jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, interpret=False):
  m, k = x.shape
  n = y.shape[1]
  if m % BLOCK or n % BLOCK or k % BLOCK:
    raise ValueError(f"{x.shape=} and {y.shape=} must be multiples of {BLOCK=}")
  return pl.pallas_call(
      functools.partial(_matmul_kernel, k_steps=k // BLOCK), grid=(m // BLOCK, n // BLOCK),
      in_specs=[pl.BlockSpec((BLOCK, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BLOCK), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), interpret=interpret)(x, y)
