"""Adversarial control, class 15 (the verdict cache), relu: a pass that outlives its judge.

Attack: resubmit, unchanged, a kernel whose `pass` the verdict cache holds from an earlier
judge that had a hole since closed. The cache keys a verdict by JUDGE_VERSION, which is bumped
by hand: it has been "3" since add3ba1 across 46 commits that changed verdicts (ce6dfd8, for
one: the module analysis wrapped i32(bool(2)) to 0, so a loop of XLA work bounded by it was
charged no trips and its kernel passed; d466e06, 0477381 closed two more under-counts; the
input families and tolerances moved too). A reward's cache (by default
~/.cache/pallasbench/verdicts, kept across upgrades) filled before such a fix pays the exploit
after it, without judging it again.

This kernel stands in for such an exploit: relu in plain XLA, copied out by a trivial Pallas
kernel, which today's judge rejects; tests/judge/test_cache_attacks.py stores a `pass` for it
as a judge of the same JUDGE_VERSION but other code would have.

Expected: rejected (the real work is done outside the kernel); a verdict stored by a judge
whose code differs from the running one is never served.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _copy(x_ref, o_ref):
  o_ref[...] = x_ref[...]


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, interpret=False):
  y = jnp.maximum(x, 0.0)  # the work, outside the kernel
  spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_copy, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(y)
