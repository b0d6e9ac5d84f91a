"""Honest control, class 6 (honest but unusual), relu.

A `lax.fori_loop` over 128-row chunks: each iteration takes its chunk with
`lax.dynamic_slice` at the loop counter, runs one pallas_call on it and writes the result back
with `lax.dynamic_update_slice`. Written the plain way (no sharding annotations), as an honest
author would.

Expected: pass (a static trip count of 4: four launches, index arithmetic outside).
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

CHUNK = 128


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  n, m = x.shape
  call = pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct((CHUNK, m), x.dtype),
                        interpret=interpret)

  def step(i, out):
    chunk = lax.dynamic_slice(x, (i * CHUNK, 0), (CHUNK, m))
    return lax.dynamic_update_slice(out, call(chunk), (i * CHUNK, 0))

  return lax.fori_loop(0, n // CHUNK, step, jnp.zeros_like(x))
