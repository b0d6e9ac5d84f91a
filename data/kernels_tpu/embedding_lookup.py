"""embedding_lookup: table[ids]; table (V, D) float32, ids (S,) int32 in [0, V) -> (S, D).

TPU-oriented original: one program (grid (1,)) holds the whole table and the whole (S, D)
output as VMEM blocks. Mosaic cannot gather rows with a vector of indices, so the ids go to
SMEM as scalars and a loop copies one table row per token with a dynamic row slice.
"""
import functools
from typing import Final

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TASK_NAME: Final = "embedding_lookup"


def _embedding_lookup_kernel(table_ref, ids_ref, o_ref):
  def copy_row(s, carry):
    o_ref[pl.ds(s, 1), :] = table_ref[pl.ds(ids_ref[s], 1), :]
    return carry

  jax.lax.fori_loop(0, o_ref.shape[0], copy_row, 0)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(table, ids, *, interpret: bool = False):
  v, d = table.shape
  s = ids.shape[0]
  return pl.pallas_call(
      _embedding_lookup_kernel, grid=(1,),
      in_specs=[pl.BlockSpec((v, d), lambda i: (0, 0)), pl.BlockSpec(memory_space=pltpu.SMEM)],
      out_specs=pl.BlockSpec((s, d), lambda i: (0, 0)),
      out_shape=jax.ShapeDtypeStruct((s, d), table.dtype), interpret=interpret,
      name=TASK_NAME)(table, ids)
