"""transformer_block: pre-norm block, multi-head attention (no mask) and a SwiGLU feed-forward.

n = rmsnorm(x); per head h: a_h = softmax((n wq_h)(n wk_h)^T / sqrt(dh)) (n wv_h);
h = x + sum_h a_h wo_h; out = h + (silu(m w_gate) * (m w_up)) w_down with m = rmsnorm(h).
x (S, D); wq, wk, wv (D, H, dh); wo (H, dh, D); w_gate, w_up (D, F); w_down (F, D); rmsnorm eps
1e-5, no gain; the head count is read from the weight shapes. TPU-oriented original: one
program (grid (1,)) holds every input and the output whole. The projection weights are passed
head-major, (H, D, dh), so each head's weight is a leading-axis index; a Python loop over heads
adds every head's projected attention into the residual. No tiling, float32 accumulation.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TASK_NAME: Final = "transformer_block"
EPS: Final = 1e-5


def _transformer_block_kernel(x_ref, wq_ref, wk_ref, wv_ref, wo_ref, w_gate_ref, w_up_ref,
                              w_down_ref, o_ref):
  def rmsnorm(v):
    return v * jax.lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + EPS)

  def dot(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32)

  x = x_ref[...]
  normed = rmsnorm(x)
  scale = wq_ref.shape[-1] ** -0.5
  h = x
  for head in range(wq_ref.shape[0]):
    q = dot(normed, wq_ref[head])
    k = dot(normed, wk_ref[head])
    v = dot(normed, wv_ref[head])
    s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())),
                            preferred_element_type=jnp.float32) * scale
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    h = h + dot(dot(p, v), wo_ref[head])
  m = rmsnorm(h)
  gate = dot(m, w_gate_ref[...])
  o_ref[...] = h + dot(gate / (1.0 + jnp.exp(-gate)) * dot(m, w_up_ref[...]), w_down_ref[...])


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, wq, wk, wv, wo, w_gate, w_up, w_down, *, interpret: bool = False):
  s, d = x.shape
  _, heads, dh = wq.shape
  f = w_gate.shape[1]
  if heads * dh != d:
    raise ValueError(f"{heads=} * {dh=} must equal the model width {d=}")
  head_major = (wq.transpose(1, 0, 2), wk.transpose(1, 0, 2), wv.transpose(1, 0, 2))
  projection = pl.BlockSpec((heads, d, dh), lambda i: (0, 0, 0))
  return pl.pallas_call(
      _transformer_block_kernel, grid=(1,),
      in_specs=[pl.BlockSpec((s, d), lambda i: (0, 0)), projection, projection, projection,
                pl.BlockSpec((heads, dh, d), lambda i: (0, 0, 0)),
                pl.BlockSpec((d, f), lambda i: (0, 0)), pl.BlockSpec((d, f), lambda i: (0, 0)),
                pl.BlockSpec((f, d), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((s, d), lambda i: (0, 0)),
      out_shape=jax.ShapeDtypeStruct((s, d), jnp.float32), interpret=interpret,
      name=TASK_NAME)(x, *head_major, wo, w_gate, w_up, w_down)
