"""Adversarial control, class 6 (honest but unusual), gelu at bfloat16 -- the rounding in a
jitted helper.

Honest: `kernel` calls a `jax.jit`-decorated helper (the layout of the shipped kernels, whose
`kernel` calls a jitted `_<task>`) that widens x to float32, runs a float32 Pallas kernel that
computes the whole gelu (tanh form) and returns `out.astype(x.dtype)`: adv_pos_outside_upcast_gelu's
wrapper, one function down. The nested jit is exported as a private function that @main calls.

module_analysis._Analyzer._rounds_the_answer frees a float rounding only when its result is
returned by @main itself; here it is returned by the private function (whose call's result
@main returns), so the rounding is costed as an element-wise op per element, 12.5% of gelu's
work: rejected, "the real work is done outside the kernel ... stablehlo.convert".

Expected (correct behaviour): pass.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 16
_C = 0.7978845608028654  # sqrt(2 / pi)


def _gelu_f32(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = 0.5 * x * (1.0 + jnp.tanh(_C * (x + 0.044715 * x * x * x)))


@functools.partial(jax.jit, static_argnames=("interpret",))
def _gelu(x, interpret):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  out = pl.pallas_call(_gelu_f32, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                       out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
                       interpret=interpret)(x.astype(jnp.float32))
  return out.astype(x.dtype)


def kernel(x, interpret=False):
  return _gelu(x, interpret=interpret)
