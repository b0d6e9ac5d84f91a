"""gated_mlp: out = (silu(x @ w_gate) * (x @ w_up)) @ w_down; x (M, D), w_gate and w_up (D, F),
w_down (F, D) float32, any M, D, F.

GPU fix: two tiled pallas_calls. The first computes the hidden activations h (M, F): each
program owns a (bm, bn) tile of h and walks D in block_k-wide steps with two float32
accumulators (gate and up) that share each loaded x tile, then applies the SiLU gate. The
second is the down-projection h @ w_down, a K loop over F per (bm, bn) output tile. h makes
one round trip through memory; fusing the down-projection would recompute h once per output
column tile. All refs are whole arrays and every load and store is masked, so no dimension
needs to be a block multiple. The f32 dots run in TF32, within the matmul tolerance.

Tuning: each call's tile (`glu_m` x `glu_n`, `down_m` x `down_n`), the K step, warps and
stages, and `k_major` (the weights read transposed, (N, K), which TF32 `wgmma` takes straight
from shared memory; XLA transposes them first) come from TUNED_CONFIGS for the GPU and shape
class being compiled for, else from a default by shape.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "gated_mlp"
FIX_APPLIED: Final = "decomposed_kernels"
FIX_REASON: Final = ("the TPU kernel holds all three whole weights per program, past Triton's "
                     "tensor limit and shared memory; a tiled GLU kernel and a tiled "
                     "down-projection, each a masked K loop with f32 accumulators, fit any shape")
MIN_PROGRAMS: Final = 128  # about one program per SM of an H200 (132 SMs)
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"glu_m": (64, 128), "glu_n": (32, 64, 128), "down_m": (64, 128),
                       "down_n": (64, 128, 256), "block_k": (32, 64), "k_major": (False, True),
                       "num_warps": (4, 8), "num_stages": (2, 3, 4)}
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024x2048,2048x4096,2048x4096,4096x2048": dict(
            glu_m=64, glu_n=128, down_m=128, down_n=64, block_k=32, k_major=True, num_warps=4,
            num_stages=2),
        "256x512,512x1024,512x1024,1024x512": dict(
            glu_m=128, glu_n=32, down_m=64, down_n=64, block_k=64, k_major=True, num_warps=4,
            num_stages=3),
    },
}


def _weight(ref, s, j, ks, cols, k, n, *, block_k, bn, k_major):
  """Weight tile (block_k, bn) of step s and column tile j, from a (K, N) or (N, K) ref."""
  if k_major:
    return pltriton.load(ref.at[pl.ds(j * bn, bn), pl.ds(s * block_k, block_k)],
                         mask=(cols[:, None] < n) & (ks[None, :] < k), other=0.0).T
  return pltriton.load(ref.at[pl.ds(s * block_k, block_k), pl.ds(j * bn, bn)],
                       mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0)


def _glu_kernel(x_ref, wg_ref, wu_ref, h_ref, *, bm: int, bn: int, block_k: int, k_major: bool):
  m, k = x_ref.shape
  n = wg_ref.shape[0] if k_major else wg_ref.shape[1]
  i, j = pl.program_id(0), pl.program_id(1)
  rows = i * bm + jnp.arange(bm)
  cols = j * bn + jnp.arange(bn)
  weight = functools.partial(_weight, j=j, cols=cols, k=k, n=n, block_k=block_k, bn=bn,
                             k_major=k_major)

  def step(s, accs):
    ks = s * block_k + jnp.arange(block_k)
    x = pltriton.load(x_ref.at[pl.ds(i * bm, bm), pl.ds(s * block_k, block_k)],
                      mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
    return (accs[0] + jnp.dot(x, weight(wg_ref, s, ks=ks), preferred_element_type=jnp.float32),
            accs[1] + jnp.dot(x, weight(wu_ref, s, ks=ks), preferred_element_type=jnp.float32))

  zeros = jnp.zeros((bm, bn), jnp.float32)
  gate, up = jax.lax.fori_loop(0, pl.cdiv(k, block_k), step, (zeros, zeros))
  pltriton.store(h_ref.at[pl.ds(i * bm, bm), pl.ds(j * bn, bn)], jax.nn.silu(gate) * up,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))


def _down_kernel(h_ref, wd_ref, o_ref, *, bm: int, bn: int, block_k: int, k_major: bool):
  m, k = h_ref.shape
  n = wd_ref.shape[0] if k_major else wd_ref.shape[1]
  i, j = pl.program_id(0), pl.program_id(1)
  rows = i * bm + jnp.arange(bm)
  cols = j * bn + jnp.arange(bn)

  def step(s, acc):
    ks = s * block_k + jnp.arange(block_k)
    h = pltriton.load(h_ref.at[pl.ds(i * bm, bm), pl.ds(s * block_k, block_k)],
                      mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
    wd = _weight(wd_ref, s, j, ks, cols, k, n, block_k=block_k, bn=bn, k_major=k_major)
    return acc + jnp.dot(h, wd, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, pl.cdiv(k, block_k), step, jnp.zeros((bm, bn), jnp.float32))
  pltriton.store(o_ref.at[pl.ds(i * bm, bm), pl.ds(j * bn, bn)], acc,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))


def config_ok(config) -> bool:
  """Whether both calls can compile: pipelined tiles in shared memory, accumulators in at
  most 128 registers per thread (the GLU call holds two)."""
  glu, down = (config["glu_m"], config["glu_n"]), (config["down_m"], config["down_n"])
  threads = 32 * config["num_warps"]
  return all(config["num_stages"] * config["block_k"] * (bm + width * bn) * 4
             <= SHARED_MEMORY_BYTES and width * bm * bn // threads <= 128
             for (bm, bn), width in ((glu, 2), (down, 1)))


def _default_config(m: int, d: int, f: int) -> dict:
  """128 x 64 GLU tiles (two accumulators) and 128 x 128 down tiles when they fill the GPU."""
  big_glu = pl.cdiv(m, 128) * pl.cdiv(f, 64) >= MIN_PROGRAMS
  big_down = pl.cdiv(m, 128) * pl.cdiv(d, 128) >= MIN_PROGRAMS
  return dict(glu_m=128 if big_glu else 64, glu_n=64, down_m=128 if big_down else 64,
              down_n=128 if big_down else 64, block_k=32, k_major=False,
              num_warps=8 if big_glu else 4, num_stages=3)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '1024x1024,1024x4096,...'."""
  return ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)


