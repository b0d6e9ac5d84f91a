"""Adversarial control, class 6 (honest but unusual), gelu at bfloat16 -- the answer rounded,
then sliced.

Honest: a bfloat16 gelu whose wrapper widens x to float32 and pads its rows to the kernel's
64-row block (`jnp.pad`, data movement), runs a float32 Pallas kernel that computes the whole
gelu (tanh form), and returns `out.astype(x.dtype)[:n]`: the one rounding any bfloat16 answer
needs, then the padding rows dropped. Rounding before slicing or after is the same answer, and
both orders are common.

module_analysis._Analyzer._rounds_the_answer frees a float rounding only when @main returns its
result directly; here a slice stands between them, so the rounding is costed as an element-wise
op per element, 12.5% of gelu's work (over OUTSIDE_WORK_LIMIT): rejected, "the real work is done
outside the kernel ... stablehlo.convert". The same kernel with the slice before the convert
passes. A reshape in the same place (`out[:size].astype(x.dtype).reshape(x.shape)`, a flattened
1-D kernel) is refused the same way.

Expected (correct behaviour): pass.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 64
_C = 0.7978845608028654  # sqrt(2 / pi)


def _gelu_f32(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = 0.5 * x * (1.0 + jnp.tanh(_C * (x + 0.044715 * x * x * x)))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  rows = pl.cdiv(n, ROWS) * ROWS
  wide = jnp.pad(x.astype(jnp.float32), ((0, rows - n), (0, 0)))
  spec = pl.BlockSpec((ROWS, m), lambda i: (i, 0))
  out = pl.pallas_call(_gelu_f32, grid=(rows // ROWS,), in_specs=[spec], out_specs=spec,
                       out_shape=jax.ShapeDtypeStruct((rows, m), jnp.float32),
                       interpret=interpret)(wide)
  return out.astype(x.dtype)[:n]
