"""qk_softmax: out = softmax(q k^T / sqrt(d)) per row; q, k (S, d) float32 -> (S, S), any S, d.

GPU fix: each program owns block_q query rows and never holds a whole score row. A first
loop over block_k-key blocks keeps the online row statistics (running max m, and the sum l
of exp(s - m), rescaled whenever m grows); a second loop recomputes each score block and
writes exp(s - m) / l. The head dimension d is loaded as a power of two >= 16 (Triton's dot
minimum) with a column mask, padded with zeros that add nothing to q k^T; keys past S get
score -inf. All refs are whole arrays; loads and stores are masked, so S need not be a block
multiple. The f32 q k^T dot runs in TF32, within the matmul tolerance.

Tuning: with `whole_rows` a program holds its rows' scores against every key at once (the key
blocks unrolled, the scores in registers), so it computes each score once and writes
exp(s - m) / l in a single pass. With `col_split` c > 1 the grid has c programs per row block,
each computing the rows' statistics over all keys and writing one c-th of the columns: c times
the first pass's q k^T, for c times the programs when S / block_q alone leaves SMs idle. With
`tiles`, no program loops over keys and q k^T is computed once: two calls on a grid of
(block_q, block_k) score tiles, the first writing each tile's exp(s - m) with its row maxima m
and sums l (its q k^T stepping through d in `d_step` columns, pipelined `num_stages` deep, unless
d_step covers the padded d), the second rescaling each tile's rows in place by exp(m - M) / L,
M and L the rows' statistics combined over all tiles: one more read and write of the (S, S)
output instead of a second q k^T. The config comes from TUNED_CONFIGS for the GPU and shape
class being compiled for, else from a default.
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
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try, one space per structure
# (the autotuner shares its room evenly between them): the key-looping kernel, whole rows (no
# loop: num_stages means nothing) and the tiled calls (num_stages pipelines the first's d steps).
# d_step only matters to the tiles; 256 covers any d the tasks have.
CONFIG_SPACE: Final = (
    {"block_q": (16, 32, 64), "block_k": (32, 64, 128), "whole_rows": (False,),
     "col_split": (1, 2, 4, 8), "tiles": (False,), "d_step": (256,), "num_warps": (2, 4, 8),
     "num_stages": (1, 2, 3)},
    {"block_q": (16, 32, 64), "block_k": (32, 64, 128), "whole_rows": (True,),
     "col_split": (1,), "tiles": (False,), "d_step": (256,), "num_warps": (2, 4, 8),
     "num_stages": (1,)},
    {"block_q": (32, 64, 128), "block_k": (32, 64, 128), "whole_rows": (False,),
     "col_split": (1,), "tiles": (True,), "d_step": (64, 256), "num_warps": (4, 8),
     "num_stages": (1, 3)},
)
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024x128,1024x128": dict(
            block_q=64, block_k=64, whole_rows=False, col_split=1, tiles=True, d_step=256,
            num_warps=4, num_stages=1),
        "1024x128,1024x128:bfloat16": dict(
            block_q=64, block_k=64, whole_rows=False, col_split=1, tiles=True, d_step=256,
            num_warps=4, num_stages=1),
        "256x64,256x64": dict(
            block_q=32, block_k=32, whole_rows=False, col_split=1, tiles=True, d_step=256,
            num_warps=8, num_stages=3),
        "256x64,256x64:bfloat16": dict(
            block_q=32, block_k=32, whole_rows=False, col_split=1, tiles=True, d_step=64,
            num_warps=4, num_stages=1),
    },
}


def _qk_softmax_kernel(q_ref, k_ref, o_ref, *, block_d: int, block_q: int, block_k: int,
                       whole_rows: bool, col_split: int):
  s_len, d = q_ref.shape
  i = pl.program_id(0)
  rows = i * block_q + jnp.arange(block_q)
  dims = jnp.arange(block_d)
  q = pltriton.load(q_ref.at[pl.ds(i * block_q, block_q), pl.ds(0, block_d)],
                    mask=(rows[:, None] < s_len) & (dims[None, :] < d), other=0.0)
  q = q * (d ** -0.5)

  def scores(start, first=0):
    """Which of the block_k keys from `start` count (from key `first` to the last), and the
    query rows' scaled scores against them, -inf for those that do not."""
    keys = start + jnp.arange(block_k)
    valid = (keys >= first) & (keys < s_len)
    k = pltriton.load(k_ref.at[pl.ds(start, block_k), pl.ds(0, block_d)],
                      mask=(keys[:, None] < s_len) & (dims[None, :] < d), other=0.0)
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    return valid, jnp.where(valid[None, :], s, -jnp.inf)

  def store(start, valid, p):
    pltriton.store(o_ref.at[pl.ds(i * block_q, block_q), pl.ds(start, block_k)], p,
                   mask=(rows[:, None] < s_len) & valid[None, :])

  num_blocks = pl.cdiv(s_len, block_k)
  if whole_rows:  # every key block's scores at once: one pass
    # Static block starts must lie inside k (Pallas checks them), so a last block past S
    # starts earlier and counts only its new keys.
    starts = [(min(b * block_k, max(s_len - block_k, 0)), b * block_k)
              for b in range(num_blocks)]
    blocks = [(start, *scores(start, first)) for start, first in starts]
    m = functools.reduce(jnp.maximum, [jnp.max(s, axis=1) for *_, s in blocks])[:, None]
    blocks = [(start, valid, jnp.exp(s - m)) for start, valid, s in blocks]
    inv_l = 1.0 / sum(jnp.sum(p, axis=1) for *_, p in blocks)[:, None]
    for start, valid, p in blocks:
      store(start, valid, p * inv_l)
    return

  def stats(b, carry):
    m, l = carry
    _, s = scores(b * block_k)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))  # finite: key block 0 always has a real key
    l = l * jnp.exp(m - m_new) + jnp.sum(jnp.exp(s - m_new[:, None]), axis=1)
    return m_new, l

  m, l = jax.lax.fori_loop(0, num_blocks, stats, (jnp.full((block_q,), -jnp.inf, jnp.float32),
                                                  jnp.zeros((block_q,), jnp.float32)))
  inv_l = 1.0 / l
  per_program = pl.cdiv(num_blocks, col_split)
  first = pl.program_id(1) * per_program

  @pl.loop(first, jnp.minimum(first + per_program, num_blocks))
  def _(b):
    valid, s = scores(b * block_k)
    store(b * block_k, valid, jnp.exp(s - m[:, None]) * inv_l[:, None])


