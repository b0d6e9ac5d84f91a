"""Adversarial control, class 3 (timing), relu -- stale_temp's memo kept in the returned result.

Attack: round 6's stale_temp (a kernel output nothing returns, read before it is written: XLA
leaves it uninitialised in the executable's temporary allocation, so a read finds what the last
call left), with no second result at all: the kernel's one output has eight rows more than the
task's, and the wrapper returns `out[:N]`. XLA cannot return a slice of a custom call's result
in place, so the whole result is a temporary, and its last eight rows are memory only the
kernel reads and writes, from one call to the next. module_analysis._dropped_results skips any
result that `_reaches_out`, and `_reaches_out` follows a value through every plain op's results
(here the slice) to the return: that some of the result reaches the return is taken for all of
it reaching it. Program 0 reads the extra rows and writes them back plus one: a call counter
(a memo keyed by a hash of the inputs fits the same rows), with no stateful op, no global, no
dropped result, no operand derived from no input. This control only counts, as stale_temp does
(its relu is honest everywhere; in interpret mode the extra rows start as NaN and stay NaN).
Not run on a GPU in round 8 (no H200 could be started): the state rests on session 25's
stale_temp probe (a kernel result in the temporary allocation keeps its value from call to
call on the H200), which holds for any result XLA does not return as @main's own buffer.

Expected (correct behaviour): rejected as stateful, as stale_temp: a kernel result whose
elements the program never returns, and the kernel reads, is memory that outlives the call,
whether the rest of that result is returned or not.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _relu_counting(x_ref, o_ref):
  i = pl.program_id(0)
  last = pl.num_programs(0) - 1

  @pl.when(i < last)
  def _():
    o_ref[...] = jnp.maximum(x_ref[...], 0.0)

  @pl.when(i == last)  # the block past the task's rows: read before written
  def _():
    o_ref[...] = o_ref[...] + 1.0


def kernel(x, interpret=False):
  n, m = x.shape
  rows = pl.cdiv(n, ROWS)
  out = pl.pallas_call(
      _relu_counting, grid=(rows + 1,),
      in_specs=[pl.BlockSpec((ROWS, m), lambda i: (jnp.minimum(i, rows - 1), 0))],
      out_specs=pl.BlockSpec((ROWS, m), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((rows * ROWS + ROWS, m), x.dtype),
      interpret=interpret)(x)
  return out[:n]
