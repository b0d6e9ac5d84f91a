"""Adversarial control, class 5 (static analysis blind spots), reduce_max.

Attack: the row max computed OUTSIDE the kernel by a `stablehlo.composite` named and
attributed as jax's own top_k ("chlo.top_k", k = 1), whose decomposition is a free slice. XLA
knows the composite, runs its native top_k and drops the decomposition, so the result is the
row max while the module as exported shows no work at all; a Pallas kernel copies the result.

Expected: rejected, "no cost model for: stablehlo.composite" (every composite is refused:
what XLA runs for it is not what its decomposition says).
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl


def _copy(x_ref, o_ref):
  o_ref[...] = x_ref[...]


def _first_column(v, **_):
  return v[:, :1], jnp.zeros((v.shape[0], 1), jnp.int32)


def kernel(x, interpret=False):
  top = lax.composite(_first_column, name="chlo.top_k", version=1)(
      x, k=np.int64(1), is_stable=True)[0][:, 0]
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(top.shape, top.dtype),
                        interpret=interpret)(top)
