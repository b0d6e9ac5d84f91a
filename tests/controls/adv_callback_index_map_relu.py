"""Adversarial control, class 5 (static analysis blind spots), relu.

Attack: the host callback hides in a BlockSpec INDEX MAP (which block each program reads is
decided by Python on the host), not in the body.

Expected: rejected, "host callback".
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def _host_row(i):
  return jax.pure_callback(lambda v: np.asarray(v, np.int32), jax.ShapeDtypeStruct((), jnp.int32), i)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  in_spec = pl.BlockSpec((64, x.shape[1]), lambda i: (_host_row(i), 0))
  out_spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[in_spec],
                        out_specs=out_spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
