"""Adversarial control, class 16 (griefing: a candidate's cost lands on other evaluations), relu:
the probe of adv_core_hog_relu's hole, written so that its verdict says whether the hole is open.

Attack surface probed: the share of the host the sandboxed exporter may take. The file asks,
at import, what the exporter is scheduled with: the cores it may run on
(`os.sched_getaffinity`), its nice value and its scheduling policy. If it may run on more than
one core at the priority of the judges (nice below 19, not SCHED_IDLE), a burner like
adv_core_hog_relu takes every core from the evaluations beside it, and this kernel answers
relu(x) + 1 (wrong). Confined (one core, or niced or idle-scheduled below the trusted
processes), it answers relu(x).

Why every check lets the hog through: see adv_core_hog_relu (the CPU rlimit allows every core
for the whole wall clock by design; nothing lowers the exporter's share).

Expected: pass (the exporter confined to a bounded share of the host, so that no candidate can
starve another's stages into a cached timeout): the walls' "one-core" (session 31) runs it on
one core at nice 10. Before that it answered wrong (KNOWN_OPEN): the exporter ran on every core
at the judges' priority.
"""
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_cores = len(os.sched_getaffinity(0))
_nice = os.getpriority(os.PRIO_PROCESS, 0)
_idle = os.sched_getscheduler(0) == getattr(os, "SCHED_IDLE", -1)
UNCONFINED = _cores > 1 and _nice < 19 and not _idle
print(f"adv: exporter on {_cores} cores, nice {_nice}, SCHED_IDLE {_idle}: "
      f"{'unconfined' if UNCONFINED else 'confined'}", flush=True)
_OFFSET = 1.0 if UNCONFINED else 0.0


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0) + _OFFSET


def kernel(x, interpret=False):
  spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
