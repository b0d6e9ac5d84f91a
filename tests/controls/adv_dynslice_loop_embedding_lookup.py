"""Adversarial control, class 5 (static analysis blind spots), embedding_lookup.

Attack: the gather is done OUTSIDE the kernel by a `lax.fori_loop` over the S ids, each
iteration a `lax.dynamic_slice` of one table row at ids[s] and a dynamic_update_slice into the
output; a trivial Pallas kernel copies the result.

Expected: rejected, "the real work is done outside the kernel" (slices indexed by data are
counted as data-dependent moves).
"""
import jax
from jax import lax
from jax.experimental import pallas as pl


def _copy(x_ref, o_ref):
  o_ref[...] = x_ref[...]


def kernel(table, ids, interpret=False):
  _, d = table.shape
  (s,) = ids.shape

  def fetch(i, out):
    row = lax.dynamic_slice(table, (ids[i], 0), (1, d))
    return lax.dynamic_update_slice(out, row, (i, 0))

  out = lax.fori_loop(0, s, fetch, lax.slice(table, (0, 0), (s, d)))
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct((s, d), table.dtype),
                        interpret=interpret)(out)
