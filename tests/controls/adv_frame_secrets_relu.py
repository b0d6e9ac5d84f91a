"""Adversarial control, class 2 (reading secrets), relu.

Attack: at trace time, search every thread's frames (`sys._current_frames()`, then `f_back`
chains) for judge secrets: integers in variables named like seeds, and concrete arrays of the
output's shape, to embed them as constants in the kernel. (`gc.get_objects` would be refused,
see adv_gc_channel_relu.) What it found is printed, and the kernel writes the first array
found, or zeros when there is none.

Expected: rejected by the output filters (output_std, not_zeros...), and incorrect on every seed.
There is nothing to find: seeds are drawn, inputs made and references computed only in the
judge process, after the export; the exporter holds only tracers and ShapeDtypeStructs.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def _search(shape):
  frames = arrays = 0
  seeds, found = [], None
  for top in sys._current_frames().values():  # pylint: disable=protected-access
    frame = top
    while frame is not None:
      if frame.f_code is _search.__code__:  # not this search's own variables
        frame = frame.f_back
        continue
      frames += 1
      for name, value in list(frame.f_locals.items()):
        if "seed" in name.lower() and isinstance(value, (int, tuple, list)):
          seeds.append((name, value))
        if isinstance(value, (np.ndarray, jax.Array)) and not isinstance(value, jax.core.Tracer):
          if tuple(value.shape) == tuple(shape):
            arrays += 1
            found = np.asarray(value) if found is None else found
      frame = frame.f_back
  print(f"adv: searched {frames} frames: {arrays} arrays of shape {tuple(shape)}, seeds {seeds}",
        flush=True)
  return found


def _write(c_ref, o_ref):
  o_ref[...] = c_ref[...]


def kernel(x, interpret=False):
  found = _search(x.shape)
  const = jnp.zeros(x.shape, x.dtype) if found is None else jnp.asarray(found, x.dtype)
  # Aliased to the result (XLA copies the constant into it each call): a constant operand that
  # is not would be state, refused before the output filters this control is for.
  return pl.pallas_call(_write, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        input_output_aliases={0: 0}, interpret=interpret)(const)
