"""embedding_lookup: out[s, :] = table[ids[s], :]; table (V, D) float32, ids (S,) int32 in [0, V).

GPU fix: a 2-D grid over (block_s tokens) x (block_d columns), 16 x 256 by default. The table
keeps a whole-array ref (a pointer on Triton, nothing is copied); each program loads its block
of ids and gathers the (block_s, block_d) tile of table rows by integer-array indexing of that
ref, masking the token tail and the column tail, so any V, D and S work (D = 768 is not a power
of two).

Tuning: `block_s`, `block_d` and the warps set how many row segments each thread gathers at once
(bytes in flight) against how many programs share the GPU; a wider `block_d` reads longer
contiguous runs of each row. The config comes from TUNED_CONFIGS for the GPU and shape class
being compiled for, else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "embedding_lookup"
FIX_APPLIED: Final = "gather_rows"
FIX_REASON: Final = ("the TPU kernel gathers all S rows at full width in one program: D = 768 is "
                     "not a power of two and (2048, 1024) passes Triton's 2^20-element limit; a "
                     "masked row gather per 16-token x 256-column tile fits any V, D and S")
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a tile each thread holds in registers
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_s": (8, 16, 32, 64), "block_d": (128, 256, 512, 1024),
                       "num_warps": (2, 4, 8, 16)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "131072x1024,2048": dict(
            block_s=8, block_d=256, num_warps=4),
        "131072x1024,2048:bfloat16": dict(
            block_s=16, block_d=1024, num_warps=16),
        "32768x1024,512": dict(
            block_s=8, block_d=1024, num_warps=16),
        "32768x1024,512:bfloat16": dict(
            block_s=8, block_d=512, num_warps=16),
    },
}


def _embedding_lookup_kernel(table_ref, ids_ref, o_ref, *, v: int, d: int, s: int, block_s: int,
                             block_d: int):
  r0 = pl.program_id(0) * block_s
  c0 = pl.program_id(1) * block_d
  row_ok = r0 + jnp.arange(block_s) < s
  cols = c0 + jnp.arange(block_d)
  col_ok = cols < d
  ids = pltriton.load(ids_ref.at[pl.ds(r0, block_s)], mask=row_ok, other=0)
  # Out-of-range ids read nothing and give NaN rows, as jnp.take's default fill mode does.
  id_ok = (ids >= 0) & (ids < v)
  rows = pltriton.load(table_ref.at[ids[:, None], cols[None, :]],
                       mask=id_ok[:, None] & col_ok[None, :], other=jnp.nan)
  pltriton.store(o_ref.at[pl.ds(r0, block_s), pl.ds(c0, block_d)], rows,
                 mask=row_ok[:, None] & col_ok[None, :])


def config_ok(config) -> bool:
  """Whether every thread holds between 1 and MAX_ELEMENTS_PER_THREAD elements of a tile."""
  threads = 32 * config["num_warps"]
  return threads <= config["block_s"] * config["block_d"] <= threads * MAX_ELEMENTS_PER_THREAD


def _default_config() -> dict:
  return dict(block_s=16, block_d=256, num_warps=4)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '256x32',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(table, ids) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(table, ids))
  return dict(tuned) if tuned else _default_config()


def kernel(table, ids, *, interpret: bool = False, config=None):
  """The rows of table at ids; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  return _embedding_lookup(table, ids, interpret=interpret,
                           **{**config_for(table, ids), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _embedding_lookup(table, ids, *, interpret: bool, block_s: int, block_d: int,
                      num_warps: int):
  (v, d), (s,) = table.shape, ids.shape
  return pl.pallas_call(
      functools.partial(_embedding_lookup_kernel, v=v, d=d, s=s, block_s=block_s,
                        block_d=block_d),
      grid=(pl.cdiv(s, block_s), pl.cdiv(d, block_d)),
      out_shape=jax.ShapeDtypeStruct((s, d), table.dtype),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=1),
      interpret=interpret, name=TASK_NAME)(table, ids)
