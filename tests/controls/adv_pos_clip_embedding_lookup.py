"""Honest control, class 6 (honest but unusual), embedding_lookup.

The ids are clamped with `jnp.clip(ids, 0, vocab - 1)` outside the kernel (2 ops per id, a
tiny fraction of the S x D elements moved), then a Triton-style Pallas kernel gathers the
rows: each program loads a block of ids and reads its (16, 256) tile of table rows.

Expected: pass.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

BLOCK_S = 16
BLOCK_D = 256


def _gather(table_ref, ids_ref, o_ref, *, d: int, s: int):
  r0 = pl.program_id(0) * BLOCK_S
  c0 = pl.program_id(1) * BLOCK_D
  row_ok = r0 + jnp.arange(BLOCK_S) < s
  cols = c0 + jnp.arange(BLOCK_D)
  col_ok = cols < d
  ids = pltriton.load(ids_ref.at[pl.ds(r0, BLOCK_S)], mask=row_ok, other=0)
  rows = pltriton.load(table_ref.at[ids[:, None], cols[None, :]],
                       mask=row_ok[:, None] & col_ok[None, :], other=0.0)
  pltriton.store(o_ref.at[pl.ds(r0, BLOCK_S), pl.ds(c0, BLOCK_D)], rows,
                 mask=row_ok[:, None] & col_ok[None, :])


def kernel(table, ids, interpret=False):
  (v, d), (s,) = table.shape, ids.shape
  safe = jnp.clip(ids, 0, v - 1)
  return pl.pallas_call(
      functools.partial(_gather, d=d, s=s), grid=(pl.cdiv(s, BLOCK_S), pl.cdiv(d, BLOCK_D)),
      out_shape=jax.ShapeDtypeStruct((s, d), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=1),
      interpret=interpret)(table, safe)
