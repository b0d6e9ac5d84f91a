"""nucleotide_onehot: seq (L,) int32 codes 0..3 = A,C,G,T -> (L, 4) float32 one-hot, any L.

Code 4 (N, unknown) and any other code give an all-zero row, as jax.nn.one_hot does.

GPU fix: a 1-D grid over blocks of BLOCK_L positions; each program compares its codes with
a 4-wide iota and writes a (BLOCK_L, 4) tile, masking the tail rows.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "nucleotide_onehot"
FIX_APPLIED: Final = "masked_edges"
FIX_REASON: Final = ("the TPU kernel encodes the whole sequence in one (L, 4) block, not a power "
                     "of two for L = 1001, which Triton rejects; masked 256-row blocks accept any "
                     "L and spread the work over programs")
NUM_BASES: Final = 4
BLOCK_L: Final = 256
NUM_WARPS: Final = 4


def _nucleotide_onehot_kernel(seq_ref, o_ref, *, length: int):
  r0 = pl.program_id(0) * BLOCK_L
  row_ok = r0 + jnp.arange(BLOCK_L) < length
  codes = pltriton.load(seq_ref.at[pl.ds(r0, BLOCK_L)], mask=row_ok, other=NUM_BASES)
  hot = codes[:, None] == jnp.arange(NUM_BASES)[None, :]
  pltriton.store(o_ref.at[pl.ds(r0, BLOCK_L), :], hot.astype(jnp.float32),
                 mask=jnp.broadcast_to(row_ok[:, None], hot.shape))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(seq, *, interpret: bool = False):
  (length,) = seq.shape
  return pl.pallas_call(
      functools.partial(_nucleotide_onehot_kernel, length=length),
      grid=(pl.cdiv(length, BLOCK_L),),
      out_shape=jax.ShapeDtypeStruct((length, NUM_BASES), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=NUM_WARPS, num_stages=1),
      interpret=interpret, name=TASK_NAME)(seq)
