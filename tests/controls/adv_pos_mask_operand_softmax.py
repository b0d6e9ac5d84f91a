"""Adversarial control, class 6 (honest but unusual), softmax -- a constant mask as an operand.

Attack: none; an honest kernel in a common Triton style. Triton blocks are powers of two, so
the wrapper pads the columns to the next one (1000 -> 1024 at the edge shape) and hands the
kernel the mask of the real columns, built once in the wrapper from the static shape
(`np.arange(mp) < m`, a constant of the module), rather than an iota inside the kernel. The
kernel only loads the mask: it never stores to it, so it keeps no state in the constant's
buffer; the softmax is the usual max-subtracted one, and the padding is sliced off.

Expected (correct behaviour): pass. An operand that derives from no input is state only if
the kernel can write it; a Triton kernel that only loads it (kernel_state.read_buffers already
tells loads from stores for dropped results) computes a pure function of its inputs.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

ROWS = 8


def _softmax(x_ref, mask_ref, o_ref):
  valid = mask_ref[...] > 0.0
  x = jnp.where(valid[None, :], x_ref[...], -jnp.inf)
  e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
  o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)


def kernel(x, interpret=False):
  n, m = x.shape
  mp = 1 << (m - 1).bit_length()
  np_rows = pl.cdiv(n, ROWS) * ROWS
  xp = jnp.pad(x, ((0, np_rows - n), (0, mp - m)))
  mask = jnp.asarray((np.arange(mp) < m).astype(np.float32))  # the real columns, static
  out = pl.pallas_call(
      _softmax, grid=(np_rows // ROWS,),
      in_specs=[pl.BlockSpec((ROWS, mp), lambda i: (i, 0)), pl.BlockSpec((mp,), lambda i: (0,))],
      out_specs=pl.BlockSpec((ROWS, mp), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((np_rows, mp), x.dtype), interpret=interpret)(xp, mask)
  return out[:n, :m]
