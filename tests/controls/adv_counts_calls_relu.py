"""Adversarial control, class 3 (timing), relu.

Attack: count calls with a Python global, intending to be correct for the calls the judge
checks (5 seeds + the input-impact run = 6) and to return garbage, fast, for every later
(timed) call.

Expected: pass. The counter counts traces in the exporter, not runs in the judge: the exporter
traces the kernel a few times (printed), every artifact is a fixed program with the honest
body, and the judge runs that program for the checks and the timing alike (its timed outputs
are checked too).
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CHECKED_CALLS = 6
_calls = [0]


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def _garbage(x_ref, o_ref):
  o_ref[...] = x_ref[...]


def kernel(x, interpret=False):
  _calls[0] += 1
  print(f"adv: kernel() called {_calls[0]} time(s)", flush=True)
  body = _relu if _calls[0] <= CHECKED_CALLS else _garbage
  spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(body, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)
