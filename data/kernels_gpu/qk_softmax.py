"""qk_softmax: out = softmax(q k^T / sqrt(d)) per row; q, k (S, d) float32 -> (S, S), any S, d.

GPU fix: each program owns BLOCK_Q query rows and never holds a whole score row. A first
loop over BLOCK_K-key blocks keeps the online row statistics (running max m, and the sum l
of exp(s - m), rescaled whenever m grows); a second loop recomputes each score block and
writes exp(s - m) / l. The head dimension d is loaded as a power of two >= 16 (Triton's dot
minimum) with a column mask, padded with zeros that add nothing to q k^T; keys past S get
score -inf. All refs are whole arrays; loads and stores are masked, so S need not be a block
multiple. The f32 q k^T dot runs in TF32, within the matmul tolerance.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "qk_softmax"
FIX_APPLIED: Final = "online_softmax"
FIX_REASON: Final = ("the TPU kernel holds whole score rows against all of K and needs S to be a "
                     "block multiple; key blocks with online (max, sum) statistics, then a "
                     "normalising pass, bound every value and mask any S and d")
BLOCK_Q: Final = 32
BLOCK_K: Final = 64
NUM_WARPS: Final = 4
NUM_STAGES: Final = 2


def _qk_softmax_kernel(q_ref, k_ref, o_ref, *, block_d: int):
  s_len, d = q_ref.shape
  i = pl.program_id(0)
  rows = i * BLOCK_Q + jnp.arange(BLOCK_Q)
  dims = jnp.arange(block_d)
  q = pltriton.load(q_ref.at[pl.ds(i * BLOCK_Q, BLOCK_Q), pl.ds(0, block_d)],
                    mask=(rows[:, None] < s_len) & (dims[None, :] < d), other=0.0)
  q = q * (d ** -0.5)

  def scores(b):
    """Scaled scores of the query rows against key block b, -inf past the last key."""
    keys = b * BLOCK_K + jnp.arange(BLOCK_K)
    k = pltriton.load(k_ref.at[pl.ds(b * BLOCK_K, BLOCK_K), pl.ds(0, block_d)],
                      mask=(keys[:, None] < s_len) & (dims[None, :] < d), other=0.0)
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    return keys, jnp.where(keys[None, :] < s_len, s, -jnp.inf)

  def stats(b, carry):
    m, l = carry
    _, s = scores(b)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))  # finite: key block 0 always has a real key
    l = l * jnp.exp(m - m_new) + jnp.sum(jnp.exp(s - m_new[:, None]), axis=1)
    return m_new, l

  num_blocks = pl.cdiv(s_len, BLOCK_K)
  m, l = jax.lax.fori_loop(0, num_blocks, stats, (jnp.full((BLOCK_Q,), -jnp.inf, jnp.float32),
                                                  jnp.zeros((BLOCK_Q,), jnp.float32)))
  inv_l = 1.0 / l

  @pl.loop(0, num_blocks)
  def _(b):
    keys, s = scores(b)
    p = jnp.exp(s - m[:, None]) * inv_l[:, None]
    pltriton.store(o_ref.at[pl.ds(i * BLOCK_Q, BLOCK_Q), pl.ds(b * BLOCK_K, BLOCK_K)], p,
                   mask=(rows[:, None] < s_len) & (keys[None, :] < s_len))


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(q, k, *, interpret: bool = False):
  s_len, d = q.shape
  if k.shape != q.shape:
    raise ValueError(f"{k.shape=} must equal {q.shape=}")
  return pl.pallas_call(
      functools.partial(_qk_softmax_kernel, block_d=max(16, pl.next_power_of_2(d))),
      grid=(pl.cdiv(s_len, BLOCK_Q),),
      out_shape=jax.ShapeDtypeStruct((s_len, s_len), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=NUM_WARPS, num_stages=NUM_STAGES),
      interpret=interpret, name=TASK_NAME)(q, k)
