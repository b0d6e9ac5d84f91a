"""triangle_update: AlphaFold triangle multiplicative update (outgoing edges) -> (N, N, C).

x = layernorm_C(z) (no affine, eps 1e-5); a = (x @ w_a) * mask; b = (x @ w_b) * mask;
t[i, j, c] = sum_k a[i, k, c] * b[j, k, c]; out = z + sigmoid(x @ w_g) * (layernorm_C(t) @ w_o).
z (N, N, C), mask (N, N) in {0, 1}; w_a, w_b, w_g, w_o (C, C). TPU-oriented original: one
program (grid (1,)) holds everything whole. The pair tensor is viewed as (N * N, C) rows (one
row per edge) so the norms and projections are 2-D; a and b are viewed as (N, N, C) for the
triangle product, a dot batched over the channels. No tiling, float32 accumulation.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "triangle_update"
EPS: Final = 1e-5


def _triangle_update_kernel(z_ref, mask_ref, w_a_ref, w_b_ref, w_g_ref, w_o_ref, o_ref, *,
                            n: int):
  def layernorm(v):  # over the channels (the last axis), no affine
    centered = v - jnp.mean(v, axis=-1, keepdims=True)
    return centered * jax.lax.rsqrt(jnp.mean(centered * centered, axis=-1, keepdims=True) + EPS)

  z = z_ref[...]
  c = z.shape[-1]
  x = layernorm(z)
  a = jnp.dot(x, w_a_ref[...], preferred_element_type=jnp.float32) * mask_ref[...]
  b = jnp.dot(x, w_b_ref[...], preferred_element_type=jnp.float32) * mask_ref[...]
  t = jnp.einsum("ikc,jkc->ijc", a.reshape(n, n, c), b.reshape(n, n, c),
                 preferred_element_type=jnp.float32).reshape(n * n, c)
  gate = 1.0 / (1.0 + jnp.exp(-jnp.dot(x, w_g_ref[...], preferred_element_type=jnp.float32)))
  o_ref[...] = z + gate * jnp.dot(layernorm(t), w_o_ref[...], preferred_element_type=jnp.float32)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(z, mask, w_a, w_b, w_g, w_o, *, interpret: bool = False):
  n, _, c = z.shape
  edges = pl.BlockSpec((n * n, c), lambda i: (0, 0))
  weight = pl.BlockSpec((c, c), lambda i: (0, 0))
  out = pl.pallas_call(
      functools.partial(_triangle_update_kernel, n=n), grid=(1,),
      in_specs=[edges, pl.BlockSpec((n * n, 1), lambda i: (0, 0)), weight, weight, weight, weight],
      out_specs=edges, out_shape=jax.ShapeDtypeStruct((n * n, c), jnp.float32),
      interpret=interpret, name=TASK_NAME)(z.reshape(n * n, c), mask.reshape(n * n, 1),
                                           w_a, w_b, w_g, w_o)
  return out.reshape(n, n, c)
