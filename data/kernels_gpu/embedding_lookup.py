"""embedding_lookup: out[s, :] = table[ids[s], :]; table (V, D) float32, ids (S,) int32 in [0, V).

GPU fix: a 2-D grid over (BLOCK_S tokens) x (BLOCK_D columns). The table keeps a whole-array
ref (a pointer on Triton, nothing is copied); each program loads its block of ids and gathers
the (BLOCK_S, BLOCK_D) tile of table rows by integer-array indexing of that ref, masking the
token tail and the column tail, so any V, D and S work (D = 768 is not a power of two).
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "embedding_lookup"
FIX_APPLIED: Final = "gather_rows"
FIX_REASON: Final = ("the TPU kernel gathers all S rows at full width in one program: D = 768 is "
                     "not a power of two and (2048, 1024) passes Triton's 2^20-element limit; a "
                     "masked row gather per 16-token x 256-column tile fits any V, D and S")
BLOCK_S: Final = 16
BLOCK_D: Final = 256
NUM_WARPS: Final = 4


def _embedding_lookup_kernel(table_ref, ids_ref, o_ref, *, v: int, d: int, s: int):
  r0 = pl.program_id(0) * BLOCK_S
  c0 = pl.program_id(1) * BLOCK_D
  row_ok = r0 + jnp.arange(BLOCK_S) < s
  cols = c0 + jnp.arange(BLOCK_D)
  col_ok = cols < d
  ids = pltriton.load(ids_ref.at[pl.ds(r0, BLOCK_S)], mask=row_ok, other=0)
  # Out-of-range ids read nothing and give NaN rows, as jnp.take's default fill mode does.
  id_ok = (ids >= 0) & (ids < v)
  rows = pltriton.load(table_ref.at[ids[:, None], cols[None, :]],
                       mask=id_ok[:, None] & col_ok[None, :], other=jnp.nan)
  pltriton.store(o_ref.at[pl.ds(r0, BLOCK_S), pl.ds(c0, BLOCK_D)], rows,
                 mask=row_ok[:, None] & col_ok[None, :])


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(table, ids, *, interpret: bool = False):
  (v, d), (s,) = table.shape, ids.shape
  return pl.pallas_call(
      functools.partial(_embedding_lookup_kernel, v=v, d=d, s=s),
      grid=(pl.cdiv(s, BLOCK_S), pl.cdiv(d, BLOCK_D)),
      out_shape=jax.ShapeDtypeStruct((s, d), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=NUM_WARPS, num_stages=1),
      interpret=interpret, name=TASK_NAME)(table, ids)