def config_for(x, w_gate, w_up, w_down) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x, w_gate, w_up, w_down))
  return dict(tuned) if tuned else _default_config(x.shape[0], x.shape[1], w_gate.shape[1])


def kernel(x, w_gate, w_up, w_down, *, interpret: bool = False, config=None):
  """The gated MLP; `config` (keys of CONFIG_SPACE) overrides the tuned or default one."""
  (m, d), (d_w, f) = x.shape, w_gate.shape
  if d != d_w or w_up.shape != w_gate.shape or w_down.shape != (f, d):
    raise ValueError(f"{x.shape=}, {w_gate.shape=}, {w_up.shape=}, {w_down.shape=} must be "
                     "(M, D), (D, F), (D, F), (F, D)")
  return _gated_mlp(x, w_gate, w_up, w_down, interpret=interpret,
                    **{**config_for(x, w_gate, w_up, w_down), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _gated_mlp(x, w_gate, w_up, w_down, *, interpret: bool, glu_m: int, glu_n: int, down_m: int,
               down_n: int, block_k: int, k_major: bool, num_warps: int, num_stages: int):
  (m, d), f = x.shape, w_gate.shape[1]
  params = pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages)
  if k_major:
    w_gate, w_up, w_down = w_gate.T, w_up.T, w_down.T
  hidden = pl.pallas_call(
      functools.partial(_glu_kernel, bm=glu_m, bn=glu_n, block_k=block_k, k_major=k_major),
      grid=(pl.cdiv(m, glu_m), pl.cdiv(f, glu_n)),
      out_shape=jax.ShapeDtypeStruct((m, f), jnp.float32), compiler_params=params,
      interpret=interpret, name=TASK_NAME + "_glu")(x, w_gate, w_up)
  return pl.pallas_call(
      functools.partial(_down_kernel, bm=down_m, bn=down_n, block_k=block_k, k_major=k_major),
      grid=(pl.cdiv(m, down_m), pl.cdiv(d, down_n)),
      out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32), compiler_params=params,
      interpret=interpret, name=TASK_NAME + "_down")(hidden, w_down)
