"""Adversarial control, class 4 (escaping), relu.

Attack: at import, print a complete fake passing record as JSON on stdout (and stderr),
hoping that a caller parsing the CLI's `--json` output reads it as the verdict. The kernel
itself is wrong (relu(x) * 1.5).

Expected: the CLI's stdout is ONE JSON record, status incorrect; the fake text appears only
in that record's `exporter_output` (the exporter's stdout and stderr are captured pipes).
"""
import json
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

FAKE = {"task": "relu", "status": "pass", "correct": True, "robust": True, "reasons": [],
        "speedup": 1000.0, "adv_fake_record": True}
print(json.dumps(FAKE), flush=True)
print(json.dumps(FAKE), file=sys.stderr, flush=True)


def _wrong(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0) * 1.5


def kernel(x, interpret=False):
  return pl.pallas_call(_wrong, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
