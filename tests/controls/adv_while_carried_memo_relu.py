"""Adversarial control, class 3 (timing), relu -- stale_temp's memo carried by a while loop.

Attack: round 6's stale_temp (a kernel output nothing returns, read before it is written: XLA
leaves it uninitialised in the temporary allocation, so a read finds what the last call left),
with the memo carried, next to the relu, through a `lax.while_loop` whose condition
(`out[0, 0] > inf`) is never true: the loop runs no trip, the memo comes out of it unchanged
and is dropped. module_analysis._reaches_out counts any op with regions among a value's users
as "reaches what the program returns", so _dropped_results never looks at the memo. The loop
costs one scalar compare per call. This control only counts, as stale_temp does (its relu is
honest everywhere).

Expected (correct behaviour): rejected as stateful, as stale_temp: a loop's result nothing
reads is dropped as surely as the memo itself (follow a region op's operands to the results
and block arguments they reach, as read_buffers does for Triton's scf ops).
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _relu_counting(x_ref, o_ref, memo_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)

  @pl.when(pl.program_id(0) == 0)
  def _():
    memo_ref[...] = memo_ref[...] + 1.0  # read before written: what the last call left


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  memo = pl.BlockSpec((8, 128), lambda i: (0, 0))
  out, m = pl.pallas_call(
      _relu_counting, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
      out_specs=[spec, memo],
      out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                 jax.ShapeDtypeStruct((8, 128), jnp.float32)],
      interpret=interpret)(x)
  # never a trip: the memo rides along and is dropped
  out, _ = jax.lax.while_loop(lambda c: c[0][0, 0] > jnp.inf, lambda c: c, (out, m))
  return out
