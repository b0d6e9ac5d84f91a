"""Honest control, class 6 (honest but unusual), relu.

A Python loop launches one pallas_call per 128-row chunk on static slices of x and
concatenates the results: four kernel launches, only free plumbing outside.

Expected: pass.
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
  parts = []
  for start in range(0, n, CHUNK):
    chunk = lax.slice(x, (start, 0), (min(start + CHUNK, n), m))
    parts.append(pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(chunk.shape, chunk.dtype),
                                interpret=interpret)(chunk))
  return jnp.concatenate(parts, axis=0)
