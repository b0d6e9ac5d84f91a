"""batched_matmul: out[b] = x[b] @ y[b]; x (B, M, K), y (B, K, N) float32, any B, M, K, N.

GPU fix: Triton has no batched dot, so the batch is a grid axis: a BlockSpec over the batch
dimension alone (block 1, which always divides) hands each program one matrix pair, and the
program owns one (block_m, block_n) output tile of it and walks K in block_k-wide steps with a
float32 accumulator (a `fori_loop`, not a grid axis: grid programs run in parallel on GPU).
Within a matrix the refs are whole (M, K), (K, N) and (M, N); every tile load and the store are
masked, so M, K and N need not be multiples of the blocks (out-of-range operands read as 0 and
add nothing). The f32 dot runs in TF32 on the tensor cores, within the matmul tolerance.
Tuning: within a matrix, programs run in groups of `group_m` row tiles (neighbouring programs
share y's column tiles in L2), and with `k_major` the kernel reads y transposed, (B, N, K),
which TF32 `wgmma` takes straight from shared memory (XLA transposes it first). The config
comes from TUNED_CONFIGS for the GPU and shape class being compiled for, else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "batched_matmul"
FIX_APPLIED: Final = "k_loop_accumulator"
FIX_REASON: Final = ("the TPU kernel's 3-D `@` on whole (1, M, K) blocks is a batched dot, which "
                     "Triton cannot lower; batch on the grid, 2-D masked tiles and a K loop with "
                     "an f32 accumulator")
MIN_PROGRAMS: Final = 128  # about one program per SM of an H200 (132 SMs)
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_m": (64, 128), "block_n": (64, 128, 256), "block_k": (32, 64),
                       "group_m": (1, 8), "k_major": (False, True), "num_warps": (4, 8),
                       "num_stages": (2, 3, 4)}
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "16x512x512,16x512x512": dict(
            block_m=128, block_n=128, block_k=32, group_m=8, k_major=True, num_warps=8,
            num_stages=4),
        "8x256x256,8x256x256": dict(
            block_m=64, block_n=64, block_k=32, group_m=1, k_major=False, num_warps=4,
            num_stages=3),
    },
}


def _batched_matmul_kernel(x_ref, y_ref, o_ref, *, block_m: int, block_n: int,
                           block_k: int, group_m: int, k_major: bool):
  m, k = x_ref.shape
  n = y_ref.shape[0] if k_major else y_ref.shape[1]
  tiles_m, tiles_n = pl.cdiv(m, block_m), pl.cdiv(n, block_n)
  pid = pl.program_id(1)
  first = (pid // (group_m * tiles_n)) * group_m
  height = jnp.minimum(tiles_m - first, group_m)
  i = first + (pid % (group_m * tiles_n)) % height
  j = (pid % (group_m * tiles_n)) // height
  rows = i * block_m + jnp.arange(block_m)
  cols = j * block_n + jnp.arange(block_n)

  def step(s, acc):
    ks = s * block_k + jnp.arange(block_k)
    x = pltriton.load(x_ref.at[pl.ds(i * block_m, block_m), pl.ds(s * block_k, block_k)],
                      mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
    if k_major:
      y = pltriton.load(y_ref.at[pl.ds(j * block_n, block_n), pl.ds(s * block_k, block_k)],
                        mask=(cols[:, None] < n) & (ks[None, :] < k), other=0.0).T
    else:
      y = pltriton.load(y_ref.at[pl.ds(s * block_k, block_k), pl.ds(j * block_n, block_n)],
                        mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0)
    return acc + jnp.dot(x, y, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, pl.cdiv(k, block_k), step,
                          jnp.zeros((block_m, block_n), jnp.float32))
  pltriton.store(o_ref.at[pl.ds(i * block_m, block_m), pl.ds(j * block_n, block_n)], acc,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))


def config_ok(config) -> bool:
  """Whether a config can compile: its pipelined tiles fit in shared memory and its
  accumulator in at most 128 registers per thread."""
  tiles = config["block_k"] * (config["block_m"] + config["block_n"]) * 4
  per_thread = config["block_m"] * config["block_n"] // (32 * config["num_warps"])
  return config["num_stages"] * tiles <= SHARED_MEMORY_BYTES and per_thread <= 128


def _default_config(batch: int, m: int, n: int) -> dict:
  """128 x 128 tiles when they still fill the GPU, else 64 x 64."""
  big = batch * pl.cdiv(m, 128) * pl.cdiv(n, 128) >= MIN_PROGRAMS
  return dict(block_m=128 if big else 64, block_n=128 if big else 64, block_k=32, group_m=1,
              k_major=False, num_warps=8 if big else 4, num_stages=3)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '1024x1024,1024x1024'."""
  return ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)


def config_for(x, y) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x, y))
  return dict(tuned) if tuned else _default_config(*x.shape[:2], y.shape[2])


def kernel(x, y, *, interpret: bool = False, config=None):
  """x[b] @ y[b]; `config` (keys of CONFIG_SPACE) overrides the tuned or default one."""
  (batch, m, k), (batch_y, k_y, n) = x.shape, y.shape
  if (batch, k) != (batch_y, k_y):
    raise ValueError(f"{x.shape=} and {y.shape=} must share the batch and contracted dimensions")
  return _batched_matmul(x, y, interpret=interpret, **{**config_for(x, y), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _batched_matmul(x, y, *, interpret: bool, block_m: int, block_n: int, block_k: int,
                    group_m: int, k_major: bool, num_warps: int, num_stages: int):
  (batch, m, k), n = x.shape, y.shape[2]
  y_block = (None, n, k) if k_major else (None, k, n)
  return pl.pallas_call(
      functools.partial(_batched_matmul_kernel, block_m=block_m, block_n=block_n,
                        block_k=block_k, group_m=group_m, k_major=k_major),
      grid=(batch, pl.cdiv(m, block_m) * pl.cdiv(n, block_n)),
      in_specs=[pl.BlockSpec((None, m, k), lambda b, t: (b, 0, 0)),
                pl.BlockSpec(y_block, lambda b, t: (b, 0, 0))],
      out_specs=pl.BlockSpec((None, m, n), lambda b, t: (b, 0, 0)),
      out_shape=jax.ShapeDtypeStruct((batch, m, n), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(x, jnp.swapaxes(y, 1, 2) if k_major else y)
