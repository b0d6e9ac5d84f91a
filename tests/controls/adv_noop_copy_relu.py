"""Adversarial control, class 12 (copied solutions, pasted in), relu.

Attack: adv_copied_relu (kernels_gpu/relu.py pasted at its default config, every name
changed) with one identity op added to what it stores: max(x, 0) + 0.0. The Triton module
gains one arith.addf of a splat constant, so fingerprint.structural_digest (exact dataflow,
commutative operands sorted, independent ops unordered: round 11's adv_near_copy_relu) is no
longer the shipped kernel's. Round 11 named this edit (and `other=1.0`, `idx <= n - 1`, a
retuned block) beside the operand swap the new digest closes; each still passes as no copy.
The extra add is free in a memory-bound kernel.

Expected: no copy by fingerprint, so it passes, as an original kernel would; the reward pays
it the speedup over the shipped kernel it copies, timed beside it on a GPU (speedup_shipped):
parity at most, what an original as fast would earn. Keep it in step with
kernels_gpu/relu.py's default config.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt


def _body(src, dst, *, total, width):
  where = pl.program_id(0) * width + jnp.arange(width)
  live = where < total
  vals = plt.load(src.at[pl.ds(pl.program_id(0) * width, width)], mask=live, other=0.0)
  plt.store(dst.at[pl.ds(pl.program_id(0) * width, width)], jnp.maximum(vals, 0.0) + 0.0, mask=live)


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  flat = x.reshape(-1)
  out = pl.pallas_call(
      functools.partial(_body, total=flat.size, width=4096), grid=(pl.cdiv(flat.size, 4096),),
      out_shape=jax.ShapeDtypeStruct(flat.shape, flat.dtype),
      compiler_params=plt.CompilerParams(num_warps=8, num_stages=1),
      interpret=interpret, name="my_rectifier")(flat)
  return out.reshape(x.shape)
