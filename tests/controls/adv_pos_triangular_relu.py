"""Honest control, class 6 (honest but unusual), relu.

A triangular loop over 128 x 128 blocks, `for i in range(n): for j in range(i, n)`, the inner
fori_loop starting at the outer counter; each step runs the kernel on blocks (i, j) and
(j, i) (the diagonal twice, which relu allows), placed with dynamic_update_slice at offsets
computed from the counters.

Expected: pass (the inner loop's trip count is bounded by an interval analysis of the outer
counter: at most n).
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

BLOCK = 128


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  n = x.shape[0] // BLOCK
  call = pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct((BLOCK, BLOCK), x.dtype),
                        interpret=interpret)

  def block(out, r, c):
    done = call(lax.dynamic_slice(x, (r * BLOCK, c * BLOCK), (BLOCK, BLOCK)))
    return lax.dynamic_update_slice(out, done, (r * BLOCK, c * BLOCK))

  def row(i, out):
    return lax.fori_loop(i, n, lambda j, o: block(block(o, i, j), j, i), out)

  return lax.fori_loop(0, n, row, jnp.zeros_like(x))
