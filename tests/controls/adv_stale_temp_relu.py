"""Adversarial control, class 3 (timing), relu -- state in a kernel output nothing returns.

Attack: the Pallas kernel has a second output, `memo`, that the wrapper drops. XLA cannot drop
one result of a custom call, so it gives `memo` a buffer in the executable's temporary
allocation: memory the call neither receives as an input nor returns, which no one poisons
(the judge poisons the returned output of every timed call, `timing.retire`, and the chunks of
the output's size before each checked one, `checks.poison_allocator`). On a GPU a Pallas output
ref is a raw pointer and nothing stops a load from it before the kernel's store: program 0
reads `memo`, then writes it back plus one. When consecutive calls of one executable get their
temporary allocation at the same address (the allocator's best fit for an allocation pattern
that repeats: the timing's rounds call the candidate 25 times in a row), what the last call left
is what this call reads: a call counter, or a memo of outputs keyed by a hash of the inputs,
with no stateful op, no global, no input-ref write (nothing for the exporter's own report to
silence) and no operand for the round-5 rule (`derives from no input`) to refuse. With a memo a
compute-bound kernel returns a cached, correct output on every timed call after the first on
each input set: the kept timed outputs match their references, and only the roofline (a rate
above the ceiling) bounds the speedup it claims. This control only counts (its relu is honest
everywhere; in interpret mode the output starts as NaN and the count stays NaN).

Expected (correct behaviour): rejected as stateful: a kernel result that no result of @main
receives (and that is not aliased to an input) is memory that outlives the call.
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
  out, _ = pl.pallas_call(
      _relu_counting, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
      out_specs=[spec, memo],
      out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                 jax.ShapeDtypeStruct((8, 128), jnp.float32)],
      interpret=interpret)(x)
  return out
