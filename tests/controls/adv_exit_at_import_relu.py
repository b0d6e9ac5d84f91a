"""Adversarial control, class 15 (the verdict cache): a failure that ends its own exporter.

On its import the kernel ends the process it runs in (`os._exit(3)`, no answer written). The
driver types every exporter that exited without an answer a `crash`, a record that says
nothing about the kernel (`driver.NO_VERDICT`): the host ends exporters too (red team round
19), so the ending alone is no verdict. Never cached, the text was judged again in every batch
that repeated it (red team round 18); the reward's cache now judges it again alone at the end
of its batch and holds the crash that recurs there.

Expected: error (crash), not stored as a verdict by a single evaluation.
"""

import os

import jax
from jax.experimental import pallas as pl

os._exit(3)  # pylint: disable=protected-access


def _relu(x_ref, o_ref):
  o_ref[...] = jax.numpy.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
