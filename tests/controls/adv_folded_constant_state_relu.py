"""Adversarial control, class 3/5 (timing; artifact purity), relu -- constant_state laundered.

Attack: round 5's constant_state (a kernel operand that is a constant: XLA keeps it in one
buffer for the executable's lifetime, and a Pallas Triton ref is a raw pointer, so a store to
it survives from one call to the next), with the constant made to "derive from an input": the
operand is `PATTERN + (bitcast(x[0, :16]) & 0)`. module_analysis decides what derives from data
by following the module's ops (`_is_data`), so this operand is data and `_kept_operands` lists
nothing. XLA's algebraic simplifier does not follow ops, it reads them: `a & 0` is 0, a convert
of a zero splat is a zero splat, `c + 0` is `c`, and the operand XLA hands the kernel is the
literal constant PATTERN (XLA:CPU's optimized HLO of the same expression, returned from a jit,
is `copy(constant({...}))` with no parameter behind it; PATTERN is not an iota, which XLA turns
into an iota fusion recomputed each call). Program 0
stores the count plus one into it: a call counter, with no stateful op, no global, no dropped
result and no operand that derives from no input. The exporter's own report of input-ref
writes is the candidate's word, silenced as constant_state silences it. This control only
counts (its relu is honest everywhere; in interpret mode the store is functional). Not run on a
GPU in round 8 (no H200 could be started): the state rests on constant_state's own premise.

Expected (correct behaviour): rejected as constant_state is ("derives from no input"): an
operand XLA folds into a constant is a buffer kept across calls whatever ops the module shows.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

PATTERN = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3], np.float32)  # no iota
ROWS = 8


def _relu_counting(x_ref, count_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)

  @pl.when(pl.program_id(0) == 0)
  def _():  # once per call: a store to the folded constant's buffer
    count_ref[...] = count_ref[...] + 1.0


def kernel(x, interpret=False):
  analysis = sys.modules.get("pallasbench_dataset.jaxpr_analysis")
  if analysis is not None:  # the exporter's report of input writes: silenced
    analysis._input_writes = lambda eqn, name: []  # pylint: disable=protected-access
  zero = (lax.bitcast_convert_type(x[0, :16], jnp.int32) & 0).astype(jnp.float32)
  counter = jnp.asarray(PATTERN) + zero  # "derives from x"; XLA folds it to PATTERN
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(
      _relu_counting, grid=(pl.cdiv(x.shape[0], ROWS),),
      in_specs=[spec, pl.BlockSpec((16,), lambda i: (0,))], out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x, counter)
