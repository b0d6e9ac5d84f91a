"""Adversarial control, class 5 (static analysis blind spots), embedding_lookup.

Attack: the whole gather is done OUTSIDE the kernel, with no gather, no dynamic_slice and no
select indexed by data: for each id (a fori_loop over S, static trip count), two nested
`lax.switch`es on data-derived indices (id // 100, then id % 100) pick a 100-row block and
then a row, each branch a STATIC slice. A trivial Pallas kernel copies the result.

Expected (correct behaviour): rejected, "the real work is done outside the kernel" -- a
switch on a data-derived index moves data by its content exactly like a select or a gather.
The module analysis charges `stablehlo.case` only its costliest branch (a free static slice)
and never counts the selection itself as a data-dependent move.
"""
import functools

import jax
from jax import lax
from jax.experimental import pallas as pl

BLOCK = 100


def _copy(x_ref, o_ref):
  o_ref[...] = x_ref[...]


def _rows(start, size, width, a):
  return lax.slice(a, (start, 0), (start + size, width))


def kernel(table, ids, interpret=False):
  v, d = table.shape
  (s,) = ids.shape
  blocks = -(-v // BLOCK)
  padded = lax.pad(table, lax.full((), 0, table.dtype), ((0, blocks * BLOCK - v, 0), (0, 0, 0)))
  pick_block = [functools.partial(_rows, k * BLOCK, BLOCK, d) for k in range(blocks)]
  pick_row = [functools.partial(_rows, k, 1, d) for k in range(BLOCK)]

  def fetch(i, out):
    idx = lax.dynamic_slice(ids, (i,), (1,))[0]
    block = lax.switch(lax.div(idx, BLOCK), pick_block, padded)
    row = lax.switch(lax.rem(idx, BLOCK), pick_row, block)
    return lax.dynamic_update_slice(out, row, (i, 0))

  out = lax.fori_loop(0, s, fetch, lax.slice(padded, (0, 0), (s, d)))
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct((s, d), table.dtype),
                        interpret=interpret)(out)
