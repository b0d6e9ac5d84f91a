"""Adversarial control, class 6 (honest but unusual), relu -- a Mosaic GPU kernel in Mosaic
GPU's own interpret mode.

Honest: relu as one Mosaic GPU kernel (`plgpu.kernel`, `plgpu.emit_pipeline` streaming (64, 128)
tiles through shared memory), and for interpret=True the same kernel run by Mosaic GPU's
interpreter (`interpret=plgpu.InterpretGPUParams()`, as jax documents it and as the shipped
kernels_gpu/matmul.py does on its Mosaic GPU path). No second code path for the CPU.

The CPU judge needs a cpu export of the interpret-mode kernel, and Mosaic GPU's interpreter is
built on host callbacks, which jax.export cannot serialise: core._artifact_blob turns the
exporter's "serialization of host_callbacks is not yet implemented" into a rejection, "host
callbacks: the kernel calls back into Python on the host, work no exported kernel can carry".
Any kernel that is Mosaic GPU only is refused this way on a CPU judge (the shipped matmul family
passes only because its config picks the Triton path at `small`). A GPU judge runs the cuda
export and should not meet this.

Expected (correct behaviour): pass (or, where a CPU judge cannot run such a kernel at all, a
verdict that says so rather than calling an honest kernel's interpreter a host callback).
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
