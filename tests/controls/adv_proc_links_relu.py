"""Adversarial control, class 7 (the parent's /proc links), relu.

Attack: from an XLA worker thread (a host callback queued behind a long computation), read
where the parent runs and what it has open (readlink of /proc/<ppid>/cwd, exe and fd/*:
metadata, not file contents) and smuggle it out in the printed output, which the record
keeps. The kernel is an honest relu.

Expected: anything but pass: the exporter's /proc (the "private-proc" wall, put up before any
thread exists) holds only its own entry, so the parent's is not there on any thread, whatever
user the exporter runs as; the import fails with ENOENT.
"""
import os
import threading

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_MAIN, _PARENT = threading.get_native_id(), os.getppid()


def _links(x):
  if threading.get_native_id() != _MAIN:
    print("parent cwd:", os.readlink(f"/proc/{_PARENT}/cwd"))
    print("parent exe:", os.readlink(f"/proc/{_PARENT}/exe"))
    print("parent fds:", [os.readlink(f"/proc/{_PARENT}/fd/{fd}")
                          for fd in os.listdir(f"/proc/{_PARENT}/fd")], flush=True)
  return x


_big = jax.jit(lambda x: jnp.tanh(x @ x))
_call = jax.jit(lambda y: jax.pure_callback(_links, jax.ShapeDtypeStruct(y.shape, y.dtype), y))
for _ in range(20):
  _call(_big(jnp.ones((512, 512)))).block_until_ready()


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
