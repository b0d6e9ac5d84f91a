"""Adversarial control, class 8 (correct on the nominal inputs only), exp.

exp by bit tricks: x = n ln 2 + r, exp(r) by a polynomial, 2^n built as the float bits
(n + 127) << 23, with no handling of n outside the exponent's range: right for x in about
[-87, 88], garbage below (n + 127 <= 0 wraps into the sign bit: -inf, NaN) and inf just
below the true overflow. Blocks of 32 whole rows.

Expected: incorrect, on the family that reaches below -87 (exp underflows float32).
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 32
LN2_HI, LN2_LO = 0.693145751953125, 1.428606765330187e-06


def _bit_exp(x):
  n = jnp.floor(x * 1.4426950408889634 + 0.5)
  r = (x - n * LN2_HI) - n * LN2_LO
  p = 1.0 + r * (1.0 + r * (0.5 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r / 720)))))
  scale = jax.lax.bitcast_convert_type((n.astype(jnp.int32) + 127) << 23, jnp.float32)
  return p * scale


def _exp_kernel(x_ref, o_ref):
  o_ref[...] = _bit_exp(x_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  if n % BLOCK_ROWS or m != pl.next_power_of_2(m):
    raise ValueError(f"{x.shape=}: rows must be a multiple of {BLOCK_ROWS=}, columns a power of 2")
  block = pl.BlockSpec((BLOCK_ROWS, m), lambda i: (i, 0))
  return pl.pallas_call(_exp_kernel, grid=(n // BLOCK_ROWS,), in_specs=[block], out_specs=block,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
