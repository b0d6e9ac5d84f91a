"""cross_entropy (soft labels): out[i] = -sum_c labels[i, c] log_softmax(logits[i])[c];
logits, labels (N, C) float32 -> out (N,) float32, any N and C.

Since log_softmax(z) = z - lse(z), out[i] = lse(z_i) sum_c labels[i, c] - sum_c labels[i, c] z_ic,
so one pass suffices: the row's logsumexp by an online (max, sum of exp(z - max)) update, and the
two label sums, all float32 carries.

Layout: whole-array refs (no BlockSpecs). Program i owns block_rows consecutive rows and walks
them in (block_rows, block_cols) tiles of both inputs with a fori_loop. Tiles are masked past
row N and column C (other=0; masked logits become -inf before the max and exp), and the store
is masked to the valid rows, so any N and C work.

Default tiles (`_default_config`): block_cols = next_pow2(row length) <= 4096; block_rows fills a
tile of 8192 elements (<= 16 rows) but leaves about 512 programs or more, so that every SM has work.
Tiles stay far below Triton's 2^20-element limit; 8 warps for a full tile, else 4; no pipelining.

Tuning: block_rows trades programs (the grid's parallelism) against rows per program; block_cols
trades loop steps against the columns a tile masks off past C; num_warps spreads a tile over more
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

TASK_NAME: Final = "cross_entropy"
FIX_APPLIED: Final = "online_softmax"
FIX_REASON: Final = ("the TPU kernel's (128, C) full-row blocks of logits and labels grow with "
                     "C (256K floats each at the large size) and need N % 128 == 0 and a "
                     "power-of-two C; masked tiles of at most 8192 elements with an online "
                     "logsumexp along the row fit and accept any shape")
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
        "1024x512,1024x512": dict(
            block_rows=1, block_cols=1024, num_warps=2, num_stages=1),
        "1024x512,1024x512:bfloat16": dict(
            block_rows=2, block_cols=512, num_warps=4, num_stages=3),
        "4096x2048,4096x2048": dict(
            block_rows=1, block_cols=4096, num_warps=4, num_stages=2),
        "4096x2048,4096x2048:bfloat16": dict(
            block_rows=1, block_cols=1024, num_warps=2, num_stages=1),
    },
}


def _cross_entropy_kernel(z_ref, p_ref, o_ref, *, block_rows: int, block_cols: int):
  n, c = z_ref.shape
  row0 = pl.program_id(0) * block_rows
  rows = row0 + jnp.arange(block_rows)

  def body(j, carry):
    row_max, row_sum, p_sum, pz_sum = carry
    cols = j * block_cols + jnp.arange(block_cols)
    mask = (rows[:, None] < n) & (cols[None, :] < c)
    idx = (pl.ds(row0, block_rows), pl.ds(j * block_cols, block_cols))
    z = pltriton.load(z_ref.at[idx], mask=mask, other=0.0).astype(jnp.float32)
    p = pltriton.load(p_ref.at[idx], mask=mask, other=0.0).astype(jnp.float32)
    z_inf = jnp.where(mask, z, -jnp.inf)  # masked logits add exp(-inf) = 0 to the sum
    new_max = jnp.maximum(row_max, jnp.max(z_inf, axis=1))
    row_sum = (row_sum * jnp.exp(row_max - new_max)
               + jnp.sum(jnp.exp(z_inf - new_max[:, None]), axis=1))
    return new_max, row_sum, p_sum + jnp.sum(p, axis=1), pz_sum + jnp.sum(p * z, axis=1)

  zeros = jnp.zeros(block_rows, jnp.float32)
  row_max, row_sum, p_sum, pz_sum = jax.lax.fori_loop(
      0, pl.cdiv(c, block_cols), body,
      (jnp.full(block_rows, -jnp.inf, jnp.float32), zeros, zeros, zeros))
  lse = row_max + jnp.log(row_sum)
  pltriton.store(o_ref.at[pl.ds(row0, block_rows)],
                 (lse * p_sum - pz_sum).astype(o_ref.dtype), mask=rows < n)


def config_ok(config) -> bool:
  """Whether both inputs' tiles fit each thread's registers and, pipelined, shared memory."""
  tile = config["block_rows"] * config["block_cols"]
  return (tile <= MAX_TILE_ELEMENTS
          and 2 * tile <= MAX_ELEMENTS_PER_THREAD * 32 * config["num_warps"]
          and config["num_stages"] * 2 * tile * 4 <= SHARED_MEMORY_BYTES)


def _default_config(n: int, c: int) -> dict:
  """Power-of-two tiles of at most TILE elements, 8 warps for a full one, unpipelined."""
  block_cols = min(pl.next_power_of_2(c), MAX_BLOCK_COLS)
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
  """The inputs' dimensions rounded up to powers of two: '1024x512,1024x512',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(logits, labels) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(logits, labels))
  return dict(tuned) if tuned else _default_config(*logits.shape)


def kernel(logits, labels, *, interpret: bool = False, config=None):
  """Soft-label cross entropy per row; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  if labels.shape != logits.shape:
    raise ValueError(f"{labels.shape=} must equal {logits.shape=}")
  return _cross_entropy(logits, labels, interpret=interpret,
                        **{**config_for(logits, labels), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _cross_entropy(logits, labels, *, interpret: bool, block_rows: int, block_cols: int,
                   num_warps: int, num_stages: int):
  n = logits.shape[0]
  return pl.pallas_call(
      functools.partial(_cross_entropy_kernel, block_rows=block_rows, block_cols=block_cols),
      grid=(pl.cdiv(n, block_rows),),
      out_shape=jax.ShapeDtypeStruct((n,), logits.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(logits, labels)
