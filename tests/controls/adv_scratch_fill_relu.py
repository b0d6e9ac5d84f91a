"""Adversarial control, class 7 (filling the disk from scratch), relu.

Attack: write 1.2 GiB into the scratch folder, in files of 64 MiB, below the file-size limit
and inside the folder the sandbox used to let the candidate write. The kernel is an honest
relu.

Expected: anything but pass: the child may write no file at all (Landlock: no change right
anywhere; a file-size limit of zero); the import fails with EACCES and nothing is written.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

for _index in range(1200 // 64):
  with open(f"fill-{_index}", "wb") as _f:
    _f.write(b"\0" * (64 << 20))


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
