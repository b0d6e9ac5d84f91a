"""transformer_block: pre-norm block, multi-head attention (no mask), SwiGLU feed-forward.

n = rmsnorm(x); per head h: a_h = softmax((n wq_h)(n wk_h)^T / sqrt(dh)) (n wv_h);
h = x + sum_h a_h wo_h; out = h + (silu(m w_gate) * (m w_up)) w_down with m = rmsnorm(h).
x (S, D); wq, wk, wv (D, H, dh); wo (H, dh, D); w_gate, w_up (D, F); w_down (F, D);
rmsnorm eps 1e-5, no gain. The head count is read from the weights. float32 or bfloat16
inputs; the output, and on the Mosaic GPU path every activation between the kernels, in x's
dtype.

GPU fix: the block is split into kernels of three kinds, on one of two backends chosen per
GPU and shape class by the config. The weights are viewed as matrices (wq, wk, wv as
(D, H*dh), wo as (H*dh, D)), a free reshape.
- Attention (Triton on both backends): a flash kernel on a grid of (heads, query blocks) with
  an online softmax over key blocks. Head h is read from, and written to, columns
  [h*dh, (h+1)*dh) of (S, H*dh) arrays (at a column offset when q, k and v share one array),
  so no transpose is needed.
- `triton` (any GPU), five calls: projections with (block_m, block_n) output tiles and a K
  loop in block_k steps with float32 accumulators, RMSNorm fused as a row scale
  (rmsnorm(x) @ w == rsqrt(mean(x^2) + eps) * (x @ w), with sum(x^2) gathered from the x tiles
  the K loop loads anyway); qkv holds three accumulators sharing each x tile, swiglu two with
  silu(gate) * up in the epilogue; the residual matmuls (out_proj: h = x + a @ wo; down_proj:
  out = h + g @ w_down) add the residual in the epilogue. Every load and store is masked.
- `mosaic_gpu` (Hopper and later), seven calls: a Triton RMSNorm kernel writes rmsnorm(x) (and
  later rmsnorm(h)), rounded to TF32 at float32, and the projections are persistent Mosaic GPU
  kernels, one program per SM: a memory warpgroup streams the operand tiles with TMA into
  swizzled shared memory, `stages` K steps ahead (a K step is one 128-byte swizzled row: 32
  f32, 64 bf16 elements), while two compute warpgroups run `wgmma` (TF32 at float32, bf16 at
  bfloat16) into f32 accumulators. qkv is one projection on wq, wk and wv side by side; swiglu
  holds two accumulators; out_proj and down_proj load their residual tile with TMA while the K
  loop runs and add it in the epilogue. TF32 `wgmma` reads both operands K-major and truncates
  them, so at float32 the weights are transposed to (N, K) and rounded to TF32 to nearest on
  the way; 16-bit `wgmma` reads the weights' (K, N) tiles as they are. Every dimension is
  zero-padded to the tiles when it is not a multiple.
Any S, D, H, F and dh <= 256 work (the attention pads dh to a power of two >= 16).

Tuning: the backend, the projection tiles, the attention's query and key blocks, and each
kind's warps and stages come from TUNED_CONFIGS for the GPU and shape class being compiled
for, else from a Triton default (64 x 64 tiles, 32-wide K steps, 64-query and 64-key blocks,
32 keys past dh = 128).
"""
import functools
import math
from typing import Final

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "transformer_block"
FIX_APPLIED: Final = "decomposed_kernels"
FIX_REASON: Final = ("the TPU kernel ran the whole block as one program holding every weight, "
                     "far past Triton's tensor limit; tiled projection kernels with K loops, "
                     "fused RMSNorm and residuals and a flash kernel per head fit any shape")
