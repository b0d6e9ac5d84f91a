"""Adversarial control, class 5 (static analysis blind spots), relu.

Attack: relu done OUTSIDE the kernel, row by row, in a while loop whose condition compares a
NARROWED counter: `int16(i) < int16(-32768 + N)` with i an int32 starting at 32768. Read as
int32 (the analysis sees through `convert` as if it were an identity), the loop starts with
32768 < -32256, false: 0 trips, so its body costs nothing. At run time int16(32768) is -32768
and the loop runs N times. A trivial Pallas kernel copies the result.

Expected (correct behaviour): rejected, "the real work is done outside the kernel" (or an
unprovable trip count). A narrowing integer convert is not an identity.
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

START = 32768  # int16(START) == -32768


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
  bound = jnp.int16(-32768 + n)

  def cond(c):
    return lax.convert_element_type(c[0], jnp.int16) < bound

  def body(c):
    i, out = c
    j = i - START
    r = lax.dynamic_slice(x, (j, 0), (1, m))
    return i + 1, lax.dynamic_update_slice(out, lax.max(r, r - r), (j, 0))

  _, out = lax.while_loop(cond, body, (jnp.int32(START), _like_mesh(x)))
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(out)
