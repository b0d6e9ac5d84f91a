"""Negative control (add): returns 2 x, ignoring y. Expected: rejected (input impact)."""
import jax
from jax.experimental import pallas as pl


def _double(x_ref, y_ref, o_ref):
  del y_ref
  o_ref[...] = x_ref[...] * 2.0


def kernel(x, y, interpret=False):
  return pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x, y)
