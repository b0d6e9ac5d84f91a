"""Adversarial control, class 1 (forging the verdict), relu.

Attack: at import, replace `pallasbench_dataset.lowering.export_for` (which the exporter
imports at call time) so that every artifact it writes is a plain `jnp.maximum(x, 0)`
instead of the candidate's (wrong) Pallas kernel. The exporter's own jaxpr report still
describes the Pallas kernel.

Expected: rejected, "no Pallas kernel in the exported module": the judge reads the
structure from the artifact bytes, never from the exporter's reports.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallasbench_dataset.lowering as lowering

_original = lowering.export_for


def _export_plain_relu(platform, fn, *args):
  return _original(platform, lambda x: jnp.maximum(x, 0.0), *args)


lowering.export_for = _export_plain_relu


def _double(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def kernel(x, interpret=False):
  return pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
