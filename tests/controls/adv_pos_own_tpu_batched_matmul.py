"""Honest control, class 12 (copied solutions), batched_matmul: the candidate's own TPU-style kernel.

The neighbour of adv_copied_tpu_batched_matmul: a TPU-style kernel (whole-K blocks, a batched
contraction inside, so it does not lower to Triton at `small` and a CPU judge reads its
structure from the TPU export), written by the candidate: two batch elements per program and
a float32 accumulator cast to the output dtype, not the shipped kernel's grid or body.

Expected: pass, no copy of any shipped kernel (its fingerprint is its own), with copies rejected.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _body(x_ref, y_ref, o_ref):
  acc = jax.lax.dot_general(x_ref[...], y_ref[...], (((2,), (1,)), ((0,), (0,))),
                            preferred_element_type=jnp.float32)
  o_ref[...] = acc.astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, interpret=False):
  b, m, k = x.shape
  n = y.shape[2]
  per = 2 if b % 2 == 0 else 1
  return pl.pallas_call(
      _body, grid=(b // per,),
      in_specs=[pl.BlockSpec((per, m, k), lambda i: (i, 0, 0)),
                pl.BlockSpec((per, k, n), lambda i: (i, 0, 0))],
      out_specs=pl.BlockSpec((per, m, n), lambda i: (i, 0, 0)),
      out_shape=jax.ShapeDtypeStruct((b, m, n), x.dtype), interpret=interpret)(x, y)
