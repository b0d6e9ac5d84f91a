"""Adversarial control, class 6 (honest but unusual), relu -- a Mosaic GPU kernel with a
constant operand it only loads.

Honest: a generic "clamp from below" kernel, out = max(x, floor), written for Mosaic GPU
(`plgpu.kernel` with `plgpu.emit_pipeline` streaming (64, 128) tiles through shared memory),
used for relu with a floor of zeros built in the wrapper (`jnp.zeros`, one block row that every
row block reads). The kernel only loads the floor; nothing is stored to it. (As in
adv_pos_mosaic_side_output_relu, interpret=True runs the same tile body as a plain pallas_call.)

module_analysis._Analyzer._kept_operands: Mosaic GPU kernels' writes are not traced
(kernel_state.written_buffers answers None), so every unaliased operand that derives from no
input is taken as a buffer XLA keeps across calls that the kernel may write: rejected, "stateful
op operand 1 of kernel mosaic_gpu_v2 (tensor<64x512xf32>) derives from no input". The same
constant operand of a Triton kernel passes (adv_pos_mask_operand_softmax).

Expected (correct behaviour): pass.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS, COLS = 64, 128


def _tile(x_ref, floor_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], floor_ref[...])


def _clamp_below(x_gmem, floor_gmem, o_gmem):
  n, m = x_gmem.shape

  def step(_, x_smem, floor_smem, o_smem):
    _tile(x_smem, floor_smem, o_smem)
    plgpu.commit_smem()

  tile = plgpu.BlockSpec((ROWS, COLS), lambda i, j: (i, j))
  floor_tile = plgpu.BlockSpec((ROWS, COLS), lambda i, j: (0, j))
  plgpu.emit_pipeline(step, grid=(n // ROWS, m // COLS), in_specs=[tile, floor_tile],
                      out_specs=[tile], max_concurrent_steps=2)(x_gmem, floor_gmem, o_gmem)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  rows, cols = pl.cdiv(n, ROWS) * ROWS, pl.cdiv(m, COLS) * COLS
  padded = jnp.pad(x, ((0, rows - n), (0, cols - m)))
  floor = jnp.zeros((ROWS, cols), x.dtype)
  shape = jax.ShapeDtypeStruct(padded.shape, x.dtype)
  if interpret:
    tile = pl.BlockSpec((ROWS, COLS), lambda i, j: (i, j))
    out = pl.pallas_call(_tile, grid=(rows // ROWS, cols // COLS),
                         in_specs=[tile, pl.BlockSpec((ROWS, COLS), lambda i, j: (0, j))],
                         out_specs=tile, out_shape=shape, interpret=True)(padded, floor)
  else:
    out = plgpu.kernel(_clamp_below, out_type=shape)(padded, floor)
  return out[:n, :m]
