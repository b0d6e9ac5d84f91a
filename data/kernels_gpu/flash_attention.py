"""flash_attention: softmax(q k^T / sqrt(d)) v, no mask; q, k, v (S, d) float32 -> (S, d).

GPU fix: a real flash kernel. The grid runs over blocks of block_q queries; each program
loops over blocks of block_k keys with an online softmax: a running row max m, a running row
sum l and a float32 (block_q, d) accumulator, both rescaled by exp(m_old - m_new) whenever the
max grows, and divided by l once at the end. The (S, S) scores never exist; a program holds
one (block_q, block_k) score tile at a time. Exponentials are base 2, with log2(e) / sqrt(d)
folded into q. q, k, v and out are whole-array refs read with masked loads, so any S and any
d <= 256 work: the head dim is padded with zeros to a power of two >= 16 (the dot's minimum),
keys past S get a -inf score, and rows past S are not stored.

Split K/V: S / block_q programs leave most of a 132-SM GPU idle at S = 512, so with `splits`
> 1 a second grid axis divides the key blocks among programs. Each writes its normalised
partial output with its row max and sum; a combine weighs the partials by exp2(m_s - m) l_s
(a split past the last key has l = 0 and weight 0). The config comes from TUNED_CONFIGS for
the GPU and shape class being compiled for, else from a default by shape.
"""
import functools
import math
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "flash_attention"
FIX_APPLIED: Final = "flash_attention"
FIX_REASON: Final = ("the TPU kernel formed the whole (S, S) score matrix in one program, past "
                     "Triton's 2^20-element limit at large S; a K/V loop with an online softmax "
                     "keeps (64, 64) tiles and masks the edges for any S and d")
MAX_HEAD_DIM: Final = 256
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_q": (16, 32, 64, 128), "block_k": (32, 64, 128),
                       "splits": (1, 2, 4, 8), "num_warps": (4, 8), "num_stages": (1, 2, 3)}
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
REFERENCE_HEAD_DIM: Final = 128          # config_ok's head dim: the largest tuned size's
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "2048x128,2048x128,2048x128": dict(
            block_q=32, block_k=64, splits=8, num_warps=4, num_stages=2),
        "2048x128,2048x128,2048x128:bfloat16": dict(
            block_q=64, block_k=64, splits=4, num_warps=4, num_stages=3),
        "512x64,512x64,512x64": dict(
            block_q=32, block_k=64, splits=8, num_warps=4, num_stages=2),
        "512x64,512x64,512x64:bfloat16": dict(
            block_q=16, block_k=64, splits=4, num_warps=8, num_stages=3),
    },
}


def _flash_attention_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, *, d_pad: int,
                            block_q: int, block_k: int, blocks_per_split: int):
  seq_len, head_dim = q_ref.shape
  q0 = pl.program_id(0) * block_q
  rows = q0 + jnp.arange(block_q)
  col_ok = (jnp.arange(d_pad) < head_dim)[None, :]
  q_mask = (rows < seq_len)[:, None] & col_ok
  q = pltriton.load(q_ref.at[pl.ds(q0, block_q), pl.ds(0, d_pad)], mask=q_mask, other=0.0)
  q = q * (math.log2(math.e) / math.sqrt(head_dim))  # exp(s) == exp2(s * log2(e))
  first = pl.program_id(1) * blocks_per_split
  last = jnp.minimum(first + blocks_per_split, pl.cdiv(seq_len, block_k))

  def step(j, carry):
    acc, m, l = carry
    keys = j * block_k + jnp.arange(block_k)
    kv_mask = (keys < seq_len)[:, None] & col_ok
    k = pltriton.load(k_ref.at[pl.ds(j * block_k, block_k), pl.ds(0, d_pad)],
                      mask=kv_mask, other=0.0)
    v = pltriton.load(v_ref.at[pl.ds(j * block_k, block_k), pl.ds(0, d_pad)],
                      mask=kv_mask, other=0.0)
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    s = jnp.where((keys < seq_len)[None, :], s, -jnp.inf)
    # A split's first block always holds a real key, so m_new is finite from its first step
    # on and alpha = exp2(-inf) = 0 discards the empty initial state.
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    alpha = jnp.exp2(m - m_new)
    p = jnp.exp2(s - m_new[:, None])
    l = alpha * l + jnp.sum(p, axis=1)
    acc = alpha[:, None] * acc + jnp.dot(p.astype(v.dtype), v,
                                         preferred_element_type=jnp.float32)
    return acc, m_new, l

  init = (jnp.zeros((block_q, d_pad), jnp.float32),
          jnp.full((block_q,), -jnp.inf, jnp.float32), jnp.zeros((block_q,), jnp.float32))
  acc, m, l = jax.lax.fori_loop(first, last, step, init)
  # A split past the last key ran no step: it stores 0 with l = 0, which weighs nothing.
  pltriton.store(o_ref.at[pl.ds(q0, block_q), pl.ds(0, d_pad)],
                 acc / jnp.where(l > 0, l, 1.0)[:, None], mask=q_mask)
  pltriton.store(m_ref.at[pl.ds(q0, block_q)], m, mask=rows < seq_len)
  pltriton.store(l_ref.at[pl.ds(q0, block_q)], l, mask=rows < seq_len)


