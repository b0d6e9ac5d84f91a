"""transformer_block: pre-norm block, multi-head attention (no mask), SwiGLU feed-forward.

n = rmsnorm(x); per head h: a_h = softmax((n wq_h)(n wk_h)^T / sqrt(dh)) (n wv_h);
h = x + sum_h a_h wo_h; out = h + (silu(m w_gate) * (m w_up)) w_down with m = rmsnorm(h).
x (S, D); wq, wk, wv (D, H, dh); wo (H, dh, D); w_gate, w_up (D, F); w_down (F, D);
rmsnorm eps 1e-5, no gain. The head count is read from the weights.

GPU fix: the block is split into five Triton calls of three kinds. The weights are viewed
as matrices (wq, wk, wv as (D, H*dh), wo as (H*dh, D)), a free reshape.
- Projections (qkv, swiglu): (block_m, block_n) output tiles with a K loop in block_k
  steps and float32 accumulators. RMSNorm is fused as a row scale:
  rmsnorm(x) @ w == rsqrt(mean(x^2) + eps) * (x @ w), with sum(x^2) gathered from the x
  tiles the K loop loads anyway.
  - qkv: three accumulators share each x tile.
  - swiglu: two accumulators, silu(gate) * up in the epilogue.
- Residual matmuls (out_proj: h = x + a @ wo; down_proj: out = h + g @ w_down): the same
  tiling, the residual added in the epilogue.
- Attention: a flash kernel on a grid of (heads, query blocks) with an online softmax over
  key blocks. Head h is read from, and written to, columns [h*dh, (h+1)*dh) of (S, H*dh)
  arrays, so no transpose is needed.
Every load and store is masked, so any S, D, H, F and dh <= 256 work (dh is padded to a
power of two >= 16).

Tuning: the projection tiles, the attention's query and key blocks, and each kind's warps and
stages come from TUNED_CONFIGS for the GPU and shape class being compiled for, else from a
default (64 x 64 tiles, 32-wide K steps, 64-query and 64-key blocks, 32 keys past dh = 128).
"""
import functools
import math
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "transformer_block"
FIX_APPLIED: Final = "decomposed_kernels"
FIX_REASON: Final = ("the TPU kernel ran the whole block as one program holding every weight, "
                     "far past Triton's tensor limit; tiled projection kernels with K loops, "
                     "fused RMSNorm and residuals and a flash kernel per head fit any shape")
EPS: Final = 1e-5
MAX_HEAD_DIM: Final = 256
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_m": (32, 64, 128), "block_n": (32, 64, 128), "block_k": (32, 64),
                       "block_q": (16, 32, 64), "block_kv": (32, 64), "matmul_warps": (4, 8),
                       "matmul_stages": (2, 3, 4), "attention_warps": (4, 8)}
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "128x256,256x4x64,256x4x64,256x4x64,4x64x256,256x512,256x512,512x256": dict(
            block_m=32, block_n=32, block_k=32, block_q=32, block_kv=64, matmul_warps=4,
            matmul_stages=3, attention_warps=8),
        "512x1024,1024x8x128,1024x8x128,1024x8x128,8x128x1024,1024x2048,1024x2048,2048x1024": dict(
            block_m=32, block_n=128, block_k=32, block_q=64, block_kv=64, matmul_warps=4,
            matmul_stages=3, attention_warps=8),
    },
}


def _rmsnorm_matmul_kernel(x_ref, *refs, num_weights: int, swiglu: bool, bm: int, bn: int,
                           bk: int):
  """o_i = rmsnorm(x) @ w_i for every weight, or o = silu(rmsnorm(x) @ w_0) * (rmsnorm(x) @ w_1)."""
  w_refs, o_refs = refs[:num_weights], refs[num_weights:]
  (m, k), n = x_ref.shape, w_refs[0].shape[1]
  i0, j0 = pl.program_id(0) * bm, pl.program_id(1) * bn
  row_ok = (i0 + jnp.arange(bm) < m)[:, None]
  col_ok = (j0 + jnp.arange(bn) < n)[None, :]

  def step(kb, carry):
    sum_sq, accs = carry
    k_ok = kb * bk + jnp.arange(bk) < k
    x = pltriton.load(x_ref.at[pl.ds(i0, bm), pl.ds(kb * bk, bk)],
                      mask=row_ok & k_ok[None, :], other=0.0)
    accs = tuple(
        acc + jnp.dot(x, pltriton.load(w_ref.at[pl.ds(kb * bk, bk), pl.ds(j0, bn)],
                                       mask=k_ok[:, None] & col_ok, other=0.0),
                      preferred_element_type=jnp.float32)
        for acc, w_ref in zip(accs, w_refs))
    return sum_sq + jnp.sum(x * x, axis=1), accs

  init = (jnp.zeros((bm,), jnp.float32),
          tuple(jnp.zeros((bm, bn), jnp.float32) for _ in w_refs))
  sum_sq, accs = jax.lax.fori_loop(0, pl.cdiv(k, bk), step, init)
  scale = jax.lax.rsqrt(sum_sq / k + EPS)[:, None]
  outs = [acc * scale for acc in accs]
  if swiglu:
    outs = [jax.nn.silu(outs[0]) * outs[1]]
  for o_ref, out in zip(o_refs, outs):
    pltriton.store(o_ref.at[pl.ds(i0, bm), pl.ds(j0, bn)], out, mask=row_ok & col_ok)


