"""Adversarial control, class 5 (static analysis blind spots), matmul.

Attack: the Pallas kernel multiplies over K[16:] only; XLA's dot does K[:16] (6.25% of the
FLOPs, over the 1% limit on contractions outside the kernel) inside a `lax.cond` whose other
branch is a decoy with more elementwise work and no contraction. Costed as its single
costliest branch by one combined key, the cond showed the decoy and hid the contraction.

Expected: rejected, "contractions outside the kernel" (a cond charges the most of EACH kind of
work over its branches).
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

SPLIT = 16


def _matmul(x_ref, y_ref, o_ref):
  o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def _contraction(a, b):
  return a[:, :SPLIT] @ b[:SPLIT]


def _decoy(a, b):
  v = a[:, :b.shape[1]]
  for _ in range(35):
    v = v * 1.0001
  return v * 0.0


def kernel(x, y, interpret=False):
  m, _ = x.shape
  _, n = y.shape
  rest = jnp.concatenate([jnp.zeros_like(y[:SPLIT]), y[SPLIT:]])
  prod = pl.pallas_call(_matmul, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
                        interpret=interpret)(x, rest)
  return prod + lax.cond(jnp.isfinite(x[0, 0]), _contraction, _decoy, x, y)
