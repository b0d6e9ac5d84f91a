"""Honest control, class 6 (honest but unusual), clamp.

The kernel computes clip(x, -1, 1) in x's place: `input_output_aliases={0: 0}` with x not
donated, so XLA copies x into the result's buffer before the call (the judge's inputs are
never donated) and the kernel reads and rewrites every element of that buffer (BlockSpecs of
(8, columns) rows). Every element is written by the kernel, masked stores or not, so the
untimed copy of adv_memcpy_init_one_hot saves it nothing.

Expected: pass.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _clip(x_ref, o_ref):
  o_ref[...] = jnp.minimum(jnp.maximum(x_ref[...], -1.0), 1.0).astype(o_ref.dtype)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(
      _clip, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec], out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), input_output_aliases={0: 0},
      interpret=interpret)(x)