def _residual_matmul_kernel(a_ref, w_ref, r_ref, o_ref, *, bm: int, bn: int, bk: int):
  """o = r + a @ w."""
  (m, k), n = a_ref.shape, w_ref.shape[1]
  i0, j0 = pl.program_id(0) * bm, pl.program_id(1) * bn
  row_ok = (i0 + jnp.arange(bm) < m)[:, None]
  col_ok = (j0 + jnp.arange(bn) < n)[None, :]

  def step(kb, acc):
    k_ok = kb * bk + jnp.arange(bk) < k
    a = pltriton.load(a_ref.at[pl.ds(i0, bm), pl.ds(kb * bk, bk)],
                      mask=row_ok & k_ok[None, :], other=0.0)
    w = pltriton.load(w_ref.at[pl.ds(kb * bk, bk), pl.ds(j0, bn)],
                      mask=k_ok[:, None] & col_ok, other=0.0)
    return acc + jnp.dot(a, w, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, pl.cdiv(k, bk), step, jnp.zeros((bm, bn), jnp.float32))
  tile = (pl.ds(i0, bm), pl.ds(j0, bn))
  residual = pltriton.load(r_ref.at[tile], mask=row_ok & col_ok, other=0.0)
  pltriton.store(o_ref.at[tile], acc + residual, mask=row_ok & col_ok)


def _attention_kernel(q_ref, k_ref, v_ref, o_ref, *, head_dim: int, d_pad: int, block_q: int,
                      block_kv: int):
  """Flash attention of head program_id(0) over (S, H*dh) arrays, online softmax over key blocks."""
  seq_len = q_ref.shape[0]
  c0, q0 = pl.program_id(0) * head_dim, pl.program_id(1) * block_q
  col_ok = (jnp.arange(d_pad) < head_dim)[None, :]  # the padding reads the next head: masked
  q_mask = ((q0 + jnp.arange(block_q)) < seq_len)[:, None] & col_ok
  q = pltriton.load(q_ref.at[pl.ds(q0, block_q), pl.ds(c0, d_pad)], mask=q_mask, other=0.0)
  q = q * (math.log2(math.e) / math.sqrt(head_dim))  # exp(s) == exp2(s * log2(e))

  def step(j, carry):
    acc, m, l = carry
    keys = j * block_kv + jnp.arange(block_kv)
    kv_mask = (keys < seq_len)[:, None] & col_ok
    kv_tile = (pl.ds(j * block_kv, block_kv), pl.ds(c0, d_pad))
    k = pltriton.load(k_ref.at[kv_tile], mask=kv_mask, other=0.0)
    v = pltriton.load(v_ref.at[kv_tile], mask=kv_mask, other=0.0)
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    s = jnp.where((keys < seq_len)[None, :], s, -jnp.inf)
    # Block 0 always holds key 0, so m_new is finite from the first step on and
    # alpha = exp2(-inf) = 0 discards the empty initial state.
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    alpha = jnp.exp2(m - m_new)
    p = jnp.exp2(s - m_new[:, None])
    l = alpha * l + jnp.sum(p, axis=1)
    acc = alpha[:, None] * acc + jnp.dot(p, v, preferred_element_type=jnp.float32)
    return acc, m_new, l

  init = (jnp.zeros((block_q, d_pad), jnp.float32),
          jnp.full((block_q,), -jnp.inf, jnp.float32), jnp.zeros((block_q,), jnp.float32))
  acc, _, l = jax.lax.fori_loop(0, pl.cdiv(seq_len, block_kv), step, init)
  pltriton.store(o_ref.at[pl.ds(q0, block_q), pl.ds(c0, d_pad)], acc / l[:, None], mask=q_mask)


