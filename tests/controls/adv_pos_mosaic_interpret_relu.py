"""Adversarial control, class 6 (honest but unusual), relu -- a Mosaic GPU kernel in Mosaic
GPU's own interpret mode.

Honest: relu as one Mosaic GPU kernel (`plgpu.kernel`, `plgpu.emit_pipeline` streaming (64, 128)
tiles through shared memory), and for interpret=True the same kernel run by Mosaic GPU's
interpreter (`interpret=plgpu.InterpretGPUParams()`, as jax documents it and as the shipped
kernels_gpu/matmul.py does on its Mosaic GPU path). No second code path for the CPU.

The CPU judge needs a cpu export of the interpret-mode kernel, and Mosaic GPU's interpreter is
built on host callbacks, which jax.export cannot serialise. Until round 11, core._artifact_blob
turned that into a rejection ("host callbacks: the kernel calls back into Python on the host"),
calling an honest kernel's interpreter a cheat. A kernel's own host callback fails its cuda
export too (jax.export serialises none); here the cuda export succeeds, so the callbacks are
the interpreter's and the CPU judge says it cannot judge the kernel.

Expected: error, "not judgeable on this device ... judge it on a GPU" (a GPU judge runs the
cuda export).
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS, COLS = 64, 128


def _relu(x_gmem, o_gmem):
  n, m = x_gmem.shape

  def step(_, x_smem, o_smem):
    o_smem[...] = jnp.maximum(x_smem[...], 0.0)
    plgpu.commit_smem()

  tile = plgpu.BlockSpec((ROWS, COLS), lambda i, j: (i, j))
  plgpu.emit_pipeline(step, grid=(n // ROWS, m // COLS), in_specs=[tile], out_specs=[tile],
                      max_concurrent_steps=2)(x_gmem, o_gmem)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  n, m = x.shape
  rows, cols = pl.cdiv(n, ROWS) * ROWS, pl.cdiv(m, COLS) * COLS
  padded = jnp.pad(x, ((0, rows - n), (0, cols - m)))
  out = plgpu.kernel(_relu, out_type=jax.ShapeDtypeStruct(padded.shape, x.dtype),
                     interpret=plgpu.InterpretGPUParams() if interpret else None)(padded)
  return out[:n, :m]
