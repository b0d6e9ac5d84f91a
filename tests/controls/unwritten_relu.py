"""Negative control (relu): writes only the first half of the rows. Expected: incorrect on CPU
(interpret mode leaves NaN there), rejected on a GPU (the poison value survives)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _half_rows(x_ref, o_ref):
  half = x_ref.shape[0] // 2
  o_ref[pl.ds(0, half), :] = jnp.maximum(x_ref[pl.ds(0, half), :], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_half_rows, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
