"""nucleotide_onehot: codes (L,) int32, 0..3 = A, C, G, T -> (L, 4) float32 one-hot.

Code 4 (N, unknown base) matches no column and gives an all-zero row. TPU-oriented original:
one program (grid (1,)) holds the codes as an (L, 1) column and the whole (L, 4) output, and
compares the column with a base iota. No tiling.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "nucleotide_onehot"
NUM_BASES: Final = 4


def _nucleotide_onehot_kernel(seq_ref, o_ref):
  bases = jax.lax.broadcasted_iota(jnp.int32, o_ref.shape, 1)
  o_ref[...] = (seq_ref[...] == bases).astype(jnp.float32)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(seq, *, interpret: bool = False):
  length = seq.shape[0]
  return pl.pallas_call(
      _nucleotide_onehot_kernel, grid=(1,), in_specs=[pl.BlockSpec((length, 1), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((length, NUM_BASES), lambda i: (0, 0)),
      out_shape=jax.ShapeDtypeStruct((length, NUM_BASES), jnp.float32), interpret=interpret,
      name=TASK_NAME)(seq.reshape(length, 1))
