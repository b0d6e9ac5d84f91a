"""Adversarial control, class 8 (correct on the nominal inputs only), flash_attention.

softmax(q k^T / sqrt(d)) v with exp taken of the raw scores, without the row max subtracted
(and so without any rescaling between key blocks): right while every score stays far below
88, NaN as soon as one query matches a key (a score near 120). One program, whole arrays.

Expected: incorrect at float32 and at bfloat16, on the family whose queries point along keys.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _attention(q_ref, k_ref, v_ref, o_ref, *, s_len: int, d: int):
  s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * (d ** -0.5)
  cols = jnp.arange(s.shape[-1])[None, :]
  e = jnp.where(cols < s_len, jnp.exp(s), 0.0)
  acc = jnp.dot(e, v_ref[...].astype(jnp.float32), preferred_element_type=jnp.float32)
  o_ref[...] = (acc / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(q, k, v, interpret=False):
  s_len, d = q.shape
  ps, pd = max(16, pl.next_power_of_2(s_len)), max(16, pl.next_power_of_2(d))
  pad = ((0, ps - s_len), (0, pd - d))
  out = pl.pallas_call(functools.partial(_attention, s_len=s_len, d=d), grid=(1,),
                       out_shape=jax.ShapeDtypeStruct((ps, pd), q.dtype),
                       interpret=interpret)(jnp.pad(q, pad), jnp.pad(k, pad), jnp.pad(v, pad))
  return out[:s_len, :d]
