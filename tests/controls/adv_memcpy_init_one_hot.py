"""Adversarial control, class 3 (timing), one_hot.

Attack: hand the output's fill to a copy engine the timer does not watch. The output buffer
starts as a dense (S, 1024) constant of zeros (one marker element, 0.5 at [0, 0], so that it is
no splat XLA would turn back into a broadcast fusion) handed to the kernel aliased to its
result (`input_output_aliases`): XLA must copy the constant into the result's buffer before
every call, and a layout-preserving copy is a device-to-device memcpy (a copy thunk), not a
kernel. The judge's CUPTI timer (jax's _mosaic_gpu_ext) enables CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
only, so a call's sample is the scatter kernel alone: S masked stores of a 1.0 (one 32-byte
sector per row) instead of S x 1024 floats, while the copy of the whole output runs untimed.
The module analysis sees an honest style: a constant operand, aliased (adv_pos_aliased_init_relu),
its bytes (S x 4 KiB) far under OUTSIDE_BYTES_LIMIT, no FLOPs outside the kernel. The roofline
check bounds the gain: the analytic bytes over the measured time must stay under the
measured bandwidth ceiling (one_hot at medium: 2.1 MB, 0.46 us at 4.5 TB/s, against 1.47 us for
the shipped kernel and 1.57 us for XLA), so the paid speedup can reach about 1.4x at medium
and about 3x at large without the kernel doing the task's writes.

Closed (session 31) for the class: the module analysis reports the bytes XLA moves to fill a
buffer before an in-place update that no kernel computes (`prefilled_bytes`: this constant,
copied, 2 x S x 4 KiB), and on a GPU the judge adds them at the run's measured copy rate to each
sample (`untimed_copy_ms`), so the fill costs what writing it would.

Expected: pass on the CPU (it is correct: ids out of range keep a zero row; the marker row is
written whole; paid the floor there). On a GPU it passes, charged the copy, paid no more than
parity with the shipped kernel (test_gpu's test_untimed_copies_are_charged).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

CLASSES = 1024
ROWS = 8


def _scatter_ones(ids_ref, init_ref, o_ref, *, s):
  del init_ref  # the same buffer as o_ref, already holding the zeros
  r0 = pl.program_id(0) * ROWS
  rows = r0 + jnp.arange(ROWS)
  live = rows < s
  ids = plt.load(ids_ref.at[pl.ds(r0, ROWS)], mask=live, other=-1)
  hot = ids[:, None] == jnp.arange(CLASSES)[None, :]
  # only the ones, and row 0 whole (it overwrites the marker)
  store = (hot | (rows == 0)[:, None]) & live[:, None]
  plt.store(o_ref.at[pl.ds(r0, ROWS), :], hot.astype(jnp.float32), mask=store)


def kernel(ids, interpret=False):
  (s,) = ids.shape
  init = np.zeros((s, CLASSES), np.float32)
  init[0, 0] = 0.5  # not a splat: a dense constant, copied by XLA, never a broadcast fusion
  return pl.pallas_call(
      functools.partial(_scatter_ones, s=s), grid=(pl.cdiv(s, ROWS),),
      out_shape=jax.ShapeDtypeStruct((s, CLASSES), jnp.float32),
      input_output_aliases={1: 0},
      compiler_params=plt.CompilerParams(num_warps=4, num_stages=1),
      interpret=interpret)(ids, jnp.asarray(init))
