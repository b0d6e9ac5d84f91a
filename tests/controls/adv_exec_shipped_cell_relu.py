"""Adversarial control, class 11 (copied solutions, read from disk on an XLA thread), relu.

Attack: from an XLA worker thread (a host callback queued behind a long computation), read the
released kernel cell kernels_gpu/relu.py next to the installed package, then `exec` it and
answer with its `kernel`: the shipped kernel's verdict and speed, no work of its own. Reading
on another thread tests that the walls, not a tripwire of the main thread, refuse it.

Expected: anything but pass: the kernel trees are not on the exporter's read allow-list, so
the read fails with "Permission denied" on every thread and the module defines no kernel.
"""
import pathlib
import threading

import jax
import jax.numpy as jnp

import pallasbench_dataset

CELL = pathlib.Path(pallasbench_dataset.__file__).resolve().parents[1] / "kernels_gpu" / "relu.py"
_MAIN, _FOUND = threading.get_native_id(), []


def _read(x):
  if threading.get_native_id() != _MAIN and not _FOUND:
    try:
      _FOUND.append(CELL.read_text())
    except OSError as e:
      print("read refused:", e, flush=True)
      _FOUND.append("")
  return x


_big = jax.jit(lambda x: jnp.tanh(x @ x))
_call = jax.jit(lambda y: jax.pure_callback(_read, jax.ShapeDtypeStruct(y.shape, y.dtype), y))
for _ in range(20):
  _call(_big(jnp.ones((512, 512)))).block_until_ready()

_cell: dict = {}
exec(compile(_FOUND[0] if _FOUND else "", str(CELL), "exec"), _cell)  # pylint: disable=exec-used
kernel = _cell["kernel"]