EPS: Final = 1e-5
MAX_HEAD_DIM: Final = 256
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try: one space per backend.
CONFIG_SPACE: Final = (
    {"backend": ("triton",), "block_m": (16, 32, 64, 128), "block_n": (16, 32, 64, 128),
     "block_k": (32, 64, 128), "block_q": (16, 32, 64), "block_kv": (32, 64),
     "matmul_warps": (2, 4, 8), "matmul_stages": (2, 3, 4), "attention_warps": (4, 8)},
    {"backend": ("mosaic_gpu",), "tile_m": (64, 128), "tile_n": (64, 128), "glu_n": (64, 128),
     "stages": (2, 3, 4), "split_n": (False, True), "delay": (0, 1), "block_q": (32, 64),
     "block_kv": (32, 64), "attention_warps": (4, 8)},
)
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
ROW_BYTES: Final = 128    # Mosaic GPU: one swizzled shared-memory row, the K step (32 f32, 64 bf16)
EPILOGUE_ROWS: Final = 64  # Mosaic GPU output store: pieces of 64 rows x one swizzled row
NORM_ROWS: Final = 16     # rows per program of the RMSNorm kernel
NORM_COLS: Final = 256    # its column step
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "128x256,256x4x64,256x4x64,256x4x64,4x64x256,256x512,256x512,512x256": dict(
            backend='triton', block_m=16, block_n=32, block_k=128, block_q=16, block_kv=64,
            matmul_warps=4, matmul_stages=3, attention_warps=8),
        "128x256,256x4x64,256x4x64,256x4x64,4x64x256,256x512,256x512,512x256:bfloat16": dict(
            backend='mosaic_gpu', tile_m=64, tile_n=64, glu_n=64, stages=4, split_n=False,
            delay=1, block_q=64, block_kv=32, attention_warps=4),
        "512x1024,1024x8x128,1024x8x128,1024x8x128,8x128x1024,1024x2048,1024x2048,2048x1024": dict(
            backend='mosaic_gpu', tile_m=64, tile_n=64, glu_n=64, stages=4, split_n=False,
            delay=0, block_q=32, block_kv=64, attention_warps=4),
        "512x1024,1024x8x128,1024x8x128,1024x8x128,8x128x1024,1024x2048,1024x2048,2048x1024:bfloat16": dict(
            backend='mosaic_gpu', tile_m=64, tile_n=64, glu_n=64, stages=4, split_n=True,
            delay=0, block_q=64, block_kv=64, attention_warps=4),
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
        acc + jnp.dot(x.astype(w_ref.dtype),
                      pltriton.load(w_ref.at[pl.ds(kb * bk, bk), pl.ds(j0, bn)],
                                    mask=k_ok[:, None] & col_ok, other=0.0),
                      preferred_element_type=jnp.float32)
        for acc, w_ref in zip(accs, w_refs))
    x = x.astype(jnp.float32)
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
    return acc + jnp.dot(a.astype(w.dtype), w, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, pl.cdiv(k, bk), step, jnp.zeros((bm, bn), jnp.float32))
  tile = (pl.ds(i0, bm), pl.ds(j0, bn))
  residual = pltriton.load(r_ref.at[tile], mask=row_ok & col_ok, other=0.0)
  pltriton.store(o_ref.at[tile], acc + residual, mask=row_ok & col_ok)


def _attention_kernel(q_ref, k_ref, v_ref, o_ref, *, head_dim: int, d_pad: int, block_q: int,
                      block_kv: int, offsets: tuple[int, int, int]):
  """Flash attention of head program_id(0), online softmax over key blocks. q, k and v are read
  from columns offsets[i] + [h*dh, (h+1)*dh) of their arrays (which may hold padding rows past
  S), and written to columns [h*dh, (h+1)*dh) of the (S, H*dh) output."""
  seq_len = o_ref.shape[0]
  c0, q0 = pl.program_id(0) * head_dim, pl.program_id(1) * block_q
  col_ok = (jnp.arange(d_pad) < head_dim)[None, :]  # the padding reads the next head: masked
  q_mask = ((q0 + jnp.arange(block_q)) < seq_len)[:, None] & col_ok
  q = pltriton.load(q_ref.at[pl.ds(q0, block_q), pl.ds(offsets[0] + c0, d_pad)], mask=q_mask,
                    other=0.0)
  q = q * (math.log2(math.e) / math.sqrt(head_dim))  # exp(s) == exp2(s * log2(e))

  def step(j, carry):
    acc, m, l = carry
    keys = j * block_kv + jnp.arange(block_kv)
    kv_mask = (keys < seq_len)[:, None] & col_ok
    kv_rows = pl.ds(j * block_kv, block_kv)
    k = pltriton.load(k_ref.at[kv_rows, pl.ds(offsets[1] + c0, d_pad)], mask=kv_mask, other=0.0)
    v = pltriton.load(v_ref.at[kv_rows, pl.ds(offsets[2] + c0, d_pad)], mask=kv_mask, other=0.0)
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    s = jnp.where((keys < seq_len)[None, :], s, -jnp.inf)
    # Block 0 always holds key 0, so m_new is finite from the first step on and
    # alpha = exp2(-inf) = 0 discards the empty initial state.
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    alpha = jnp.exp2(m - m_new)
    p = jnp.exp2(s - m_new[:, None])
    l = alpha * l + jnp.sum(p, axis=1)
    acc = alpha[:, None] * acc + jnp.dot(p.astype(v.dtype), v,
                                         preferred_element_type=jnp.float32)
    return acc, m_new, l

  init = (jnp.zeros((block_q, d_pad), jnp.float32),
          jnp.full((block_q,), -jnp.inf, jnp.float32), jnp.zeros((block_q,), jnp.float32))
  acc, _, l = jax.lax.fori_loop(0, pl.cdiv(seq_len, block_kv), step, init)
  pltriton.store(o_ref.at[pl.ds(q0, block_q), pl.ds(c0, d_pad)],
                 (acc / l[:, None]).astype(o_ref.dtype), mask=q_mask)


