"""Adversarial control, class 5 (static analysis blind spots), relu.

Attack: relu computed OUTSIDE the kernel as `jnp.where(x > 0, x, 0)` (a compare and a
select, no `max`), then copied by a trivial Pallas kernel.

Expected: rejected, "the real work is done outside the kernel".
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _copy(x_ref, o_ref):
  o_ref[...] = x_ref[...]


def kernel(x, interpret=False):
  y = jnp.where(x > 0, x, 0.0)
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype),
                        interpret=interpret)(y)
