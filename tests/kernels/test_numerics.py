"""Numerics inside the fixed kernels that interpret mode cannot see through the output.

Interpret mode computes the f32 dots exactly, so a Mosaic GPU path whose operands are not
rounded to TF32 as intended still matches the reference on a CPU; only the H200 would show it
(as gated_mlp's first Mosaic GPU configs did). These tests check the rounding itself.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from pallasbench_dataset.kernels import load_kernel


def test_transformer_block_rmsnorm_rounds_to_tf32_to_nearest_and_pads_with_zeros():
  module = load_kernel("gpu", "transformer_block")
  x = jax.random.normal(jax.random.key(0), (37, 300), jnp.float32) * 3.0
  padded = (48, 320)
  out = pl.pallas_call(functools.partial(module._rmsnorm_kernel, d=300),  # pylint: disable=protected-access
                       grid=(pl.cdiv(padded[0], module.NORM_ROWS),),
                       out_shape=jax.ShapeDtypeStruct(padded, jnp.float32), interpret=True)(x)
  exact = x * jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + module.EPS)
  want = jax.lax.reduce_precision(exact, exponent_bits=8, mantissa_bits=10)  # to nearest even
  np.testing.assert_array_equal(np.asarray(out[:37, :300]), np.asarray(want))
  assert not np.any(np.asarray(out[:37, :300]).view(np.uint32) & 0x1FFF)
  assert not np.any(np.asarray(out[37:])) and not np.any(np.asarray(out[:, 300:]))


def test_the_gated_contractions_round_their_mosaic_operands_to_nearest():
  """Halfway and just-past-halfway values: truncation would keep 1.0 for both. Truncated
  operands bias both projections of a gated contraction (swiglu, geglu: relative L2 1.6e-3 on
  the H200, above the float32 matmul bound of 1e-3)."""
  ulp = 2.0 ** -10
  x = jnp.array([1 + ulp / 2 + 2 ** -20, 1 + ulp / 2, 1 + 1.5 * ulp], jnp.float32)
  for task in ("gated_mlp", "transformer_block", "swiglu", "geglu"):
    got = np.asarray(load_kernel("gpu", task)._tf32(x))  # pylint: disable=protected-access
    np.testing.assert_array_equal(got, np.array([1 + ulp, 1.0, 1 + 2 * ulp], np.float32))


def test_the_in_kernel_tf32_rounding_is_reduce_precisions_bit_for_bit():
  """With transpose_in_kernel the gated contractions round their weights in registers with
  integer operations (Mosaic GPU has no reduce_precision); interpret mode would not see a
  different rounding through the output. Ties both ways, carries into the exponent and to
  Inf, subnormals, signed zeros, Inf and NaN, and a spread of magnitudes."""
  ulp = 2.0 ** -10
  special = np.array([1 + ulp / 2, 1 + 1.5 * ulp, 1 + ulp / 2 + 2 ** -20, 2 - ulp / 4,
                      np.finfo(np.float32).max, np.finfo(np.float32).tiny / 3, 1e-45, 0.0,
                      np.inf, np.nan], np.float32)
  spread = np.asarray(jax.random.normal(jax.random.key(0), (4096,), jnp.float32)
                      * 2.0 ** jax.random.randint(jax.random.key(1), (4096,), -130, 120))
  x = jnp.asarray(np.concatenate([special, -special, spread]))
  want = np.asarray(jax.lax.reduce_precision(x, exponent_bits=8, mantissa_bits=10))
  for task in ("swiglu", "geglu"):
    got = np.asarray(load_kernel("gpu", task)._tf32_in_registers(x))  # pylint: disable=protected-access
    assert np.array_equal(np.isnan(got), np.isnan(want)), task
    np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)],
                                  want.view(np.uint32)[~np.isnan(want)], err_msg=task)
