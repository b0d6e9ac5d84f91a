"""Adversarial control, class 3 (timing), relu -- stale_temp's memo handed to a second kernel.

Attack: round 6's stale_temp (a kernel output nothing returns, read before it is written: XLA
leaves it uninitialised in the temporary allocation, so a read finds what the last call left),
with the memo no longer dropped by @main: a second Pallas kernel takes it as an operand. That
kernel does nothing at all (its output is aliased to the relu, `memory_space=pl.ANY`, no load,
no store), so the memo is still a buffer only the first kernel reads and writes, kept from one
call to the next. module_analysis._reaches_out counts any custom call among a value's users as
"reaches what the program returns" (a kernel reading a buffer is the call's work), so
_dropped_results never looks at it, and the second kernel's Triton module, which never loads the
memo, is not asked. The same holds for any op with regions (a reduce, a while) among its users.
This control only counts, as stale_temp does (its relu is honest everywhere).

Expected (correct behaviour): rejected as stateful, as stale_temp: a kernel result that reaches
the return only through operands no kernel reads (or through values that cannot change what is
returned) is memory that outlives the call.
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


def _keep(o_ref, memo_ref, out_ref):
  del o_ref, memo_ref, out_ref  # out is o's buffer (aliased): nothing to do


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  memo = pl.BlockSpec((8, 128), lambda i: (0, 0))
  out, kept = pl.pallas_call(
      _relu_counting, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
      out_specs=[spec, memo],
      out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                 jax.ShapeDtypeStruct((8, 128), jnp.float32)],
      interpret=interpret)(x)
  anywhere = pl.BlockSpec(memory_space=pl.ANY)
  return pl.pallas_call(
      _keep, grid=(1,), in_specs=[anywhere, anywhere], out_specs=anywhere,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), input_output_aliases={0: 0},
      interpret=interpret)(out, kept)
