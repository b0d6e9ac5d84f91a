"""Adversarial control, class 13 (a record the candidate can write), relu.

Attack: the sandbox reports the walls it put up on a pipe whose write end the exporter
inherits. The candidate adds walls that were never up: from the main thread on the descriptor
its environment names, and from a thread it starts and from an XLA worker thread (a host
callback) on every pipe it holds (the result pipe aside), so a renumbered report pipe is found
too. The kernel is an honest relu.

Expected: pass, and the record's `sandbox` field holds none of the forged layers: the layers
are read only from a report the exporter closed before any candidate code ran.
"""
import os
import stat
import threading

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_RESULT = os.environ.get("PALLASBENCH_SANDBOX_RESULT_FD")
_MAIN = threading.get_native_id()
_DONE: set[str] = set()


def _forge(layer: str) -> None:
  for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    if fd <= 2 or name == _RESULT:
      continue
    try:
      if stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.write(fd, f"layers {layer}\n".encode())
    except OSError:
      continue
  _DONE.add(layer)


def _from_callback(x):
  if threading.get_native_id() != _MAIN and "forged-by-xla-thread" not in _DONE:
    _forge("forged-by-xla-thread")
  return x


if "PALLASBENCH_SANDBOX_FD" in os.environ:
  os.write(int(os.environ["PALLASBENCH_SANDBOX_FD"]), b"layers forged-by-main-thread,gpu-memcheck\n")
_thread = threading.Thread(target=_forge, args=("forged-by-own-thread",))
_thread.start()
_thread.join()
_big = jax.jit(lambda x: jnp.tanh(x @ x))
_call = jax.jit(lambda y: jax.pure_callback(_from_callback, jax.ShapeDtypeStruct(y.shape, y.dtype), y))
for _ in range(20):
  _call(_big(jnp.ones((512, 512)))).block_until_ready()


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
