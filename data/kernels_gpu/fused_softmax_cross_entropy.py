"""fused_softmax_cross_entropy (hard labels): out[i] = logsumexp(logits[i]) - logits[i, labels[i]];
logits (N, V) float32, labels (N,) int32 in [0, V) -> out (N,) float32, any N and V.

Layout: whole-array refs (no BlockSpecs). Program i owns block_rows consecutive rows and walks
them in (block_rows, block_cols) tiles with a fori_loop, keeping an online float32 (max, sum of
exp(z - max)) per row, so the vocabulary (32000 at the large size, not a power of two) is never
held whole. Tiles are masked past row N and column V (other=-inf, so exp gives 0; rows past N
get NaN statistics that are never stored). The target logits are one masked gather of
block_rows scalars, logits[rows, labels]; a label outside [0, V) gives NaN instead of an
out-of-bounds read. The store is masked to the valid rows.

Default tiles (`_default_config`): block_cols = next_pow2(row length) <= 4096; block_rows fills a
tile of 8192 elements (<= 16 rows) but leaves about 512 programs or more, so that every SM has work.
Tiles stay far below Triton's 2^20-element limit; 8 warps for a full tile, else 4; no pipelining.

Tuning: block_rows trades programs (the grid's parallelism) against rows per program; block_cols
trades loop steps against the columns a tile masks off past V; num_warps spreads a tile over more
threads (fewer registers each); num_stages > 1 lets Triton prefetch the next tile into shared
memory. The config comes from TUNED_CONFIGS for the GPU and shape class being compiled for, else
from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "fused_softmax_cross_entropy"
FIX_APPLIED: Final = "online_softmax"
FIX_REASON: Final = ("the TPU kernel's (128, V) full-row blocks cannot lower to Triton at the "
                     "large size (V = 32000 is not a power of two, and 4M floats exceed the "
                     "2^20 limit) and need N % 128 == 0; masked tiles of at most 8192 elements "
                     "with an online logsumexp over the vocabulary fit and accept any shape")
TILE: Final = 8192  # elements per loaded tile
MAX_BLOCK_ROWS: Final = 16
MAX_BLOCK_COLS: Final = 4096
MIN_PROGRAMS: Final = 512
MAX_TILE_ELEMENTS: Final = 1 << 14  # a config's (block_rows, block_cols) tile
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a tile each thread holds in registers
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_rows": (1, 2, 4, 8, 16, 32),
                       "block_cols": (512, 1024, 2048, 4096, 8192), "num_warps": (2, 4, 8, 16),
                       "num_stages": (1, 2, 3)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024x4096,1024": dict(
            block_rows=1, block_cols=2048, num_warps=2, num_stages=2),
        "1024x4096,1024:bfloat16": dict(
            block_rows=1, block_cols=8192, num_warps=4, num_stages=3),
        "4096x32768,4096": dict(
            block_rows=1, block_cols=8192, num_warps=4, num_stages=3),
        "4096x32768,4096:bfloat16": dict(
            block_rows=1, block_cols=8192, num_warps=4, num_stages=3),
    },
}


def _fused_softmax_cross_entropy_kernel(z_ref, labels_ref, o_ref, *, block_rows: int,
                                        block_cols: int):
  n, v = z_ref.shape
  row0 = pl.program_id(0) * block_rows
  rows = row0 + jnp.arange(block_rows)
  row_ok = rows < n

  def body(j, carry):
    row_max, row_sum = carry
    cols = j * block_cols + jnp.arange(block_cols)
    z = pltriton.load(z_ref.at[pl.ds(row0, block_rows), pl.ds(j * block_cols, block_cols)],
                      mask=row_ok[:, None] & (cols[None, :] < v),
                      other=-jnp.inf).astype(jnp.float32)
    new_max = jnp.maximum(row_max, jnp.max(z, axis=1))
    row_sum = (row_sum * jnp.exp(row_max - new_max)
               + jnp.sum(jnp.exp(z - new_max[:, None]), axis=1))
    return new_max, row_sum

  row_max, row_sum = jax.lax.fori_loop(
      0, pl.cdiv(v, block_cols), body,
      (jnp.full(block_rows, -jnp.inf, jnp.float32), jnp.zeros(block_rows, jnp.float32)))
  labels = pltriton.load(labels_ref.at[pl.ds(row0, block_rows)], mask=row_ok, other=0)
  target = pltriton.load(z_ref.at[rows, labels], mask=row_ok & (labels >= 0) & (labels < v),
                         other=jnp.nan).astype(jnp.float32)
  pltriton.store(o_ref.at[pl.ds(row0, block_rows)],
                 (row_max + jnp.log(row_sum) - target).astype(o_ref.dtype), mask=row_ok)


def config_ok(config) -> bool:
  """Whether a tile fits each thread's registers and its pipelined copies shared memory."""
  tile = config["block_rows"] * config["block_cols"]
  return (tile <= MAX_TILE_ELEMENTS and tile <= MAX_ELEMENTS_PER_THREAD * 32 * config["num_warps"]
          and config["num_stages"] * tile * 4 <= SHARED_MEMORY_BYTES)


def _default_config(n: int, v: int) -> dict:
  """Power-of-two tiles of at most TILE elements, 8 warps for a full one, unpipelined."""
  block_cols = min(pl.next_power_of_2(v), MAX_BLOCK_COLS)
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
  """The inputs' dimensions rounded up to powers of two: '1024x4096,1024',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(logits, labels) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(logits, labels))
  return dict(tuned) if tuned else _default_config(*logits.shape)


def kernel(logits, labels, *, interpret: bool = False, config=None):
  """Hard-label cross entropy per row; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  n = logits.shape[0]
  if labels.shape != (n,):
    raise ValueError(f"{labels.shape=} must be ({n},)")
  return _fused_softmax_cross_entropy(logits, labels, interpret=interpret,
                                      **{**config_for(logits, labels), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _fused_softmax_cross_entropy(logits, labels, *, interpret: bool, block_rows: int,
                                 block_cols: int, num_warps: int, num_stages: int):
  n = logits.shape[0]
  return pl.pallas_call(
      functools.partial(_fused_softmax_cross_entropy_kernel, block_rows=block_rows,
                        block_cols=block_cols),
      grid=(pl.cdiv(n, block_rows),),
      out_shape=jax.ShapeDtypeStruct((n,), logits.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(logits, labels)