def _rmsnorm_kernel(x_ref, o_ref, *, d: int):
  """o = rmsnorm(x) over x's first d columns, computed in f32 and rounded to TF32 to nearest
  (an f32 o) or to o's dtype, for program_id(0)'s NORM_ROWS rows; o may be larger than x
  (padding), and gets zeros there."""
  r0 = pl.program_id(0) * NORM_ROWS
  rows = r0 + jnp.arange(NORM_ROWS)

  def tile(c):
    cols = c * NORM_COLS + jnp.arange(NORM_COLS)
    x = pltriton.load(x_ref.at[pl.ds(r0, NORM_ROWS), pl.ds(c * NORM_COLS, NORM_COLS)],
                      mask=(rows[:, None] < x_ref.shape[0]) & (cols[None, :] < d), other=0.0)
    return cols, x.astype(jnp.float32)

  def sum_squares(c, acc):
    _, x = tile(c)
    return acc + jnp.sum(x * x, axis=1)

  total = jax.lax.fori_loop(0, pl.cdiv(d, NORM_COLS), sum_squares,
                            jnp.zeros((NORM_ROWS,), jnp.float32))
  scale = jax.lax.rsqrt(total / d + EPS)[:, None]

  @pl.loop(0, pl.cdiv(o_ref.shape[1], NORM_COLS))
  def _(c):
    cols, x = tile(c)
    out, tf32 = x * scale, o_ref.dtype == jnp.float32
    if tf32:
      # _tf32 by hand (Triton does not lower reduce_precision): add half a TF32 ulp (less one,
      # plus the kept lowest bit) to the magnitude's bits, then drop the 13 bits wgmma drops.
      bits = lax.bitcast_convert_type(out, jnp.int32)
      bits = (bits + (0xFFF + ((bits >> 13) & 1))) & ~0x1FFF
    pltriton.store(o_ref.at[pl.ds(r0, NORM_ROWS), pl.ds(c * NORM_COLS, NORM_COLS)],
                   lax.bitcast_convert_type(bits, jnp.float32) if tf32 else out.astype(o_ref.dtype),
                   mask=(rows[:, None] < o_ref.shape[0]) & (cols[None, :] < o_ref.shape[1]))


