"""Adversarial control, class 6 (honest but unusual), gelu at bfloat16 -- the dtype changed
outside the kernel.

Honest: a bfloat16 gelu whose wrapper widens x to float32 (`x.astype(jnp.float32)`, exact:
every bfloat16 is a float32), runs a float32 Pallas kernel that computes the whole gelu (tanh
form) and rounds the result back to bfloat16 (`.astype(x.dtype)`, the one rounding any
bfloat16 answer needs). A common way to write a mixed-precision kernel: the math in float32,
the dtype handled by the caller. It moves 3x the bytes an in-kernel cast would (slower, which
the timing says), and computes nothing outside the kernel.

The module analysis costs every `stablehlo.convert` like an element-wise op (the astype control
uses float->int converts to do work), so the two converts are 2 ops per element against gelu's
FLOPs, over OUTSIDE_WORK_LIMIT: rejected, "the real work is done outside the kernel". An exact
widening float convert computes nothing (as an integer widening convert, which _preserves
already lets through), and the narrowing one is the output's own rounding. Closed in session 28:
module_analysis._convert costs neither (an exact float widening, and a float rounding of what
@main returns).

Expected (correct behaviour): pass.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8
_C = 0.7978845608028654  # sqrt(2 / pi)


def _gelu_f32(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = 0.5 * x * (1.0 + jnp.tanh(_C * (x + 0.044715 * x * x * x)))


def kernel(x, interpret=False):
  wide = x.astype(jnp.float32)
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  out = pl.pallas_call(_gelu_f32, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                       out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
                       interpret=interpret)(wide)
  return out.astype(x.dtype)
