"""Honest control, class 16's neighbour (honest but unusual), relu.

The file does eager work in the exporter before it defines its kernel, as real kernel files do
(a table or a constant computed with jnp at import, a quick check of a config): a 512 x 512
matmul and a norm on XLA:CPU, which runs them on its thread pool, on every core for a moment.
The constant it derives is exactly 1.0 and scales the relu's result.

A fix of adv_core_hog_relu's class must bound the exporter's share of the host (one core, or a
priority below the trusted processes) and keep load-dependent failures out of the verdict
cache; it must not refuse an exporter for using XLA:CPU's threads, or for CPU time within its
wall-clock budget.

Expected: pass.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_eye = jnp.eye(512, dtype=jnp.float32)
SCALE = float(jnp.linalg.norm(_eye @ _eye) / jnp.sqrt(512.0))  # 1.0


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0) * SCALE


def kernel(x, interpret=False):
  spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
