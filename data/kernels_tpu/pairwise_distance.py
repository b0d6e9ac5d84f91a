"""pairwise_distance: out[i, j] = sqrt(sum_d (x[i, d] - x[j, d])^2 + 1e-8); x (N, D) -> (N, N).

The differences are formed directly (not through norms and a dot product, which cancel), so the
result is exact in float32 and the diagonal is sqrt(1e-8). TPU-oriented original: one program
(grid (1,)) holds the whole of x and the whole (N, N) output and materialises the (N, N, D)
difference tensor before reducing over D. No tiling.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "pairwise_distance"
EPS: Final = 1e-8


def _pairwise_distance_kernel(x_ref, o_ref):
  x = x_ref[...]
  diff = x[:, None, :] - x[None, :, :]
  o_ref[...] = jnp.sqrt(jnp.sum(diff * diff, axis=-1) + EPS)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, *, interpret: bool = False):
  n, d = x.shape
  return pl.pallas_call(
      _pairwise_distance_kernel, grid=(1,), in_specs=[pl.BlockSpec((n, d), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((n, n), lambda i: (0, 0)),
      out_shape=jax.ShapeDtypeStruct((n, n), x.dtype), interpret=interpret, name=TASK_NAME)(x)
