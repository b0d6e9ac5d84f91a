"""Honest control, class 6 (honest but unusual), one_hot; the neighbour of adv_memcpy_init_one_hot.

The output buffer starts as a dense constant (zeros with a marker at [0, 0]) handed to the
kernel aliased to its result, as in adv_memcpy_init_one_hot, but the kernel overwrites every
element of every row block itself (the ones and the zeros, row tail masked): its own timed
writes are the whole output, so the copy XLA makes of the constant buys it nothing. A fix that
times (or charges) the aliasing copy must still pass it.

Expected: pass.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

CLASSES = 1024
ROWS = 8


def _rows(ids_ref, init_ref, o_ref, *, s):
  del init_ref  # the same buffer as o_ref
  r0 = pl.program_id(0) * ROWS
  live = r0 + jnp.arange(ROWS) < s
  ids = plt.load(ids_ref.at[pl.ds(r0, ROWS)], mask=live, other=-1)
  hot = ids[:, None] == jnp.arange(CLASSES)[None, :]
  plt.store(o_ref.at[pl.ds(r0, ROWS), :], hot.astype(jnp.float32),
            mask=jnp.broadcast_to(live[:, None], hot.shape))


def kernel(ids, interpret=False):
  (s,) = ids.shape
  init = np.zeros((s, CLASSES), np.float32)
  init[0, 0] = 0.5
  return pl.pallas_call(
      functools.partial(_rows, s=s), grid=(pl.cdiv(s, ROWS),),
      out_shape=jax.ShapeDtypeStruct((s, CLASSES), jnp.float32),
      input_output_aliases={1: 0},
      compiler_params=plt.CompilerParams(num_warps=4, num_stages=1),
      interpret=interpret)(ids, jnp.asarray(init))
