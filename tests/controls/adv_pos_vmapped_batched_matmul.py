"""Honest control, class 6 (honest but unusual), batched_matmul -- jax.vmap over a pallas_call.

A plain 2-D Pallas matmul ((32, K) x (K, 32) blocks, one dot per program) written for one
matrix pair, batched with `jax.vmap`: vmap's batching rule for pallas_call adds a leading grid
axis and a batch dimension to every BlockSpec, so one kernel launch does every batch; nothing
runs outside it.

Expected: pass.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BM = BN = 32


def _mm(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def _matmul(a, b, interpret):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _mm, grid=(pl.cdiv(m, BM), pl.cdiv(n, BN)),
      in_specs=[pl.BlockSpec((BM, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BN), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype), interpret=interpret)(a, b)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(a, b, interpret=False):
  return jax.vmap(functools.partial(_matmul, interpret=interpret))(a, b)
