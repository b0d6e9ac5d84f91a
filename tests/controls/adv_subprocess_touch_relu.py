"""Adversarial control, class 4 (escaping), relu.

Attack: at import, `__import__("subprocess").run(["touch", TARGET])` to create a file in /tmp
(the test replaces @MARK@ with a fresh token). The kernel is an honest relu.

Expected: rejected (sandbox violation: the audit hook refuses `subprocess.Popen`; seccomp
would refuse the fork and exec), and TARGET does not exist afterwards.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TARGET = "/tmp/pallasbench-adv-touch-@MARK@"
__import__("subprocess").run(["touch", TARGET], check=False)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
