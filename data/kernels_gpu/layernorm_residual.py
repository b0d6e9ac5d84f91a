"""layernorm_residual: h = x + residual, out = (h - mean) * rsqrt(var + 1e-5) per row of h,
population variance, no gain or bias; x, residual (N, D) float32 -> (N, D) float32, any N, D.

Layout: whole-array refs (no BlockSpecs). Program i owns block_rows consecutive rows and walks
them in (block_rows, block_cols) tiles, twice: pass 1 forms h = x + residual per tile and merges
the tile's mean and sum of squared deviations into running float32 (mean, m2) per row (Chan's
parallel update, as accurate as two passes over the row); pass 2 reloads both tiles, re-adds,
normalises and stores. The sum h never goes to memory. Loads are masked past row N and column
D (other=0) and stores to the valid elements, so any N and D work.

Default tiles (`_default_config`): block_cols = next_pow2(row length) <= 4096; block_rows fills a
tile of 8192 elements (<= 16 rows) but leaves about 512 programs or more, so that every SM has work.
Tiles stay far below Triton's 2^20-element limit; 8 warps for a full tile, else 4; no pipelining.

Tuning: block_rows trades programs (the grid's parallelism) against rows per program; block_cols
trades loop steps against the columns a tile masks off past D; num_warps spreads a tile over more
threads (fewer registers each); num_stages > 1 lets Triton prefetch each pass's next tiles into
shared memory. The config comes from TUNED_CONFIGS for the GPU and shape class being compiled for,
else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "layernorm_residual"
FIX_APPLIED: Final = "row_blocks"
FIX_REASON: Final = ("the TPU kernel's (128, D) full-row blocks of x, residual and output hold "
                     "up to 3 x 512K floats per program in registers at the large size and need "
                     "N % 128 == 0 and a power-of-two D; masked tiles of at most 8192 elements "
                     "looped along the row with running (mean, m2) statistics fit any shape")
EPS: Final = 1e-5
TILE: Final = 8192  # elements per loaded tile
MAX_BLOCK_ROWS: Final = 16
MAX_BLOCK_COLS: Final = 4096
MIN_PROGRAMS: Final = 512
MAX_TILE_ELEMENTS: Final = 1 << 14  # a config's (block_rows, block_cols) tile
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of both inputs' tiles each thread holds
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_rows": (1, 2, 4, 8, 16, 32),
                       "block_cols": (512, 1024, 2048, 4096, 8192), "num_warps": (2, 4, 8, 16),
                       "num_stages": (1, 2, 3)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "2048x1024,2048x1024": dict(
            block_rows=1, block_cols=4096, num_warps=4, num_stages=2),
        "2048x1024,2048x1024:bfloat16": dict(
            block_rows=1, block_cols=4096, num_warps=4, num_stages=2),
        "8192x4096,8192x4096": dict(
            block_rows=2, block_cols=4096, num_warps=16, num_stages=1),
        "8192x4096,8192x4096:bfloat16": dict(
            block_rows=1, block_cols=4096, num_warps=16, num_stages=2),
    },
}


def _layernorm_residual_kernel(x_ref, r_ref, o_ref, *, block_rows: int, block_cols: int):
  n, d = x_ref.shape
  row0 = pl.program_id(0) * block_rows
  rows = row0 + jnp.arange(block_rows)

  def load_h(j):  # the tile of h = x + residual at column block j, its index and bounds mask
    cols = j * block_cols + jnp.arange(block_cols)
    mask = (rows[:, None] < n) & (cols[None, :] < d)
    idx = (pl.ds(row0, block_rows), pl.ds(j * block_cols, block_cols))
    h = (pltriton.load(x_ref.at[idx], mask=mask, other=0.0).astype(jnp.float32)
         + pltriton.load(r_ref.at[idx], mask=mask, other=0.0).astype(jnp.float32))
    return h, idx, mask

  def stats(j, carry):
    mean, m2 = carry
    h, _, mask = load_h(j)
    # Merge this tile's (count, mean, m2) into the running statistics of the `seen` columns.
    count = jnp.minimum(d - j * block_cols, block_cols).astype(jnp.float32)
    seen = (j * block_cols).astype(jnp.float32)
    tile_mean = jnp.sum(h, axis=1) / count
    centered = jnp.where(mask, h - tile_mean[:, None], 0.0)
    delta = tile_mean - mean
    total = seen + count
    return (mean + delta * (count / total),
            m2 + jnp.sum(centered * centered, axis=1) + delta * delta * (seen * count / total))

  zeros = jnp.zeros(block_rows, jnp.float32)
  num_tiles = pl.cdiv(d, block_cols)
  mean, m2 = jax.lax.fori_loop(0, num_tiles, stats, (zeros, zeros))
  rstd = jax.lax.rsqrt(m2 / d + EPS)

  @pl.loop(0, num_tiles)
  def _(j):
    h, idx, mask = load_h(j)
    pltriton.store(o_ref.at[idx],
                   ((h - mean[:, None]) * rstd[:, None]).astype(o_ref.dtype), mask=mask)


def config_ok(config) -> bool:
  """Whether both inputs' tiles fit each thread's registers and, pipelined, shared memory."""
  tile = config["block_rows"] * config["block_cols"]
  return (tile <= MAX_TILE_ELEMENTS
          and 2 * tile <= MAX_ELEMENTS_PER_THREAD * 32 * config["num_warps"]
          and config["num_stages"] * 2 * tile * 4 <= SHARED_MEMORY_BYTES)


def _default_config(n: int, d: int) -> dict:
  """Power-of-two tiles of at most TILE elements, 8 warps for a full one, unpipelined."""
  block_cols = min(pl.next_power_of_2(d), MAX_BLOCK_COLS)
  # Fill a tile, but keep about MIN_PROGRAMS programs or more so that every SM gets work.
  block_rows = min(TILE // block_cols, MAX_BLOCK_ROWS,
                   pl.next_power_of_2(max(1, n // MIN_PROGRAMS)))
  return dict(block_rows=block_rows, block_cols=block_cols,
              num_warps=8 if block_rows * block_cols >= TILE else 4, num_stages=1)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '2048x1024,2048x1024',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(x, residual) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x, residual))
  return dict(tuned) if tuned else _default_config(*x.shape)


def kernel(x, residual, *, interpret: bool = False, config=None):
  """Layer norm of x + residual's rows; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  if residual.shape != x.shape:
    raise ValueError(f"{residual.shape=} must equal {x.shape=}")
  return _layernorm_residual(x, residual, interpret=interpret,
                             **{**config_for(x, residual), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _layernorm_residual(x, residual, *, interpret: bool, block_rows: int, block_cols: int,
                        num_warps: int, num_stages: int):
  n, d = x.shape
  return pl.pallas_call(
      functools.partial(_layernorm_residual_kernel, block_rows=block_rows,
                        block_cols=block_cols),
      grid=(pl.cdiv(n, block_rows),),
      out_shape=jax.ShapeDtypeStruct((n, d), x.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(x, residual)
