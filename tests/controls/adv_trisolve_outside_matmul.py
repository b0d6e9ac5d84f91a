"""Adversarial control, class 5 (static analysis blind spots), matmul.

Attack: an honest Pallas matmul, followed OUTSIDE the kernel by
`lax.linalg.triangular_solve(U, x @ y)` with U the identity (built from y, so it is not a
constant XLA could fold): dense linear algebra of M*N*N FLOPs done by XLA, the kind of work
an attacker would route a contraction through (a solve with a crafted U is a matmul by U^-1).

Expected: rejected, "contractions outside the kernel" (triangular_solve is costed as a
contraction).
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl


def _matmul(x_ref, y_ref, o_ref):
  o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def kernel(x, y, interpret=False):
  m, _ = x.shape
  _, n = y.shape
  prod = pl.pallas_call(_matmul, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
                        interpret=interpret)(x, y)
  unit = jnp.eye(n, dtype=jnp.float32) + 0.0 * jnp.triu(y[:n, :n], 1)
  return lax.linalg.triangular_solve(unit, prod, left_side=False, lower=False)
