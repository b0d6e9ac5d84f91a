"""outer_product: out[i, j] = x[i] * y[j]; x (M,), y (N,) -> (M, N).

TPU-oriented original: one program (grid (1,)) holds the whole of x as an (M, 1) column, y as a
(1, N) row and the whole (M, N) output; the product is one broadcast multiply. No tiling.
"""
import functools
from typing import Final

import jax
from jax.experimental import pallas as pl

TASK_NAME: Final = "outer_product"


def _outer_product_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] * y_ref[...]


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, y, *, interpret: bool = False):
  m, n = x.shape[0], y.shape[0]
  return pl.pallas_call(
      _outer_product_kernel, grid=(1,),
      in_specs=[pl.BlockSpec((m, 1), lambda i: (0, 0)), pl.BlockSpec((1, n), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((m, n), lambda i: (0, 0)),
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), interpret=interpret,
      name=TASK_NAME)(x.reshape(m, 1), y.reshape(1, n))
