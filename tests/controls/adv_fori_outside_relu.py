"""Adversarial control, class 5 (static analysis blind spots), relu.

Attack: relu done OUTSIDE the kernel, row by row, in a `lax.fori_loop` of N small iterations
(each a 1 x M maximum, tiny on its own), followed by a trivial Pallas copy kernel.

Expected: rejected, "the real work is done outside the kernel" (the loop's trip count is
proven and multiplies its body's cost).
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl


def _like_mesh(a):
  """`a` with the context mesh's sharding, where that mesh has Explicit axes (the exporter
  traces under an abstract GPU mesh), so dynamic_update_slice accepts the updates."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or jax.sharding.AxisType.Explicit not in mesh.axis_types:
    return a
  return jax.sharding.reshard(a, jax.P())


def _copy(x_ref, o_ref):
  o_ref[...] = x_ref[...]


def kernel(x, interpret=False):
  n, m = x.shape

  def row(i, out):
    r = lax.dynamic_slice(x, (i, 0), (1, m))
    return lax.dynamic_update_slice(out, lax.max(r, r - r), (i, 0))

  out = lax.fori_loop(0, n, row, _like_mesh(x))
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(out)
