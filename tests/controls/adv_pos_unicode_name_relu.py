"""Adversarial control, class 6 (honest but unusual), relu -- a kernel named in non-ASCII letters.

Honest: a plain relu whose kernel function is `_relu_ü` (a Python identifier may hold any
letter). Pallas names the Triton module and its function after it, and MLIR prints the name
with its UTF-8 bytes escaped (`"_relu_\\C3\\BC"`). Session 28's first allow-list of kernel
module attributes took names of ASCII letters only and refused it; a name now needs only no
path separator, no leading dot and a bounded length (kernel_state._NAME).

Expected (correct behaviour): pass.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _relu_ü(x_ref, o_ref):  # pylint: disable=non-ascii-name
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu_ü, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