def config_ok(config) -> bool:
  """Whether the projections (up to three accumulators) and the attention (dh up to 128)
  can compile: pipelined tiles in shared memory, accumulators in 128 registers per thread."""
  bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
  matmul = (config["matmul_stages"] * bk * (bm + 3 * bn) * 4 <= SHARED_MEMORY_BYTES
            and 3 * bm * bn // (32 * config["matmul_warps"]) <= 128)
  attention = (config["block_q"] * (128 + config["block_kv"]) // (32 * config["attention_warps"])
               <= 128)
  return matmul and attention


def _default_config(head_dim: int) -> dict:
  d_pad = max(16, pl.next_power_of_2(head_dim))
  return dict(block_m=64, block_n=64, block_k=32, block_q=64,
              block_kv=64 if d_pad <= 128 else 32, matmul_warps=4, matmul_stages=3,
              attention_warps=4 if d_pad <= 64 else 8)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '512x1024,1024x8x128,...'."""
  return ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)


def config_for(x, wq, wk, wv, wo, w_gate, w_up, w_down) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  shape = shape_class(x, wq, wk, wv, wo, w_gate, w_up, w_down)
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape)
  return dict(tuned) if tuned else _default_config(wq.shape[-1])


def kernel(x, wq, wk, wv, wo, w_gate, w_up, w_down, *, interpret: bool = False, config=None):
  """The transformer block; `config` (keys of CONFIG_SPACE) overrides the tuned or default one."""
  weights = (wq, wk, wv, wo, w_gate, w_up, w_down)
  return _transformer_block(x, *weights, interpret=interpret,
                            **{**config_for(x, *weights), **(config or {})})


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _transformer_block(x, wq, wk, wv, wo, w_gate, w_up, w_down, *, interpret: bool,
                       block_m: int, block_n: int, block_k: int, block_q: int, block_kv: int,
                       matmul_warps: int, matmul_stages: int, attention_warps: int):
  (s, d), (_, heads, head_dim), f = x.shape, wq.shape, w_gate.shape[1]
  hd = heads * head_dim
  if not (wq.shape == wk.shape == wv.shape == (d, heads, head_dim)
          and wo.shape == (heads, head_dim, d) and w_gate.shape == w_up.shape == (d, f)
          and w_down.shape == (f, d)):
    raise ValueError(f"{x.shape=}, {wq.shape=}, {wo.shape=}, {w_gate.shape=} and "
                     f"{w_down.shape=} must be (S, D), (D, H, dh), (H, dh, D), (D, F), (F, D)")
  if head_dim > MAX_HEAD_DIM:
    raise ValueError(f"{head_dim=} must be <= {MAX_HEAD_DIM=}")
  d_pad = max(16, pl.next_power_of_2(head_dim))
  call = functools.partial(pl.pallas_call, interpret=interpret)
  tiles = lambda n: (pl.cdiv(s, block_m), pl.cdiv(n, block_n))
  blocks = dict(bm=block_m, bn=block_n, bk=block_k)
  matmul_params = pltriton.CompilerParams(num_warps=matmul_warps, num_stages=matmul_stages)
  act = lambda n: jax.ShapeDtypeStruct((s, n), jnp.float32)

  q, k, v = call(
      functools.partial(_rmsnorm_matmul_kernel, num_weights=3, swiglu=False, **blocks),
      grid=tiles(hd), out_shape=(act(hd),) * 3, compiler_params=matmul_params,
      name=TASK_NAME + "_qkv",
  )(x, wq.reshape(d, hd), wk.reshape(d, hd), wv.reshape(d, hd))
  attn = call(
      functools.partial(_attention_kernel, head_dim=head_dim, d_pad=d_pad, block_q=block_q,
                        block_kv=block_kv),
      grid=(heads, pl.cdiv(s, block_q)), out_shape=act(hd),
      compiler_params=pltriton.CompilerParams(num_warps=attention_warps, num_stages=2),
      name=TASK_NAME + "_attention")(q, k, v)
  residual_matmul = functools.partial(_residual_matmul_kernel, **blocks)
  h = call(residual_matmul, grid=tiles(d), out_shape=act(d), compiler_params=matmul_params,
           name=TASK_NAME + "_out_proj")(attn, wo.reshape(hd, d), x)
  g = call(functools.partial(_rmsnorm_matmul_kernel, num_weights=2, swiglu=True, **blocks),
           grid=tiles(f), out_shape=act(f), compiler_params=matmul_params,
           name=TASK_NAME + "_swiglu")(h, w_gate, w_up)
  return call(residual_matmul, grid=tiles(d), out_shape=act(d), compiler_params=matmul_params,
              name=TASK_NAME + "_down_proj")(g, w_down, h)