def _swizzled(cols: int, dtype):
  """Shared-memory transforms for rows of `cols` elements of `dtype`: (8, row) tiles, swizzled."""
  itemsize = jnp.dtype(dtype).itemsize
  swizzle = plgpu.find_swizzle(cols * itemsize * 8)
  return plgpu.TilingTransform((8, swizzle // itemsize)), plgpu.SwizzleTransform(swizzle)


def _k_major(dtype) -> bool:
  """Whether `wgmma` must read the weights K-major, as (N, K): TF32 (f32 operands) only does."""
  return jnp.dtype(dtype).itemsize == 4


def _projection_kernel(x_gmem, *refs, num_weights: int, residual: bool, tile_m: int,
                       tile_n: int, stages: int, split_n: bool, delay: int):
  """o = x @ w (+ r), or silu(x @ w0) * (x @ w1) with two weights; one program per SM, the
  memory warpgroup feeding the two compute warpgroups' wgmma, one accumulator per weight; the
  weights are (N, K) when `_k_major`, else (K, N)."""
  w_gmems, o_gmem = refs[:num_weights], refs[-1]
  r_gmem = refs[num_weights] if residual else None
  dtype, k_major = x_gmem.dtype, _k_major(x_gmem.dtype)
  (m, k), n = x_gmem.shape, w_gmems[0].shape[0 if k_major else 1]
  tile_k = ROW_BYTES // jnp.dtype(dtype).itemsize
  # A stage released `delay` steps late races when the K loop is not longer than that (one
  # K step with split_n: wrong sums, barrier errors in interpret mode); none to overlap.
  delay = min(delay, k // tile_k - 1)
  cta_m, cta_n = (tile_m, 2 * tile_n) if split_n else (2 * tile_m, tile_n)
  tiles_m, tiles_n = m // cta_m, n // cta_n
  epi_m, epi_n = EPILOGUE_ROWS, ROW_BYTES // jnp.dtype(o_gmem.dtype).itemsize

  def pipeline(step, context):
    spec = functools.partial(plgpu.BlockSpec, memory_space=plgpu.SMEM, delay_release=delay)
    along_k = lambda rows: spec((rows, tile_k), lambda s: (0, s),
                                transforms=_swizzled(tile_k, dtype))
    w_spec = (along_k(cta_n) if k_major else
              spec((tile_k, cta_n), lambda s: (s, 0), transforms=_swizzled(cta_n, dtype)))
    return plgpu.emit_pipeline_warp_specialized(
        step, grid=(k // tile_k,), memory_registers=40, wg_axis="wg", num_compute_wgs=2,
        max_concurrent_steps=stages, compute_context=context,
        in_specs=[along_k(cta_m)] + [w_spec] * num_weights)

  ignore = lambda *_, **__: None
  scratch = dict(out_smem=plgpu.SMEM((2, 2, epi_m, epi_n), o_gmem.dtype,
                                     transforms=_swizzled(epi_n, o_gmem.dtype)))
  if residual:
    scratch.update(res_smem=plgpu.SMEM((2, tile_m, tile_n), r_gmem.dtype,
                                       transforms=_swizzled(tile_n, r_gmem.dtype)),
                   res_loaded=plgpu.Barrier(num_barriers=2))

  @functools.partial(pl.run_scoped,
                     allocations=pipeline(ignore, ignore).get_allocations(x_gmem, *w_gmems),
                     collective_axes="wg", **scratch)
  def _scope(allocations, out_smem, res_smem=None, res_loaded=None):
    wg = lax.axis_index("wg")

    @plgpu.nd_loop((tiles_m * tiles_n,), collective_axes="sm")
    def _tiles(info):
      i, j = plgpu.planar_snake(info.index[0], (tiles_m, tiles_n), 1, 8)
      rows, cols = pl.ds(i * cta_m, cta_m), pl.ds(j * cta_n, cta_n)
      wg_rows = slice(None) if split_n else pl.ds(wg * tile_m, tile_m)
      wg_cols = pl.ds(wg * tile_n, tile_n) if split_n else slice(None)
      out_tile = o_gmem.at[rows, cols].at[wg_rows, wg_cols]

      def context(run):
        @functools.partial(pl.run_scoped, accs=[plgpu.ACC((tile_m, tile_n), jnp.float32)
                                                for _ in range(num_weights)])
        def _accumulate(accs):
          if residual:  # lands while the K loop runs
            plgpu.copy_gmem_to_smem(r_gmem.at[rows, cols].at[wg_rows, wg_cols],
                                    res_smem.at[wg], res_loaded.at[wg])
          run(tuple(accs))
          if num_weights == 2:
            out = jax.nn.silu(accs[0][...]) * accs[1][...]
          else:
            out = accs[0][...]
          if residual:
            plgpu.barrier_wait(res_loaded.at[wg])
            out = out + res_smem[wg].astype(jnp.float32)
          out = out.astype(o_gmem.dtype)
          plgpu.wait_smem_to_gmem(0, wait_read_only=True)
          for a in range(tile_m // epi_m):
            for b in range(tile_n // epi_n):
              slot = (a * (tile_n // epi_n) + b) % 2
              plgpu.wait_smem_to_gmem(1, wait_read_only=True)
              out_smem[wg, slot] = out[a * epi_m:(a + 1) * epi_m, b * epi_n:(b + 1) * epi_n]
              plgpu.commit_smem()
              plgpu.copy_smem_to_gmem(
                  out_smem.at[wg, slot],
                  out_tile.at[pl.ds(a * epi_m, epi_m), pl.ds(b * epi_n, epi_n)])

      def step(_, x_smem, *w_and_accs):
        w_smems, accs = w_and_accs[:num_weights], w_and_accs[num_weights]
        for acc, w_smem in zip(accs, w_smems):
          plgpu.wgmma(acc, x_smem.at[wg_rows],
                      w_smem.at[wg_cols].transpose((1, 0)) if k_major else w_smem.at[:, wg_cols])
        plgpu.wgmma_wait(num_weights * delay)
        return accs

      w_cols = (lambda w: w.at[cols, :]) if k_major else (lambda w: w.at[:, cols])
      pipeline(step, context)(x_gmem.at[rows, :], *map(w_cols, w_gmems),
                              allocations=allocations)

  plgpu.wait_smem_to_gmem(0, wait_read_only=True)


def config_ok(config) -> bool:
  """Whether the projections and the attention (dh up to 128) can compile: pipelined tiles (and
  Mosaic GPU's epilogue and residual tiles) in shared memory, accumulators in 128 registers
  per thread (three in Triton's qkv, two in swiglu). A Mosaic GPU K step and an epilogue piece
  are rows of ROW_BYTES at any precision, so their bytes are the same at float32 and bfloat16;
  the residual tile is counted at 4 bytes an element, the most."""
  attention = (config["block_q"] * (128 + config["block_kv"]) // (32 * config["attention_warps"])
               <= 128)
  if config["backend"] == "mosaic_gpu":
    epilogue = 2 * 2 * EPILOGUE_ROWS * ROW_BYTES
    tile_m, ok = config["tile_m"], attention
    for tile_n, width, residual in ((config["tile_n"], 1, True), (config["glu_n"], 2, False)):
      cta_m, cta_n = (tile_m, 2 * tile_n) if config["split_n"] else (2 * tile_m, tile_n)
      smem = (config["stages"] * ROW_BYTES * (cta_m + width * cta_n) + epilogue
              + residual * 2 * tile_m * tile_n * 4)
      ok &= smem <= SHARED_MEMORY_BYTES - 2048 and width * tile_m * tile_n // 128 <= 128
    return ok
  bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
  return (attention and config["matmul_stages"] * bk * (bm + 3 * bn) * 4 <= SHARED_MEMORY_BYTES
          and 3 * bm * bn // (32 * config["matmul_warps"]) <= 128)


def _default_config(head_dim: int) -> dict:
  d_pad = max(16, pl.next_power_of_2(head_dim))
  return dict(backend="triton", block_m=64, block_n=64, block_k=32, block_q=64,
              block_kv=64 if d_pad <= 128 else 32, matmul_warps=4, matmul_stages=3,
              attention_warps=4 if d_pad <= 64 else 8)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def _sm_count() -> int:
  """Programs of the persistent kernel: the target GPU's SMs (one when interpreting on CPU)."""
  device = jax.sharding.get_abstract_mesh().abstract_device or jax.devices()[0]
  return getattr(device, "num_cores", None) or getattr(device, "core_count", 1)


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '512x1024,1024x8x128,...',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(x, wq, wk, wv, wo, w_gate, w_up, w_down) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  shape = shape_class(x, wq, wk, wv, wo, w_gate, w_up, w_down)
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape)
  return dict(tuned) if tuned else _default_config(wq.shape[-1])


def kernel(x, wq, wk, wv, wo, w_gate, w_up, w_down, *, interpret: bool = False, config=None):
  """The transformer block; `config` (one of CONFIG_SPACE's configs, or some of its keys)
  overrides the tuned or default one."""
  weights = (wq, wk, wv, wo, w_gate, w_up, w_down)
  (s, d), (_, heads, head_dim), f = x.shape, wq.shape, w_gate.shape[1]
  if not (wq.shape == wk.shape == wv.shape == (d, heads, head_dim)
          and wo.shape == (heads, head_dim, d) and w_gate.shape == w_up.shape == (d, f)
          and w_down.shape == (f, d)):
    raise ValueError(f"{x.shape=}, {wq.shape=}, {wo.shape=}, {w_gate.shape=} and "
                     f"{w_down.shape=} must be (S, D), (D, H, dh), (H, dh, D), (D, F), (F, D)")
  if head_dim > MAX_HEAD_DIM:
    raise ValueError(f"{head_dim=} must be <= {MAX_HEAD_DIM=}")
  chosen = config_for(x, *weights)
  if config and config.get("backend", chosen["backend"]) != chosen["backend"]:
    chosen = {}
  chosen = {**chosen, **(config or {})}
  if chosen.pop("backend") == "mosaic_gpu":
    return _transformer_block_mosaic(x, *weights, interpret=interpret, **chosen)
  out = _transformer_block_triton(x, *weights, interpret=interpret, **chosen)
  return out.astype(x.dtype)


def _attention(qkv, offsets, out_rows: int, heads: int, head_dim: int, *, interpret: bool,
               block_q: int, block_kv: int, attention_warps: int):
  """The attention call: q, k, v at column `offsets` of the `qkv` arrays, (S, H*dh) out."""
  return pl.pallas_call(
      functools.partial(_attention_kernel, head_dim=head_dim,
                        d_pad=max(16, pl.next_power_of_2(head_dim)), block_q=block_q,
                        block_kv=block_kv, offsets=offsets),
      grid=(heads, pl.cdiv(out_rows, block_q)),
      out_shape=jax.ShapeDtypeStruct((out_rows, heads * head_dim), qkv[0].dtype),
      compiler_params=pltriton.CompilerParams(num_warps=attention_warps, num_stages=2),
      interpret=interpret, name=TASK_NAME + "_attention")(*qkv)


@functools.partial(jax.jit, static_argnames=(
    "interpret", *(k for k in CONFIG_SPACE[0] if k != "backend")))
def _transformer_block_triton(x, wq, wk, wv, wo, w_gate, w_up, w_down, *, interpret: bool,
                              block_m: int, block_n: int, block_k: int, block_q: int,
                              block_kv: int, matmul_warps: int, matmul_stages: int,
                              attention_warps: int):
  (s, d), (_, heads, head_dim), f = x.shape, wq.shape, w_gate.shape[1]
  hd = heads * head_dim
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
  attn = _attention((q, k, v), (0, 0, 0), s, heads, head_dim, interpret=interpret,
                    block_q=block_q, block_kv=block_kv, attention_warps=attention_warps)
  residual_matmul = functools.partial(_residual_matmul_kernel, **blocks)
  h = call(residual_matmul, grid=tiles(d), out_shape=act(d), compiler_params=matmul_params,
           name=TASK_NAME + "_out_proj")(attn, wo.reshape(hd, d), x)
  g = call(functools.partial(_rmsnorm_matmul_kernel, num_weights=2, swiglu=True, **blocks),
           grid=tiles(f), out_shape=act(f), compiler_params=matmul_params,
           name=TASK_NAME + "_swiglu")(h, w_gate, w_up)
  return call(residual_matmul, grid=tiles(d), out_shape=act(d), compiler_params=matmul_params,
              name=TASK_NAME + "_down_proj")(g, w_down, h)


def _padded(a, rows: int, cols: int):
  """`a` zero-padded at the end to multiples of (rows, cols); `a` itself when it is one."""
  pad = (-a.shape[0] % rows, -a.shape[1] % cols)
  return jnp.pad(a, ((0, pad[0]), (0, pad[1]))) if any(pad) else a


def _tf32(a):
  """`a` rounded to TF32 (10 mantissa bits) to nearest even. TF32 `wgmma` drops the low 13
  bits of its f32 operands, which rounds every product toward zero; through the block's chain
  of projections that bias would add up. A 16-bit `a` as it is (bf16 `wgmma` reads it exactly)."""
  if a.dtype != jnp.float32:
    return a
  return lax.reduce_precision(a, exponent_bits=8, mantissa_bits=10)


def _weight(w, n_tile: int, k_tile: int):
  """The (K, N) weight `w` as the projections read it: (N, K) and rounded to TF32 for TF32
  `wgmma` (`_k_major`), else (K, N) as it is; N zero-padded to n_tile, K to k_tile."""
  if _k_major(w.dtype):
    return _padded(_tf32(w.T), n_tile, k_tile)
  return _padded(w, k_tile, n_tile)


@functools.partial(jax.jit, static_argnames=(
    "interpret", *(k for k in CONFIG_SPACE[1] if k != "backend")))
def _transformer_block_mosaic(x, wq, wk, wv, wo, w_gate, w_up, w_down, *, interpret: bool,
                              tile_m: int, tile_n: int, glu_n: int, stages: int, split_n: bool,
                              delay: int, block_q: int, block_kv: int, attention_warps: int):
  (s, d), (_, heads, head_dim), f = x.shape, wq.shape, w_gate.shape[1]
  hd = heads * head_dim
  cta_m = tile_m if split_n else 2 * tile_m
  cta_n, glu_cta_n = (2 * tile_n, 2 * glu_n) if split_n else (tile_n, glu_n)

  tile_k = ROW_BYTES // x.dtype.itemsize

  def project(operands, tile: int, residual: bool, name: str):
    n = operands[1].shape[0 if _k_major(x.dtype) else 1]
    return plgpu.kernel(
        functools.partial(_projection_kernel, num_weights=len(operands) - 1 - residual,
                          residual=residual, tile_m=tile_m, tile_n=tile, stages=stages,
                          split_n=split_n, delay=delay),
        out_type=jax.ShapeDtypeStruct((operands[0].shape[0], n), x.dtype),
        grid=(_sm_count(),), grid_names=("sm",), num_threads=3, thread_name="wg",
        compiler_params=plgpu.CompilerParams(
            lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        interpret=plgpu.InterpretGPUParams() if interpret else None,
        kernel_name=TASK_NAME + name)(*operands)

  def rmsnorm(a):
    """rmsnorm(a) over D, in TF32 at float32, zero-padded to (multiples of cta_m, the
    projections' K)."""
    out = jax.ShapeDtypeStruct((-(-s // cta_m) * cta_m, -(-d // cta_n) * cta_n), x.dtype)
    return pl.pallas_call(functools.partial(_rmsnorm_kernel, d=d),
                          grid=(pl.cdiv(out.shape[0], NORM_ROWS),), out_shape=out,
                          compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=1),
                          interpret=interpret, name=TASK_NAME + "_rmsnorm")(a)

  # The weights as `_weight` reads them; D (the K of qkv and swiglu, the N of out_proj and
  # down_proj) padded to cta_n everywhere, H*dh to tile_k, F to swiglu's tile.
  w_qkv = jnp.concatenate([w.reshape(d, hd) for w in (wq, wk, wv)], axis=1)
  w_qkv = _weight(w_qkv, cta_n, cta_n)
  w_o = _weight(wo.reshape(hd, d), cta_n, tile_k)
  w_g, w_u = (_weight(w, glu_cta_n, cta_n) for w in (w_gate, w_up))
  w_d = _weight(w_down, cta_n, glu_cta_n)
  x_p = _padded(x, cta_m, cta_n)

  qkv = project((rmsnorm(x), w_qkv), tile_n, False, "_qkv")
  attn = _attention((qkv,) * 3, (0, hd, 2 * hd), s, heads, head_dim, interpret=interpret,
                    block_q=block_q, block_kv=block_kv, attention_warps=attention_warps)
  h = project((_padded(attn, cta_m, tile_k), w_o, x_p), tile_n, True, "_out_proj")
  g = project((rmsnorm(h), w_g, w_u), glu_n, False, "_swiglu")
  out = project((g, w_d, h), tile_n, True, "_down_proj")
  return out[:s, :d] if out.shape != (s, d) else out