def config_ok(config) -> bool:
  """Whether a config can compile at the reference head dim: its pipelined K/V tiles fit in
  shared memory and its accumulator and score tile in at most 128 registers per thread."""
  d = REFERENCE_HEAD_DIM
  tiles = 2 * config["block_k"] * d * 4 * max(config["num_stages"], 1)
  live = config["block_q"] * (d + config["block_k"]) // (32 * config["num_warps"])
  return tiles + config["block_q"] * d * 4 <= SHARED_MEMORY_BYTES and live <= 128


def _default_config(seq_len: int, head_dim: int) -> dict:
  """64-query blocks; 64-key blocks (32 past d = 128, to fit shared memory); no split."""
  d_pad = max(16, pl.next_power_of_2(head_dim))
  return dict(block_q=64, block_k=64 if d_pad <= 128 else 32, splits=1,
              num_warps=4 if d_pad <= 64 else 8, num_stages=2)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '512x64,512x64,512x64',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(q, k, v) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(q, k, v))
  return dict(tuned) if tuned else _default_config(*q.shape)


def kernel(q, k, v, *, interpret: bool = False, config=None):
  """Attention of q over k, v; `config` (keys of CONFIG_SPACE) overrides the tuned or default."""
  if not q.shape == k.shape == v.shape or q.ndim != 2:
    raise ValueError(f"{q.shape=}, {k.shape=} and {v.shape=} must be one (S, d) shape")
  if q.shape[1] > MAX_HEAD_DIM:
    raise ValueError(f"head_dim={q.shape[1]} must be <= {MAX_HEAD_DIM=}")
  out = _flash_attention(q, k, v, interpret=interpret, **{**config_for(q, k, v), **(config or {})})
  return out.astype(q.dtype)


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _flash_attention(q, k, v, *, interpret: bool, block_q: int, block_k: int, splits: int,
                     num_warps: int, num_stages: int):
  seq_len, head_dim = q.shape
  d_pad = max(16, pl.next_power_of_2(head_dim))
  blocks_per_split = pl.cdiv(pl.cdiv(seq_len, block_k), splits)
  per_split = pl.BlockSpec((None, seq_len, head_dim), lambda i, s: (s, 0, 0))
  per_split_rows = pl.BlockSpec((None, seq_len), lambda i, s: (s, 0))
  whole = pl.BlockSpec((seq_len, head_dim), lambda i, s: (0, 0))
  out, m, l = pl.pallas_call(
      functools.partial(_flash_attention_kernel, d_pad=d_pad, block_q=block_q, block_k=block_k,
                        blocks_per_split=blocks_per_split),
      grid=(pl.cdiv(seq_len, block_q), splits),
      in_specs=[whole, whole, whole], out_specs=[per_split, per_split_rows, per_split_rows],
      out_shape=[jax.ShapeDtypeStruct((splits, seq_len, head_dim), jnp.float32),
                 jax.ShapeDtypeStruct((splits, seq_len), jnp.float32),
                 jax.ShapeDtypeStruct((splits, seq_len), jnp.float32)],
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(q, k, v)
  if splits == 1:
    return out[0]
  weight = jnp.exp2(m - jnp.max(m, axis=0)) * l      # (splits, S); split 0 always has keys
  # Elementwise and a sum (not a dot): the combine is bookkeeping, not a contraction.
  return jnp.sum(weight[:, :, None] * out, axis=0) / jnp.sum(weight, axis=0)[:, None]
