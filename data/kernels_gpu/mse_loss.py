"""mse_loss: out[i] = mean_j (pred[i, j] - target[i, j])^2; pred, target (N, M) float32 ->
out (N,) float32, any N and M.

Layout: whole-array refs (no BlockSpecs). Program i owns block_rows consecutive rows and walks
them in (block_rows, block_cols) tiles of both inputs with a fori_loop, adding each tile's row
sums of squared differences to a float32 carry that is divided by M at the end. Tiles are
masked past row N and column M (other=0 in both, so the difference is 0), and the store is
masked to the valid rows, so any N and M work.

Default tiles (`_default_config`): block_cols = next_pow2(row length) <= 4096; block_rows fills a
tile of 8192 elements (<= 16 rows) but leaves about 512 programs or more, so that every SM has work.
Tiles stay far below Triton's 2^20-element limit; 8 warps for a full tile, else 4; no pipelining.

Tuning: block_rows trades programs (the grid's parallelism) against rows per program; block_cols
trades loop steps against the columns a tile masks off past M; num_warps spreads a tile over more
threads (fewer registers each); num_stages > 1 lets Triton prefetch the next tiles into shared
memory. The config comes from TUNED_CONFIGS for the GPU and shape class being compiled for, else
from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "mse_loss"
FIX_APPLIED: Final = "row_blocks"
FIX_REASON: Final = ("the TPU kernel's (256, M) full-row blocks of both inputs hold up to 1M "
                     "floats each per program at the large size and need N % 256 == 0 and a "
                     "power-of-two M; masked tiles of at most 8192 elements looped along the "
                     "row fit and accept any shape")
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
            block_rows=1, block_cols=512, num_warps=2, num_stages=1),
        "2048x1024,2048x1024:bfloat16": dict(
            block_rows=2, block_cols=4096, num_warps=8, num_stages=3),
        "8192x4096,8192x4096": dict(
            block_rows=1, block_cols=8192, num_warps=16, num_stages=2),
        "8192x4096,8192x4096:bfloat16": dict(
            block_rows=1, block_cols=8192, num_warps=16, num_stages=2),
    },
}


def _mse_loss_kernel(p_ref, t_ref, o_ref, *, block_rows: int, block_cols: int):
  n, m = p_ref.shape
  row0 = pl.program_id(0) * block_rows
  rows = row0 + jnp.arange(block_rows)

  def body(j, acc):
    cols = j * block_cols + jnp.arange(block_cols)
    mask = (rows[:, None] < n) & (cols[None, :] < m)
    idx = (pl.ds(row0, block_rows), pl.ds(j * block_cols, block_cols))
    diff = (pltriton.load(p_ref.at[idx], mask=mask, other=0.0).astype(jnp.float32)
            - pltriton.load(t_ref.at[idx], mask=mask, other=0.0).astype(jnp.float32))
    return acc + jnp.sum(diff * diff, axis=1)

  total = jax.lax.fori_loop(0, pl.cdiv(m, block_cols), body,
                            jnp.zeros(block_rows, jnp.float32))
  pltriton.store(o_ref.at[pl.ds(row0, block_rows)], (total / m).astype(o_ref.dtype), mask=rows < n)


def config_ok(config) -> bool:
  """Whether both inputs' tiles fit each thread's registers and, pipelined, shared memory."""
  tile = config["block_rows"] * config["block_cols"]
  return (tile <= MAX_TILE_ELEMENTS
          and 2 * tile <= MAX_ELEMENTS_PER_THREAD * 32 * config["num_warps"]
          and config["num_stages"] * 2 * tile * 4 <= SHARED_MEMORY_BYTES)


def _default_config(n: int, m: int) -> dict:
  """Power-of-two tiles of at most TILE elements, 8 warps for a full one, unpipelined."""
  block_cols = min(pl.next_power_of_2(m), MAX_BLOCK_COLS)
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


def config_for(pred, target) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(pred, target))
  return dict(tuned) if tuned else _default_config(*pred.shape)


def kernel(pred, target, *, interpret: bool = False, config=None):
  """Each row pair's mean squared error; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  if target.shape != pred.shape:
    raise ValueError(f"{target.shape=} must equal {pred.shape=}")
  return _mse_loss(pred, target, interpret=interpret,
                   **{**config_for(pred, target), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _mse_loss(pred, target, *, interpret: bool, block_rows: int, block_cols: int, num_warps: int,
              num_stages: int):
  n = pred.shape[0]
  return pl.pallas_call(
      functools.partial(_mse_loss_kernel, block_rows=block_rows, block_cols=block_cols),
      grid=(pl.cdiv(n, block_rows),),
      out_shape=jax.ShapeDtypeStruct((n,), pred.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(pred, target)
