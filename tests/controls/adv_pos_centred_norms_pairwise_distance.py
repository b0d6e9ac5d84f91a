"""Positive control (pairwise_distance): adv_norms_pairwise_distance's norms-and-dot form made
exact, as metric-learning code does it: x is centred first (its column means subtracted, in the
wrapper: distances are shift-invariant), so |x_i|^2 + |x_j|^2 - 2 x_i.x_j cancels only at the
scale of the rows' spread, never of their offset from the origin. A family that moves the rows
far from the origin (the fix of adv_norms_pairwise_distance) leaves it exact, and a refusal of
the norms form by its structure would refuse it wrongly.

Expected: pass, at float32 and bfloat16.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 32
EPS = 1e-8


def _tile(xi_ref, xj_ref, o_ref):
  xi, xj = xi_ref[...].astype(jnp.float32), xj_ref[...].astype(jnp.float32)
  ni = jnp.sum(xi * xi, axis=1)
  nj = jnp.sum(xj * xj, axis=1)
  dot = jax.lax.dot_general(xi, xj, (((1,), (1,)), ((), ())),
                            precision=jax.lax.Precision.HIGHEST,
                            preferred_element_type=jnp.float32)
  sq = jnp.maximum(ni[:, None] + nj[None, :] - 2.0 * dot, 0.0)
  o_ref[...] = jnp.sqrt(sq + EPS).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, d = x.shape
  npad, dpad = pl.cdiv(n, BLOCK) * BLOCK, max(16, pl.next_power_of_2(d))
  centred = x.astype(jnp.float32) - jnp.mean(x.astype(jnp.float32), axis=0, keepdims=True)
  xp = jnp.pad(centred, ((0, npad - n), (0, dpad - d)))
  rows = pl.BlockSpec((BLOCK, dpad), lambda i, j: (i, 0))
  cols = pl.BlockSpec((BLOCK, dpad), lambda i, j: (j, 0))
  out = pl.pallas_call(_tile, grid=(npad // BLOCK, npad // BLOCK), in_specs=[rows, cols],
                       out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
                       out_shape=jax.ShapeDtypeStruct((npad, npad), x.dtype),
                       interpret=interpret)(xp, xp)
  return out[:n, :n]
