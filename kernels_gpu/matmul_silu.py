"""matmul_silu: out = silu(x @ w) = (x @ w) * sigmoid(x @ w); x (M, K), w (K, N) float32,
any M, K, N.

GPU fix: each program owns one (block_m, block_n) output tile and walks K in block_k-wide steps
with a float32 accumulator (a `fori_loop`, not a grid axis: grid programs run in parallel on
GPU). x, w and out are whole-array refs; every tile load and the store are masked, so M, K and N
need not be multiples of the blocks (out-of-range operands read as 0 and add nothing). SiLU is
applied to the f32 accumulator before the store (the epilogue). The f32 dot runs in TF32 on the
tensor cores, within the matmul tolerance.

Tuning: programs run in groups of `group_m` row tiles (neighbouring programs share the weight's
column tiles in L2), and with `k_major` the kernel reads the weight transposed, (N, K), which
TF32 `wgmma` takes straight from shared memory (XLA transposes it first). The config comes from
TUNED_CONFIGS for the GPU and shape class being compiled for, else from a default by shape.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "matmul_silu"
FIX_APPLIED: Final = "k_loop_accumulator"
FIX_REASON: Final = ("the TPU kernel's whole-K (512, K) and (K, 512) strips overflow Triton's "
                     "tensor limit and shared memory, and M, N must be tile multiples; 64/128 "
                     "tiles with a masked K loop and an f32 accumulator fit any shape")
MIN_PROGRAMS: Final = 128  # about one program per SM of an H200 (132 SMs)
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_m": (64, 128), "block_n": (64, 128, 256), "block_k": (32, 64),
                       "group_m": (1, 8), "k_major": (False, True), "num_warps": (4, 8),
                       "num_stages": (2, 3, 4)}
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024x1024,1024x1024": dict(
            block_m=64, block_n=128, block_k=32, group_m=8, k_major=True, num_warps=4,
            num_stages=3),
        "4096x4096,4096x4096": dict(
            block_m=128, block_n=256, block_k=32, group_m=1, k_major=True, num_warps=8,
            num_stages=4),
    },
}


def _matmul_silu_kernel(x_ref, w_ref, o_ref, *, block_m: int, block_n: int,
                        block_k: int, group_m: int, k_major: bool):
  m, k = x_ref.shape
  n = w_ref.shape[0] if k_major else w_ref.shape[1]
  tiles_m, tiles_n = pl.cdiv(m, block_m), pl.cdiv(n, block_n)
  pid = pl.program_id(0)
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
      w = pltriton.load(w_ref.at[pl.ds(j * block_n, block_n), pl.ds(s * block_k, block_k)],
                        mask=(cols[:, None] < n) & (ks[None, :] < k), other=0.0).T
    else:
      w = pltriton.load(w_ref.at[pl.ds(s * block_k, block_k), pl.ds(j * block_n, block_n)],
                        mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0)
    return acc + jnp.dot(x, w, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, pl.cdiv(k, block_k), step,
                          jnp.zeros((block_m, block_n), jnp.float32))
  out = jax.nn.silu(acc)
  pltriton.store(o_ref.at[pl.ds(i * block_m, block_m), pl.ds(j * block_n, block_n)], out,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))


def config_ok(config) -> bool:
  """Whether a config can compile: its pipelined tiles fit in shared memory and its
  accumulator in at most 128 registers per thread."""
  tiles = config["block_k"] * (config["block_m"] + config["block_n"]) * 4
  per_thread = config["block_m"] * config["block_n"] // (32 * config["num_warps"])
  return config["num_stages"] * tiles <= SHARED_MEMORY_BYTES and per_thread <= 128


def _default_config(m: int, n: int) -> dict:
  """128 x 128 tiles when they still fill the GPU, else 64 x 64."""
  big = pl.cdiv(m, 128) * pl.cdiv(n, 128) >= MIN_PROGRAMS
  return dict(block_m=128 if big else 64, block_n=128 if big else 64, block_k=32, group_m=1,
              k_major=False, num_warps=8 if big else 4, num_stages=3)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '1024x1024,1024x1024'."""
  return ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)


def config_for(x, w) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x, w))
  return dict(tuned) if tuned else _default_config(x.shape[0], w.shape[1])


def kernel(x, w, *, interpret: bool = False, config=None):
  """silu(x @ w); `config` (keys of CONFIG_SPACE) overrides the tuned or default one."""
  (m, k), (k_w, n) = x.shape, w.shape
  if k != k_w:
    raise ValueError(f"{x.shape=} and {w.shape=} must share the contracted dimension")
  return _matmul_silu(x, w, interpret=interpret, **{**config_for(x, w), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _matmul_silu(x, w, *, interpret: bool, block_m: int, block_n: int, block_k: int,
                 group_m: int, k_major: bool, num_warps: int, num_stages: int):
  m, n = x.shape[0], w.shape[1]
  return pl.pallas_call(
      functools.partial(_matmul_silu_kernel, block_m=block_m, block_n=block_n,
                        block_k=block_k, group_m=group_m, k_major=k_major),
      grid=(pl.cdiv(m, block_m) * pl.cdiv(n, block_n),),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(x, w.T if k_major else w)
