"""gelu (tanh form): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) elementwise;
x (N, M) float32, any shape.

GPU fix: the array is viewed flat and cut into 1-D blocks of BLOCK elements, far below
Triton's 2^20-element tensor limit; the last block is masked, so any size works.
"""
import functools
import math
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "gelu"
FIX_APPLIED: Final = "masked_edges"
FIX_REASON: Final = ("the TPU kernel's (1024, M) row blocks exceed Triton's 2^20-element limit "
                     "at medium and large sizes; flat 4096-element blocks with a masked tail fit "
                     "and accept any shape")
BLOCK: Final = 4096
NUM_WARPS: Final = 8
SQRT_2_OVER_PI: Final = math.sqrt(2.0 / math.pi)


def _gelu_kernel(x_ref, o_ref, *, n: int):
  start = pl.program_id(0) * BLOCK
  mask = start + jnp.arange(BLOCK) < n
  x = pltriton.load(x_ref.at[pl.ds(start, BLOCK)], mask=mask, other=0.0)
  y = 0.5 * x * (1.0 + jnp.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
  pltriton.store(o_ref.at[pl.ds(start, BLOCK)], y, mask=mask)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, *, interpret: bool = False):
  flat = x.reshape(-1)
  n = flat.size
  out = pl.pallas_call(
      functools.partial(_gelu_kernel, n=n), grid=(pl.cdiv(n, BLOCK),),
      out_shape=jax.ShapeDtypeStruct(flat.shape, jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=NUM_WARPS, num_stages=1),
      interpret=interpret, name=TASK_NAME)(flat)
  return out.reshape(x.shape)
