"""Adversarial control, class 5 (static analysis blind spots), reduce_sum.

Attack: the row sums are computed OUTSIDE the kernel by a generic `lax.reduce` whose
combiner is a custom Python function (a + b, through a lambda, so no named reduce_sum
primitive appears), then copied by a trivial Pallas kernel.

Expected: rejected, "the real work is done outside the kernel" (a reduce is costed as its
combiner's work once per input element).
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl


def _copy(s_ref, o_ref):
  o_ref[...] = s_ref[...]


def kernel(x, interpret=False):
  sums = lax.reduce(x, jnp.float32(0), lambda a, b: a + b, (1,))
  return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(sums.shape, sums.dtype),
                        interpret=interpret)(sums)
