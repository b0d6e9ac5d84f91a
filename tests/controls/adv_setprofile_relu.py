"""Adversarial control, class 3 (timing), relu.

Attack: at import, install `sys.setprofile` with a hook that sleeps whenever a function named
like the baseline (reference, baseline, jit, time_interleaved) is entered, to inflate the
baseline's time and so the kernel's speedup. The kernel itself is an honest relu.

Expected: rejected -- the audit hook refuses `sys.setprofile` and ends the exporter. (The
hook could not reach the timing anyway: the judge is another process.)
"""
import sys
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

SLOW = ("reference", "baseline", "time_interleaved", "_wallclock_round")


def _slow_baseline(frame, event, arg):
  if event == "call" and any(name in frame.f_code.co_name for name in SLOW):
    time.sleep(0.5)


sys.setprofile(_slow_baseline)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
