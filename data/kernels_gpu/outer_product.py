"""outer_product: out[i, j] = x[i] * y[j]; x (M,), y (N,) float32 -> (M, N), any M and N.

GPU fix: the output is cut into (BLOCK_M, BLOCK_N) tiles on a 2-D grid, far below Triton's
2^20-element tensor limit; each program loads its slices of x and y and writes their
broadcast product, with row and column masks on the edge tiles, so any M and N work.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "outer_product"
FIX_APPLIED: Final = "2d_tiling"
FIX_REASON: Final = ("the TPU kernel writes the whole (M, N) output from one program, 16M "
                     "elements at the large size, past Triton's 2^20-element limit; masked "
                     "32 x 256 output tiles on a 2-D grid fit and spread the writes over the GPU")
BLOCK_M: Final = 32
BLOCK_N: Final = 256
NUM_WARPS: Final = 4


def _outer_product_kernel(x_ref, y_ref, o_ref, *, m: int, n: int):
  r0 = pl.program_id(0) * BLOCK_M
  c0 = pl.program_id(1) * BLOCK_N
  row_ok = r0 + jnp.arange(BLOCK_M) < m
  col_ok = c0 + jnp.arange(BLOCK_N) < n
  x = pltriton.load(x_ref.at[pl.ds(r0, BLOCK_M)], mask=row_ok, other=0.0)
  y = pltriton.load(y_ref.at[pl.ds(c0, BLOCK_N)], mask=col_ok, other=0.0)
  pltriton.store(o_ref.at[pl.ds(r0, BLOCK_M), pl.ds(c0, BLOCK_N)], x[:, None] * y[None, :],
                 mask=row_ok[:, None] & col_ok[None, :])


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, *, interpret: bool = False):
  (m,), (n,) = x.shape, y.shape
  return pl.pallas_call(
      functools.partial(_outer_product_kernel, m=m, n=n),
      grid=(pl.cdiv(m, BLOCK_M), pl.cdiv(n, BLOCK_N)),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=NUM_WARPS, num_stages=1),
      interpret=interpret, name=TASK_NAME)(x, y)
