"""Positive control (matmul): (bm, K) and (K, bn) BlockSpec strips, a K loop inside the kernel.
Expected: pass (for shapes that the 64-blocks divide)."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BM = BN = BK = 64


def _matmul(x_ref, y_ref, o_ref):
  def step(k, acc):
    a = x_ref[:, pl.ds(k * BK, BK)]
    b = y_ref[pl.ds(k * BK, BK), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)
  acc = jax.lax.fori_loop(0, x_ref.shape[1] // BK, step, jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, interpret=False):
  m, k = x.shape
  n = y.shape[1]
  return pl.pallas_call(
      _matmul, grid=(m // BM, n // BN),
      in_specs=[pl.BlockSpec((BM, k), lambda i, j: (i, 0)), pl.BlockSpec((k, BN), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), interpret=interpret)(x, y)
