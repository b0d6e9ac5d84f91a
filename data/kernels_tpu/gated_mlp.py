"""gated_mlp: (silu(x @ w_gate) * (x @ w_up)) @ w_down -> (M, D).

x (M, D), w_gate and w_up (D, F), w_down (F, D). TPU-oriented original: blocks of up to 256
rows of x; every program holds all three weight matrices whole, computes the (256, F) gated
hidden block with float32 accumulation and projects it down before one store of a (256, D)
output block. No F or D tiling, no masking (M must be a multiple of the block).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "gated_mlp"
BLOCK_M: Final = 256


def _gated_mlp_kernel(x_ref, w_gate_ref, w_up_ref, w_down_ref, o_ref):
  x = x_ref[...]
  gate = jnp.dot(x, w_gate_ref[...], preferred_element_type=jnp.float32)
  up = jnp.dot(x, w_up_ref[...], preferred_element_type=jnp.float32)
  hidden = gate / (1.0 + jnp.exp(-gate)) * up
  o_ref[...] = jnp.dot(hidden, w_down_ref[...], preferred_element_type=jnp.float32)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, w_gate, w_up, w_down, *, interpret: bool = False):
  m, d = x.shape
  f = w_gate.shape[1]
  block_m = min(BLOCK_M, m)
  if m % block_m:
    raise ValueError(f"{m=} must be a multiple of {block_m=}")
  rows = pl.BlockSpec((block_m, d), lambda i: (i, 0))
  return pl.pallas_call(
      _gated_mlp_kernel, grid=(m // block_m,),
      in_specs=[rows, pl.BlockSpec((d, f), lambda i: (0, 0)),
                pl.BlockSpec((d, f), lambda i: (0, 0)), pl.BlockSpec((f, d), lambda i: (0, 0))],
      out_specs=rows, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32), interpret=interpret,
      name=TASK_NAME)(x, w_gate, w_up, w_down)
