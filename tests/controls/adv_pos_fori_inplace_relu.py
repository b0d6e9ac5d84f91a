"""Honest control, class 6 (honest but unusual), relu.

A `lax.fori_loop` over 128-row chunks that updates its input "in place": the loop carry starts
as x itself, and each iteration replaces one chunk (taken with `lax.dynamic_slice` at the loop
counter) by the pallas_call's result with `lax.dynamic_update_slice`. Plain jax, no sharding
annotations; it runs on a GPU and in interpret mode as written.

Expected: pass. (The exporter must not make it fail: tracing under an abstract mesh whose axis
is Explicit gives the pallas_call's result an explicit sharding that dynamic_update_slice
refuses to mix with the unannotated x.)
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
    chunk = lax.dynamic_slice(out, (i * CHUNK, 0), (CHUNK, m))
    return lax.dynamic_update_slice(out, call(chunk), (i * CHUNK, 0))

  return lax.fori_loop(0, n // CHUNK, step, x)
