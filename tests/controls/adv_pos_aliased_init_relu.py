"""Honest control, class 6 (honest but unusual), relu.

A constant operand the kernel may write: the output buffer starts as a zeros array built in
the wrapper and handed to the kernel aliased to its result (`input_output_aliases`), and the
kernel stores relu's positive elements only, leaving the zeros where x <= 0. The operand
derives from no input, but it is aliased: XLA copies it into the result's buffer before every
call, so the kernel writes a buffer of this call's own, never the constant kept across calls
(adv_constant_state_relu is the unaliased store, which is state).

Expected: pass.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _positive_part(x_ref, zeros_ref, o_ref):
  del zeros_ref  # the same buffer as o_ref
  x = x_ref[...]
  o_ref[...] = jnp.where(x > 0.0, x, o_ref[...])


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(
      _positive_part, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec, spec],
      out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      input_output_aliases={1: 0}, interpret=interpret)(x, jnp.zeros_like(x))
