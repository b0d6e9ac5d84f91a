"""geglu: out = gelu_tanh(x @ w_gate) * (x @ w_up); x (M, K), w_gate and w_up (K, N) float32,
any M, K, N.

GPU fix: each program owns one (block_m, block_n) output tile and walks K in block_k-wide steps
with two float32 accumulators, one per projection, that share each loaded x tile (a `fori_loop`,
not a grid axis: grid programs run in parallel on GPU). All refs are whole arrays; every tile
load and the store are masked, so M, K and N need not be multiples of the blocks (out-of-range
operands read as 0 and add nothing). The gate, the tanh GELU of jax.nn.gelu's default, is
applied in the epilogue. The f32 dots run in TF32 on the tensor cores, within the matmul
tolerance.

Tuning: programs run in groups of `group_m` row tiles (neighbouring programs share the weights'
column tiles in L2), and with `k_major` the kernel reads both weights transposed, (N, K), which
TF32 `wgmma` takes straight from shared memory (XLA transposes them first). The config comes
from TUNED_CONFIGS for the GPU and shape class being compiled for, else from a default by shape.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "geglu"
FIX_APPLIED: Final = "k_loop_accumulator"
FIX_REASON: Final = ("the TPU kernel loads both whole (K, N) weights per program, past Triton's "
                     "tensor limit; (bm, bn) tiles with a masked K loop and two f32 accumulators "
                     "sharing the x tile fit and accept any shape")
MIN_PROGRAMS: Final = 128  # about one program per SM of an H200 (132 SMs)
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_m": (64, 128), "block_n": (32, 64, 128), "block_k": (32, 64),
                       "group_m": (1, 8), "k_major": (False, True), "num_warps": (4, 8),
                       "num_stages": (2, 3, 4)}
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "2048x4096,4096x8192,4096x8192": dict(
            block_m=128, block_n=128, block_k=32, group_m=1, k_major=True, num_warps=8,
            num_stages=4),
        "512x1024,1024x2048,1024x2048": dict(
            block_m=64, block_n=64, block_k=32, group_m=1, k_major=True, num_warps=4,
            num_stages=3),
    },
}


def _geglu_kernel(x_ref, wg_ref, wu_ref, o_ref, *, block_m: int, block_n: int, block_k: int,
               group_m: int, k_major: bool):
  m, k = x_ref.shape
  n = wg_ref.shape[0] if k_major else wg_ref.shape[1]
  tiles_m, tiles_n = pl.cdiv(m, block_m), pl.cdiv(n, block_n)
  pid = pl.program_id(0)
  first = (pid // (group_m * tiles_n)) * group_m
  height = jnp.minimum(tiles_m - first, group_m)
  i = first + (pid % (group_m * tiles_n)) % height
  j = (pid % (group_m * tiles_n)) // height
  rows = i * block_m + jnp.arange(block_m)
  cols = j * block_n + jnp.arange(block_n)

  def weight(ref, s, ks):
    if k_major:
      return pltriton.load(ref.at[pl.ds(j * block_n, block_n), pl.ds(s * block_k, block_k)],
                           mask=(cols[:, None] < n) & (ks[None, :] < k), other=0.0).T
    return pltriton.load(ref.at[pl.ds(s * block_k, block_k), pl.ds(j * block_n, block_n)],
                         mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0)

  def step(s, accs):
    ks = s * block_k + jnp.arange(block_k)
    x = pltriton.load(x_ref.at[pl.ds(i * block_m, block_m), pl.ds(s * block_k, block_k)],
                      mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
    return (accs[0] + jnp.dot(x, weight(wg_ref, s, ks), preferred_element_type=jnp.float32),
            accs[1] + jnp.dot(x, weight(wu_ref, s, ks), preferred_element_type=jnp.float32))

  zeros = jnp.zeros((block_m, block_n), jnp.float32)
  gate, up = jax.lax.fori_loop(0, pl.cdiv(k, block_k), step, (zeros, zeros))
  out = jax.nn.gelu(gate, approximate=True) * up
  pltriton.store(o_ref.at[pl.ds(i * block_m, block_m), pl.ds(j * block_n, block_n)], out,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))


def config_ok(config) -> bool:
  """Whether a config can compile: its pipelined tiles (x and both weights) fit in shared
  memory and its two accumulators in at most 128 registers per thread."""
  tiles = config["block_k"] * (config["block_m"] + 2 * config["block_n"]) * 4
  per_thread = 2 * config["block_m"] * config["block_n"] // (32 * config["num_warps"])
  return config["num_stages"] * tiles <= SHARED_MEMORY_BYTES and per_thread <= 128


def _default_config(m: int, n: int) -> dict:
  """128 x 64 tiles (two accumulators) when they still fill the GPU, else 64 x 64."""
  big = pl.cdiv(m, 128) * pl.cdiv(n, 64) >= MIN_PROGRAMS
  return dict(block_m=128 if big else 64, block_n=64, block_k=32, group_m=1, k_major=False,
              num_warps=8 if big else 4, num_stages=3)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '1024x1024,1024x1024'."""
  return ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)


def config_for(x, w_gate, w_up) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x, w_gate, w_up))
  return dict(tuned) if tuned else _default_config(x.shape[0], w_gate.shape[1])


def kernel(x, w_gate, w_up, *, interpret: bool = False, config=None):
  """The gated projection; `config` (keys of CONFIG_SPACE) overrides the tuned or default one."""
  (m, k), (k_w, n) = x.shape, w_gate.shape
  if k != k_w or w_up.shape != w_gate.shape:
    raise ValueError(f"{x.shape=}, {w_gate.shape=}, {w_up.shape=} must be (M, K), (K, N), (K, N)")
  return _geglu(x, w_gate, w_up, interpret=interpret,
               **{**config_for(x, w_gate, w_up), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _geglu(x, w_gate, w_up, *, interpret: bool, block_m: int, block_n: int, block_k: int,
           group_m: int, k_major: bool, num_warps: int, num_stages: int):
  m, n = x.shape[0], w_gate.shape[1]
  weights = (w_gate.T, w_up.T) if k_major else (w_gate, w_up)
  return pl.pallas_call(
      functools.partial(_geglu_kernel, block_m=block_m, block_n=block_n, block_k=block_k,
                        group_m=group_m, k_major=k_major),
      grid=(pl.cdiv(m, block_m) * pl.cdiv(n, block_n),),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(x, *weights)
