"""log_softmax: out = (x - max) - log(sum(exp(x - max))) per row; x (N, M) float32 -> (N, M)
float32, any N and M.

Layout: whole-array refs (no BlockSpecs). Program i owns block_rows consecutive rows and walks
them in (block_rows, block_cols) tiles, twice: pass 1 keeps an online float32 (max, sum of
exp(x - max)) per row, rescaling the sum whenever the max grows; pass 2 reloads the tiles and
stores (x - max) - log(sum). Loads are masked past row N and column M with other=-inf (exp gives
0) and stores to the valid elements, so any N and M work. Rows past N only ever see -inf (their
NaN statistics are never stored).

Tiles (`_block_sizes`): block_cols = next_pow2(row length) <= 8192; block_rows fills a tile of
8192 elements (<= 16 rows) but leaves about 512 programs or more, so that every SM has work.
Tiles stay far below Triton's 2^20-element limit; 8 warps for a full tile.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "log_softmax"
FIX_APPLIED: Final = "online_softmax"
FIX_REASON: Final = ("the TPU kernel's (128, M) full-row blocks reach 2^20 elements per program "
                     "at the large size (register spills at best) and need N % 128 == 0 and a "
                     "power-of-two M; masked tiles of at most 8192 elements with an online "
                     "(max, sum) pass along the row fit and accept any shape")
TILE: Final = 8192  # elements per loaded tile
MAX_BLOCK_ROWS: Final = 16
MAX_BLOCK_COLS: Final = 8192
MIN_PROGRAMS: Final = 512


def _log_softmax_kernel(x_ref, o_ref, *, block_rows: int, block_cols: int):
  n, m = x_ref.shape
  row0 = pl.program_id(0) * block_rows
  rows = row0 + jnp.arange(block_rows)

  def load_x(j):  # the tile of x at column block j, its index and its bounds mask
    cols = j * block_cols + jnp.arange(block_cols)
    mask = (rows[:, None] < n) & (cols[None, :] < m)
    idx = (pl.ds(row0, block_rows), pl.ds(j * block_cols, block_cols))
    return pltriton.load(x_ref.at[idx], mask=mask, other=-jnp.inf), idx, mask

  def stats(j, carry):
    row_max, row_sum = carry
    x, _, _ = load_x(j)
    new_max = jnp.maximum(row_max, jnp.max(x, axis=1))
    row_sum = (row_sum * jnp.exp(row_max - new_max)
               + jnp.sum(jnp.exp(x - new_max[:, None]), axis=1))
    return new_max, row_sum

  num_tiles = pl.cdiv(m, block_cols)
  row_max, row_sum = jax.lax.fori_loop(
      0, num_tiles, stats,
      (jnp.full(block_rows, -jnp.inf, jnp.float32), jnp.zeros(block_rows, jnp.float32)))

  log_sum = jnp.log(row_sum)

  @pl.loop(0, num_tiles)
  def _(j):
    x, idx, mask = load_x(j)
    pltriton.store(o_ref.at[idx], (x - row_max[:, None]) - log_sum[:, None], mask=mask)


def _block_sizes(n: int, m: int) -> tuple[int, int, int]:
  """(rows per program, columns per tile, warps): power-of-two tiles of at most TILE elements."""
  block_cols = min(pl.next_power_of_2(m), MAX_BLOCK_COLS)
  # Fill a tile, but keep about MIN_PROGRAMS programs or more so that every SM gets work.
  block_rows = min(TILE // block_cols, MAX_BLOCK_ROWS,
                   pl.next_power_of_2(max(1, n // MIN_PROGRAMS)))
  return block_rows, block_cols, 8 if block_rows * block_cols >= TILE else 4


@functools.partial(jax.jit, static_argnames=("interpret",))
def kernel(x, *, interpret: bool = False):
  n, m = x.shape
  block_rows, block_cols, num_warps = _block_sizes(n, m)
  return pl.pallas_call(
      functools.partial(_log_softmax_kernel, block_rows=block_rows, block_cols=block_cols),
      grid=(pl.cdiv(n, block_rows),),
      out_shape=jax.ShapeDtypeStruct((n, m), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(x)
