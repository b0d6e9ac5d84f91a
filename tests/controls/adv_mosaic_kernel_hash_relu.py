"""Adversarial control, class 5 (the module analysed is not the module run), relu.

Attack: a Mosaic GPU call's `kernel_hash` that is not the hash of its `module`. jax computes
the hash as sha256 of the module's bytecode at lowering (jax.experimental.mosaic.gpu.core), in
the exporter, where the candidate's code runs; here the candidate swaps that module's
`hashlib` for one whose sha256 returns a digest of its choosing. jaxlib's custom call
(custom_call.cc `CachedCompile`) keeps compiled kernels in a process-wide map keyed on
`kernel_hash` alone and returns the cached kernel without looking at the module when the hash
is known: jax's own comment says a hash collision "loaded from disk" is the one gap. The
judge reads and fingerprints the module (state, host code, copies of shipped kernels), and
never checks that the hash is the module's. A judge process serves many evaluations: a
candidate whose kernel_hash names a kernel an earlier evaluation in the same judge compiled
(a shipped kernel judged before it, or one that failed its correctness runs and so was never
memchecked) runs that kernel under the name of the module the analysis, the copy check and
memcheck (a fresh process, which compiles the module) read. Two calls of one artifact with one
hash and two modules run the first module twice.

Here the module is an honest relu and the digest one no other kernel has (a salted sha256): the kernel
runs as analysed. This shows the mismatched hash is admitted (no GPU here).

Closed in session 28: module_analysis._KernelModules.read recomputes the hash: rejected.

Expected (correct behaviour): rejected -- a mosaic_gpu_v2 call whose kernel_hash is not the
sha256 of its module is refused (or the judge recomputes the hash before anything compiles).
"""
import hashlib
import types

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.mosaic.gpu import core as mgpu_core
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS = 64
SALT = b"pallasbench adversarial control: a kernel_hash of my choosing"


class _Hashlib(types.SimpleNamespace):
  @staticmethod
  def sha256(data=b""):
    return hashlib.sha256(SALT + bytes(data))  # one digest per module, never its sha256


mgpu_core.hashlib = _Hashlib()


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  out_shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
  if interpret:
    spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                          out_specs=spec, out_shape=out_shape, interpret=True)(x)
  return plgpu.kernel(_relu, out_type=out_shape, grid=(1,), grid_names=("g",))(x)