def _tile_scores(q_ref, k_ref, *, block_d: int, block_q: int, block_k: int, d_step: int):
  """The rows of program_id(0)'s query block, the keys of program_id(1)'s key block, and their
  scaled scores, -inf past the last key; q k^T summed over d in d_step-column steps."""
  s_len, d = q_ref.shape
  first_row, first_key = pl.program_id(0) * block_q, pl.program_id(1) * block_k
  rows, keys = first_row + jnp.arange(block_q), first_key + jnp.arange(block_k)
  d_step = min(d_step, block_d)

  def step(c, s):
    dims = c * d_step + jnp.arange(d_step)
    cols = pl.ds(c * d_step, d_step)
    q = pltriton.load(q_ref.at[pl.ds(first_row, block_q), cols],
                      mask=(rows[:, None] < s_len) & (dims[None, :] < d), other=0.0)
    k = pltriton.load(k_ref.at[pl.ds(first_key, block_k), cols],
                      mask=(keys[:, None] < s_len) & (dims[None, :] < d), other=0.0)
    return s + jnp.dot(q, k.T, preferred_element_type=jnp.float32)

  s = jax.lax.fori_loop(0, block_d // d_step, step, jnp.zeros((block_q, block_k), jnp.float32))
  return rows, keys, jnp.where(keys[None, :] < s_len, s * (d ** -0.5), -jnp.inf)


def _tile_exp_kernel(q_ref, k_ref, p_ref, m_ref, l_ref, *, block_q: int, block_k: int,
                     **sizes):
  """exp(s - m) of one score tile, m its row maxima; m and the row sums l of exp(s - m) go to
  column program_id(1) of the statistics."""
  s_len = q_ref.shape[0]
  rows, keys, s = _tile_scores(q_ref, k_ref, block_q=block_q, block_k=block_k, **sizes)
  m = jnp.max(s, axis=1)  # finite: every key block holds a real key
  p = jnp.exp(s - m[:, None])
  stats = (pl.ds(pl.program_id(0) * block_q, block_q), pl.program_id(1))
  pltriton.store(m_ref.at[stats], m, mask=rows < s_len)
  pltriton.store(l_ref.at[stats], jnp.sum(p, axis=1), mask=rows < s_len)
  pltriton.store(p_ref.at[pl.ds(pl.program_id(0) * block_q, block_q),
                          pl.ds(pl.program_id(1) * block_k, block_k)], p,
                 mask=(rows[:, None] < s_len) & (keys[None, :] < s_len))


def _tile_rescale_kernel(p_ref, m_ref, l_ref, o_ref, *, block_q: int, block_k: int):
  """One tile of exp(s - m) rescaled to exp(s - M) / L, M and L its rows' statistics combined
  over every tile: each row times exp(m - M) / L."""
  s_len, num_blocks = m_ref.shape
  rows = pl.program_id(0) * block_q + jnp.arange(block_q)
  keys = pl.program_id(1) * block_k + jnp.arange(block_k)
  row_ok = rows < s_len
  blocks = jnp.arange(pl.next_power_of_2(num_blocks))
  row_stats = (pl.ds(pl.program_id(0) * block_q, block_q), pl.ds(0, blocks.shape[0]))
  mask = row_ok[:, None] & (blocks[None, :] < num_blocks)
  m = pltriton.load(m_ref.at[row_stats], mask=mask, other=-jnp.inf)
  l = pltriton.load(l_ref.at[row_stats], mask=mask, other=0.0)
  m_row = jnp.where(row_ok, jnp.max(m, axis=1), 0.0)  # rows past S: no statistics, no store
  l_row = jnp.sum(l * jnp.exp(m - m_row[:, None]), axis=1)
  m_tile = pltriton.load(m_ref.at[pl.ds(pl.program_id(0) * block_q, block_q), pl.program_id(1)],
                         mask=row_ok, other=0.0)
  scale = jnp.where(row_ok, jnp.exp(m_tile - m_row) / l_row, 0.0)
  tile = (pl.ds(pl.program_id(0) * block_q, block_q), pl.ds(pl.program_id(1) * block_k, block_k))
  tile_ok = row_ok[:, None] & (keys[None, :] < s_len)
  p = pltriton.load(p_ref.at[tile], mask=tile_ok, other=0.0)
  pltriton.store(o_ref.at[tile], p * scale[:, None], mask=tile_ok)


def config_ok(config) -> bool:  # pylint: disable=unused-argument
  """Every config of the spaces compiles and is worth trying: each space fixes the keys its
  structure ignores (col_split, whole_rows, tiles, d_step, num_stages)."""
  return True


def _default_config() -> dict:
  return dict(block_q=32, block_k=64, whole_rows=False, col_split=1, tiles=False, d_step=256,
              num_warps=4, num_stages=2)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '256x64,256x64',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(q, k) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(q, k))
  return dict(tuned) if tuned else _default_config()


