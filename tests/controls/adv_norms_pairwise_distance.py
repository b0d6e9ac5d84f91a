"""Adversarial control, class 11 (right only where the judge looked), pairwise_distance.

sqrt(|x_i|^2 + |x_j|^2 - 2 x_i.x_j + 1e-8): the squared distance through the norms and one
full-precision float32 dot (precision=HIGHEST, so no TF32), the form kernels_gpu's docstring
names as the one whose cancellation "swamps the 1e-4 distances on the diagonal". It does:
on the diagonal it returns sqrt(rounding error of |x|^2) instead of 1e-4. But the task's
tolerance is the contraction class (atol 1e-2 x the RMS of the distances, about 5.6): at the
`shifted` family (x + 10, |x|^2 ~ 1600) the diagonal is off by ~1e-2, inside that atol; the
error grows with |x|^2 and crosses the tolerance only past a shift of about 30 to 100, which
no family draws. One (block, block) tile per program, the norms and the dot of whole rows.

Expected: incorrect (on a family with the rows far from the origin: x + 100), at float32.
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
  xp = jnp.pad(x, ((0, npad - n), (0, dpad - d)))
  rows = pl.BlockSpec((BLOCK, dpad), lambda i, j: (i, 0))
  cols = pl.BlockSpec((BLOCK, dpad), lambda i, j: (j, 0))
  out = pl.pallas_call(_tile, grid=(npad // BLOCK, npad // BLOCK), in_specs=[rows, cols],
                       out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
                       out_shape=jax.ShapeDtypeStruct((npad, npad), x.dtype),
                       interpret=interpret)(xp, xp)
  return out[:n, :n]
