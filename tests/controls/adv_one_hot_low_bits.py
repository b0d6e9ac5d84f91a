"""Adversarial control, class 8 (correct on the nominal inputs only), one_hot.

The class of an id read from its low 11 bits, (id & 2047), with no other range test: exact
for ids in [-1024, 2048), the band the nominal draw takes its out-of-range ids from (ids of
[1024, 2048) and of [-1024, 0) have (id & 2047) >= 1024 and give zero rows), wrong outside
it: INT32_MIN, 4096 or -2048 light column 0. Tiles of 16 ids x 256 classes.

Expected: incorrect, on the family whose out-of-range ids span the whole int32 range.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

CLASSES, BLOCK_S, BLOCK_C = 1024, 16, 256


def _one_hot_kernel(ids_ref, o_ref, *, s: int):
  r0 = pl.program_id(0) * BLOCK_S
  c0 = pl.program_id(1) * BLOCK_C
  rows = r0 + jnp.arange(BLOCK_S) < s
  ids = pltriton.load(ids_ref.at[pl.ds(r0, BLOCK_S)], mask=rows, other=-1) & 2047
  hot = ids[:, None] == c0 + jnp.arange(BLOCK_C)[None, :]
  pltriton.store(o_ref.at[pl.ds(r0, BLOCK_S), pl.ds(c0, BLOCK_C)], hot.astype(jnp.float32),
                 mask=jnp.broadcast_to(rows[:, None], hot.shape))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(ids, interpret=False):
  (s,) = ids.shape
  return pl.pallas_call(functools.partial(_one_hot_kernel, s=s),
                        grid=(pl.cdiv(s, BLOCK_S), CLASSES // BLOCK_C),
                        out_shape=jax.ShapeDtypeStruct((s, CLASSES), jnp.float32),
                        interpret=interpret)(ids)
