"""Adversarial control, class 3/5 (timing; artifact purity), relu.

Attack: the exported artifact carries hidden state. `lax.rng_uniform` lowers to
`stablehlo.rng`, which XLA implements with a process-wide RNG state advanced on every call:
the same compiled artifact returns a different value each time it runs, so an artifact can
tell its calls apart (and, knowing the state's sequence, count them -- to be correct on the
checked calls and skip work on timed ones). Here the value is only folded into the output
below the tolerance (+ u * 1e-9), so every check passes: this control demonstrates the
capability, not the cheat.

Expected (correct behaviour): rejected -- an exported kernel must be a pure function of its
inputs; ops with hidden state (stablehlo.rng, rng_get_and_update_state) have no place in it.
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl


def _relu_plus(u_ref, x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0) + u_ref[...] * 1e-9


def kernel(x, interpret=False):
  u = lax.rng_uniform(jnp.float32(0), jnp.float32(1), (1, x.shape[1]))
  rows = 64
  return pl.pallas_call(
      _relu_plus, grid=(pl.cdiv(x.shape[0], rows),),
      in_specs=[pl.BlockSpec((1, x.shape[1]), lambda i: (0, 0)),
                pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(u, x)
