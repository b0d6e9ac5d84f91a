"""Negative control (relu): keeps the first output on the host and replays it for every later
call. (Python-level caching cannot cheat: the evaluator compiles the kernel, so the Python
runs once; a host callback is the way to keep state across calls.) Expected: rejected."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

_CACHE = []


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def _replay_first(y):
  if not _CACHE:
    _CACHE.append(np.asarray(y))
  return _CACHE[0]


def kernel(x, interpret=False):
  y = pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)
  return jax.pure_callback(_replay_first, jax.ShapeDtypeStruct(x.shape, x.dtype), y)
