"""Adversarial control, class 5 (static analysis blind spots), embedding_lookup.

Attack: the whole gather is done OUTSIDE the kernel by while loops whose trip count depends on
the data but whose bodies use only ops the cost model calls free: per id (a fori_loop over S),
a first loop rotates a vector of block starts (slice + concatenate) and fetches the block at
its head with a dynamic_slice (its index is loop-carried, not data), until the head equals the
id's block; a second loop does the same for the row. Unsigned indices keep jax from adding
negative-index arithmetic. The only costed ops are the loop conditions' compares. A trivial
Pallas kernel copies the result.

Expected (correct behaviour): rejected -- data decides how many times the loops move the table
(their results are data-selected rows), so they are data-dependent loops doing the task's work.
The analysis flags a loop of unprovable trip count only when its body has costed work, and the
bodies here have none.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

BLOCK = 100


def _copy(x_ref, o_ref):
  o_ref[...] = x_ref[...]


def _rotate(v):
  return lax.concatenate([lax.slice(v, (1,), v.shape), lax.slice(v, (0,), (1,))], 0)


def _head(v):
  return lax.reshape(lax.slice(v, (0,), (1,)), ())


def kernel(table, ids, interpret=False):
  v, d = table.shape
  (s,) = ids.shape
  blocks = -(-v // BLOCK)
  padded = lax.pad(table, lax.full((), 0, table.dtype), ((0, blocks * BLOCK - v, 0), (0, 0, 0)))
  starts = jnp.asarray(np.arange(blocks, dtype=np.uint32) * np.uint32(BLOCK))
  offsets = jnp.asarray(np.arange(BLOCK, dtype=np.uint32))
  zero = jnp.uint32(0)

  def fetch(i, out):
    idx = lax.convert_element_type(lax.dynamic_slice(ids, (i,), (1,))[0], jnp.uint32)
    block_start, offset = lax.div(idx, jnp.uint32(BLOCK)) * jnp.uint32(BLOCK), lax.rem(idx, jnp.uint32(BLOCK))

    def next_block(c):
      nxt = _rotate(c[0])
      return nxt, lax.dynamic_slice(padded, (_head(nxt), zero), (BLOCK, d))

    _, block = lax.while_loop(lambda c: _head(c[0]) != block_start, next_block,
                              (starts, lax.slice(padded, (0, 0), (BLOCK, d))))

    def next_row(c):
      nxt = _rotate(c[0])
      return nxt, lax.dynamic_slice(block, (_head(nxt), zero), (1, d))

    _, row = lax.while_loop(lambda c: _head(c[0]) != offset, next_row,
                            (offsets, lax.slice(block, (0, 0), (1, d))))
    return lax.dynamic_update_slice(out, row, (i, 0))

  out = lax.fori_loop(0, s, fetch, lax.slice(padded, (0, 0), (s, d)))
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct((s, d), table.dtype),
                        interpret=interpret)(out)
