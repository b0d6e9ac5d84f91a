"""Negative control (relu): imports the project's reference. Expected: rejected (source analysis)."""
import jax
from jax.experimental import pallas as pl

from pallasbench_dataset.references.relu import reference


def _relu(x_ref, o_ref):
  o_ref[...] = reference(x_ref[...])


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
