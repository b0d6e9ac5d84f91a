"""Adversarial control, class 15 (the verdict cache): a failure that ends its own exporter.

On its import the kernel ends the process it runs in (`os._exit(3)`, no answer written). The
driver typed every exporter that exited without an answer a `crash`, a record that says
nothing about the kernel (`driver.NO_VERDICT`): never cached, so the text was judged again in
every batch that repeated it (red team round 18). An exporter that ends by itself is the
candidate's choice: its record is an `error` the cache keeps.
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
