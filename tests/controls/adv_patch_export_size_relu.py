"""Adversarial control, class 1 (forging the verdict), relu.

Attack: at import, replace the exporter's own `_export_size`. The exporter runs as
`python -m ...exporter`, so the function that `run()` calls lives in `sys.modules["__main__"]`
(patching `pallasbench_dataset.evaluation.exporter.program._export_size` would change another module
object): this patches that one, so every artifact is the task written in plain jnp (as the
references are, which the exporter cannot import) instead of the candidate's wrong Pallas kernel.

Expected: rejected, "no Pallas kernel in the exported module".
"""
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


_main = sys.modules.get("__main__")
if _main is not None and hasattr(_main, "_export_size"):
  _original = _main._export_size

  def _export_reference(kernel_fn, spec, size, platforms, *rest):
    return _original(lambda x, interpret=False: jnp.maximum(x, 0), spec, size, platforms,
                     *rest)

  _main._export_size = _export_reference
  print("adv: exporter._export_size replaced in __main__")


def _negate(x_ref, o_ref):
  o_ref[...] = -x_ref[...]


def kernel(x, interpret=False):
  return pl.pallas_call(_negate, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
