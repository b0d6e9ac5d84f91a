"""one_hot: float32 one-hot of ids (S,) int32 over 1024 classes -> (S, 1024).

ids outside [0, 1024) match no class and give all-zero rows, as jax.nn.one_hot does.
TPU-oriented original: one program (grid (1,)) holds the ids as an (S, 1) column and the whole
(S, 1024) output, and compares the column with a class iota. No tiling.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "one_hot"
NUM_CLASSES: Final = 1024


def _one_hot_kernel(ids_ref, o_ref):
  classes = jax.lax.broadcasted_iota(jnp.int32, o_ref.shape, 1)
  o_ref[...] = (ids_ref[...] == classes).astype(jnp.float32)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(ids, *, interpret: bool = False):
  s = ids.shape[0]
  return pl.pallas_call(
      _one_hot_kernel, grid=(1,), in_specs=[pl.BlockSpec((s, 1), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((s, NUM_CLASSES), lambda i: (0, 0)),
      out_shape=jax.ShapeDtypeStruct((s, NUM_CLASSES), jnp.float32), interpret=interpret,
      name=TASK_NAME)(ids.reshape(s, 1))
