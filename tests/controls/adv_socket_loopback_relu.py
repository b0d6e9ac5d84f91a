"""Adversarial control, class 4 (escaping), relu.

Attack: at import, open a TCP socket and connect to 127.0.0.1:PORT (loopback only; the test
replaces @PORT@ with the port of a listener it owns) to send the verdict it wants. The kernel
is an honest relu.

Expected: rejected (the audit hook refuses every `socket.*` event; seccomp refuses socket()),
and the test's listener never sees a connection.
"""
import socket

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

PORT = int("@PORT@") if "@PORT@".isdigit() else 9
with socket.create_connection(("127.0.0.1", PORT), timeout=5) as conn:
  conn.sendall(b'{"status": "pass"}\n')


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
