"""Adversarial control, class 11 (right only where the judge looked), mse_loss.

mean(p^2) + mean(t^2) - 2 mean(p t): one pass, three running sums, the square of the
difference expanded. Exact enough wherever the loss is of the size of p^2 and t^2 (the
nominal draw: independent standard normals, loss ~2; `offset`: the target 10 away, loss
~100; `scaled_down`: every term scaled alike); it cancels when predictions are close to
their targets relative to their size, the case of any trained model (p ~ t ~ 100, loss ~2:
each sum ~1e4, off by ~1e-3 of the loss' size at float32), which no family draws. One
program per row, the row loaded whole and upcast (the one-pass variance of layernorm, for
a loss).

Expected: incorrect, on a family where pred and target share a large common part (both
shifted by the same offset, or pred = target + a small difference).
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton


def _row_mse(p_ref, t_ref, o_ref, *, width: int):
  cols = jnp.arange(p_ref.shape[-1])
  p = pltriton.load(p_ref.at[pl.program_id(0)], mask=cols < width, other=0.0).astype(jnp.float32)
  t = pltriton.load(t_ref.at[pl.program_id(0)], mask=cols < width, other=0.0).astype(jnp.float32)
  loss = (jnp.sum(p * p) + jnp.sum(t * t) - 2.0 * jnp.sum(p * t)) / width
  o_ref[pl.program_id(0)] = loss.astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(pred, target, interpret=False):
  n, m = pred.shape
  padded = pl.next_power_of_2(m)
  pad = ((0, 0), (0, padded - m))
  return pl.pallas_call(functools.partial(_row_mse, width=m), grid=(n,),
                        out_shape=jax.ShapeDtypeStruct((n,), pred.dtype),
                        interpret=interpret)(jnp.pad(pred, pad), jnp.pad(target, pad))
