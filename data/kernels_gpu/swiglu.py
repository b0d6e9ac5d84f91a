"""swiglu: out = silu(x @ w_gate) * (x @ w_up); x (M, K), w_gate and w_up (K, N) float32,
any M, K, N.

GPU fix: each program owns one (bm, bn) output tile and walks K in BLOCK_K-wide steps with
two float32 accumulators, one per projection, that share each loaded x tile (a `fori_loop`,
not a grid axis: grid programs run in parallel on GPU). All refs are whole arrays; every tile
load and the store are masked, so M, K and N need not be multiples of the blocks
(out-of-range operands read as 0 and add nothing). The gate is applied in the epilogue.
The f32 dots run in TF32 on the tensor cores, within the matmul tolerance.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "swiglu"
FIX_APPLIED: Final = "k_loop_accumulator"
FIX_REASON: Final = ("the TPU kernel loads both whole (K, N) weights per program, past Triton's "
                     "tensor limit; (bm, bn) tiles with a masked K loop and two f32 accumulators "
                     "sharing the x tile fit and accept any shape")
BLOCK_K: Final = 32
NUM_STAGES: Final = 3
MIN_PROGRAMS: Final = 128  # about one program per SM of an H200 (132 SMs)


def _swiglu_kernel(x_ref, wg_ref, wu_ref, o_ref, *, bm: int, bn: int):
  m, k = x_ref.shape
  n = wg_ref.shape[1]
  i, j = pl.program_id(0), pl.program_id(1)
  rows = i * bm + jnp.arange(bm)
  cols = j * bn + jnp.arange(bn)

  def step(s, accs):
    ks = s * BLOCK_K + jnp.arange(BLOCK_K)
    w_block = (pl.ds(s * BLOCK_K, BLOCK_K), pl.ds(j * bn, bn))
    w_mask = (ks[:, None] < k) & (cols[None, :] < n)
    x = pltriton.load(x_ref.at[pl.ds(i * bm, bm), pl.ds(s * BLOCK_K, BLOCK_K)],
                      mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
    wg = pltriton.load(wg_ref.at[w_block], mask=w_mask, other=0.0)
    wu = pltriton.load(wu_ref.at[w_block], mask=w_mask, other=0.0)
    return (accs[0] + jnp.dot(x, wg, preferred_element_type=jnp.float32),
            accs[1] + jnp.dot(x, wu, preferred_element_type=jnp.float32))

  zeros = jnp.zeros((bm, bn), jnp.float32)
  gate, up = jax.lax.fori_loop(0, pl.cdiv(k, BLOCK_K), step, (zeros, zeros))
  out = jax.nn.silu(gate) * up
  pltriton.store(o_ref.at[pl.ds(i * bm, bm), pl.ds(j * bn, bn)], out,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))


def _block_sizes(m: int, n: int) -> tuple[int, int, int]:
  """(bm, bn, num_warps): 128 x 64 tiles (two accumulators) if they fill the GPU, else 64 x 64."""
  if pl.cdiv(m, 128) * pl.cdiv(n, 64) >= MIN_PROGRAMS:
    return 128, 64, 8
  return 64, 64, 4


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, w_gate, w_up, *, interpret: bool = False):
  (m, k), (k_w, n) = x.shape, w_gate.shape
  if k != k_w or w_up.shape != w_gate.shape:
    raise ValueError(f"{x.shape=}, {w_gate.shape=}, {w_up.shape=} must be (M, K), (K, N), (K, N)")
  bm, bn, num_warps = _block_sizes(m, n)
  return pl.pallas_call(
      functools.partial(_swiglu_kernel, bm=bm, bn=bn), grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=NUM_STAGES),
      interpret=interpret, name=TASK_NAME)(x, w_gate, w_up)
