"""Adversarial control, class 5 (the judge outlives its input), relu.

Attack: one-trip fori_loops nested 24 deep around a scalar, each with a fresh carry that turns
data-derived in its first trip. An analysis that re-analyses inner loops on every pass of its
data-flow fixpoint takes 2^24 passes: the judge hangs until its limit and the evaluation ends
as a timeout that says nothing of the kernel. (One trip each: XLA removes such loops, so its
compile stays small.) A Pallas relu does the task; the scalar is added to one element, times 0.

Expected: pass, judged promptly: the analysis is linear in the module's size.
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

DEPTH = 24


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def _nested(depth, seed):
  def body(_, carry):
    a, b = carry
    inner = _nested(depth - 1, a)[1] if depth > 1 else b
    return a, a + inner

  return lax.fori_loop(0, 1, body, (seed, jnp.float32(0)))


def kernel(x, interpret=False):
  out = pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       interpret=interpret)(x)
  return out.at[0, 0].add(0.0 * _nested(DEPTH, x[0, 0])[1])
