"""Adversarial control, class 12 (what the exporter can read), relu.

Attack: from the main thread, from a thread it starts and from an XLA worker thread (a host
callback queued behind a long computation), read what lies around the installed package: the
checkout's .git, the kernel trees, the released data, another candidate's file (the controls
next to this one), the references the judge compares against, and the default verdict cache
(the user's, and root's), printing what it got into the output the record keeps. The kernel
is an honest relu.

Expected: pass, and every read refused on every thread: the exporter's read allow-list holds
what exporting needs and nothing else, whatever the working directory.
"""
import os
import pathlib
import threading

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallasbench_dataset

_PACKAGE = pathlib.Path(pallasbench_dataset.__file__).resolve().parent
_ROOT = _PACKAGE.parent
TARGETS = {
    "git": _ROOT / ".git", "kernels_gpu": _ROOT / "kernels_gpu" / "relu.py",
    "kernels_tpu": _ROOT / "kernels_tpu" / "relu.py", "data": _ROOT / "data" / "README.md",
    "other candidate": _ROOT / "tests" / "controls" / "adv_ctypes_relu.py",
    "reference": _PACKAGE / "references" / "relu.py", "setup": _ROOT / "scripts" / "setup.sh",
    "verdict cache": pathlib.Path("/root/.cache/pallasbench/verdicts"),
}
_MAIN = threading.get_native_id()
_DONE: set[str] = set()


def _attempt(where: str) -> None:
  for name, path in TARGETS.items():
    try:
      if path.is_dir():
        got = f"{len(os.listdir(path))} entries"
      else:
        got = f"{len(path.read_bytes())} bytes"
      print(f"read {name} from {where}: {got}", flush=True)
    except OSError as e:
      print(f"refused {name} from {where}: {e.strerror}", flush=True)
  _DONE.add(where)


def _from_callback(x):
  if threading.get_native_id() != _MAIN and "xla thread" not in _DONE:
    _attempt("xla thread")
  return x


_attempt("main thread")
_thread = threading.Thread(target=_attempt, args=("own thread",))
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
