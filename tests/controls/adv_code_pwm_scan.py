"""Adversarial control, class 11 (right only where the judge looked), pwm_scan.

The sequence read as base codes, not as the (L, 4) matrix the task's formula multiplies:
code = sum_c c * seq[p, c], then out[p] = sum_j pwm[code[p + j], j] (a select of one weight
per position, as a lookup kernel does). Exact on every strict one-hot row, which is all the
task ever draws (inputs.OneHotDNA: uniform A/C/G/T, no N); wrong on an all-zero row, the
encoding of an unknown base N that this benchmark's own nucleotide_onehot produces (2% of
its nominal codes, half of its `unknown` family), where the sum over channels is 0 and the
code kernel adds A's weight instead. The one family, `scaled` (pwm * 100), leaves the rows
one-hot. One program, whole-array refs (the sequence padded with zero rows), W shifted loads.

Expected: incorrect, on a family with N positions (some rows of seq_onehot all zero).
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _scan(seq_ref, pwm_ref, o_ref, *, width: int, positions: int):
  block = o_ref.shape[0]
  channels = jnp.arange(4)
  weights = pwm_ref[...].astype(jnp.float32)
  taps = jnp.arange(weights.shape[1])
  acc = jnp.zeros((block,), jnp.float32)
  for j in range(width):
    x = seq_ref[pl.ds(j, block), :].astype(jnp.float32)
    code = jnp.sum(x * channels[None, :].astype(jnp.float32), axis=1)
    w = jnp.sum(jnp.where(taps[None, :] == j, weights, 0.0), axis=1)  # column j of pwm
    pick = code[:, None] == channels[None, :].astype(jnp.float32)
    acc += jnp.sum(jnp.where(pick, w[None, :], 0.0), axis=1)
  o_ref[...] = acc


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(seq_onehot, pwm, interpret=False):
  length, width = seq_onehot.shape[0], pwm.shape[1]
  positions = length - width + 1
  block = pl.next_power_of_2(positions)
  out = pl.pallas_call(
      functools.partial(_scan, width=width, positions=positions),
      out_shape=jax.ShapeDtypeStruct((block,), jnp.float32), interpret=interpret)(
          jnp.pad(seq_onehot, ((0, block + width - length), (0, 0))),
          jnp.pad(pwm, ((0, 0), (0, pl.next_power_of_2(width) - width))))
  return out[:positions]
