"""Adversarial control, class 3 (timing / hidden input properties), relu.

Attack: at import, compute the inputs and outputs of the PUBLIC seeds 11..15 (the seeds of
the test suite's options) at the public sizes with the project's own task spec, with the input
families' draws the judge derives from them (family i from seed i mod 5, a public rule), and
ship them to a Pallas kernel as a lookup table. Per block, the kernel compares the first row of its input with the public
inputs' first rows and writes the matching stored output, skipping the arithmetic; for any
other input it writes |x| (garbage, but "fast").

Expected: with secret OS seeds, incorrect (no seed matches). With the public seeds fixed, every
correctness run matches the table and passes, but the timing runs use fresh OS-drawn input
sets and their kept outputs are checked: rejected, "computes differently when timed".
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from pallasbench_dataset.tasks import get_task

PUBLIC_SEEDS = (11, 12, 13, 14, 15)
SLOTS = 8  # table entries, padded to a power of two for Triton (padding keys are NaN: no match)
ROWS = 64


def _tables(size):
  spec = get_task("relu")
  inputs = [np.asarray(spec.make_inputs(size, seed)[0]) for seed in PUBLIC_SEEDS]
  inputs += [np.asarray(spec.family_inputs(f, size, PUBLIC_SEEDS[i % len(PUBLIC_SEEDS)])[0])
             for i, f in enumerate(spec.families)]
  keys = np.full((SLOTS, inputs[0].shape[1]), np.nan, np.float32)
  outs = np.zeros((SLOTS, *inputs[0].shape), np.float32)
  for k, x in enumerate(inputs):
    keys[k], outs[k] = x[0], np.maximum(x, 0.0)                 # first rows; stored outputs
  return keys, outs


# At import: the exporter traces under an abstract GPU mesh, where nothing concrete can run.
TABLES = {tuple(get_task("relu").input_shapes(size)[0]): _tables(size) for size in ("small",)}


def _lookup(head_ref, keys_ref, outs_ref, x_ref, o_ref, keys_out, outs_out):
  del keys_out, outs_out  # the tables' buffers, aliased: fresh copies each call, not state
  head = head_ref[0, :]
  result = jnp.abs(x_ref[...])
  for k in range(SLOTS):
    misses = jnp.sum(jnp.where(head == keys_ref[k, :], 0.0, 1.0))
    result = jnp.where(misses == 0.0, outs_ref[k, :, :], result)
  o_ref[...] = result


def kernel(x, interpret=False):
  n, m = x.shape
  keys, outs = TABLES.get(tuple(x.shape), (np.full((SLOTS, m), np.nan, np.float32),
                                            np.zeros((SLOTS, n, m), np.float32)))
  head = x[0:1, :]
  return pl.pallas_call(
      _lookup, grid=(pl.cdiv(n, ROWS),),
      in_specs=[pl.BlockSpec((1, m), lambda i: (0, 0)),
                pl.BlockSpec((SLOTS, m), lambda i: (0, 0)),
                pl.BlockSpec((SLOTS, ROWS, m), lambda i: (0, i, 0)),
                pl.BlockSpec((ROWS, m), lambda i: (i, 0))],
      out_specs=[pl.BlockSpec((ROWS, m), lambda i: (i, 0)),
                 pl.BlockSpec((SLOTS, m), lambda i: (0, 0)),
                 pl.BlockSpec((SLOTS, ROWS, m), lambda i: (0, i, 0))],
      out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                 jax.ShapeDtypeStruct(keys.shape, jnp.float32),
                 jax.ShapeDtypeStruct(outs.shape, jnp.float32)],
      # The tables aliased to results XLA copies them into (a constant operand that is not
      # would be state, refused before the seeds are ever drawn): the seeds are the test here.
      input_output_aliases={1: 1, 2: 2}, interpret=interpret)(
          head, jnp.asarray(keys), jnp.asarray(outs), x)[0]
