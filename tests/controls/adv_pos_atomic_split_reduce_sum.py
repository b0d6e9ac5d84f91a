"""Honest control, class 6 (honest but unusual), reduce_sum -- a split reduction by atomic adds.

A 2-D grid of (16-row, 64-column) programs: each loads its masked tile, sums its rows and adds
the partial sums into the output with `pltriton.atomic_add` (split-K style). The output starts
as a zeros operand built in the wrapper and aliased to the result (`input_output_aliases`), so
every call accumulates into a buffer of its own; it is padded to whole row blocks (atomics take
no mask in interpret mode) and sliced. Atomic writes to an aliased operand are no state.

Expected: pass.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

BR, BC = 16, 64


def _partial_sums(x_ref, z_ref, o_ref):
  del z_ref
  n, m = x_ref.shape
  i, j = pl.program_id(0), pl.program_id(1)
  rows = i * BR + jnp.arange(BR)
  cols = j * BC + jnp.arange(BC)
  mask = (rows[:, None] < n) & (cols[None, :] < m)
  x = pltriton.load(x_ref.at[pl.ds(i * BR, BR), pl.ds(j * BC, BC)], mask=mask, other=0.0)
  part = jnp.sum(x.astype(jnp.float32), axis=1)
  pltriton.atomic_add(o_ref, pl.ds(i * BR, BR), part.astype(o_ref.dtype))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  rows = pl.cdiv(n, BR) * BR  # the output padded to whole row blocks: no masked atomics
  out = pl.pallas_call(
      _partial_sums, grid=(pl.cdiv(n, BR), pl.cdiv(m, BC)),
      out_shape=jax.ShapeDtypeStruct((rows,), jnp.float32),
      input_output_aliases={1: 0}, interpret=interpret)(x, jnp.zeros((rows,), jnp.float32))
  return out[:n].astype(x.dtype)
