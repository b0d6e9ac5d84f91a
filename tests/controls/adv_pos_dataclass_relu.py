"""Honest control, class 6 (honest but unusual), relu.

Keeps its tiling in a module-level frozen dataclass (plain annotations, no
`from __future__ import annotations` in this file), a common way to write configuration.

Expected: pass. (The loader must execute the source as written: compile() called from a
module with `from __future__ import annotations` passes that flag on unless dont_inherit=True,
making these annotations strings, which dataclasses then resolve through sys.modules, where
the candidate module is not.)
"""
import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


@dataclasses.dataclass(frozen=True)
class Tiling:
  rows: int = 64


TILING = Tiling()


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((TILING.rows, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], TILING.rows),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