def kernel(q, k, *, interpret: bool = False, config=None):
  """softmax(q k^T / sqrt(d)); `config` (keys of CONFIG_SPACE) overrides the tuned or default."""
  if k.shape != q.shape:
    raise ValueError(f"{k.shape=} must equal {q.shape=}")
  out = _qk_softmax(q, k, interpret=interpret, **{**config_for(q, k), **(config or {})})
  return out.astype(q.dtype)


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE[0]))
def _qk_softmax(q, k, *, interpret: bool, block_q: int, block_k: int, whole_rows: bool,
                col_split: int, tiles: bool, d_step: int, num_warps: int, num_stages: int):
  s_len, d = q.shape
  block_d = max(16, pl.next_power_of_2(d))
  params = pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages)
  if tiles:
    grid = (pl.cdiv(s_len, block_q), pl.cdiv(s_len, block_k))
    scores = jax.ShapeDtypeStruct((s_len, s_len), jnp.float32)
    stats = jax.ShapeDtypeStruct((s_len, grid[1]), jnp.float32)
    p, m, l = pl.pallas_call(
        functools.partial(_tile_exp_kernel, block_d=block_d, block_q=block_q, block_k=block_k,
                          d_step=d_step),
        grid=grid, out_shape=(scores, stats, stats), compiler_params=params,
        interpret=interpret, name=TASK_NAME + "_exp")(q, k)
    return pl.pallas_call(
        functools.partial(_tile_rescale_kernel, block_q=block_q, block_k=block_k), grid=grid,
        out_shape=scores, input_output_aliases={0: 0}, compiler_params=params,
        interpret=interpret, name=TASK_NAME)(p, m, l)
  return pl.pallas_call(
      functools.partial(_qk_softmax_kernel, block_d=block_d, block_q=block_q, block_k=block_k,
                        whole_rows=whole_rows, col_split=1 if whole_rows else col_split),
      grid=(pl.cdiv(s_len, block_q), 1 if whole_rows else col_split),
      out_shape=jax.ShapeDtypeStruct((s_len, s_len), jnp.float32),
      compiler_params=params, interpret=interpret, name=TASK_NAME)(q, k)
