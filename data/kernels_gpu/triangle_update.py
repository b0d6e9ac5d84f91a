"""triangle_update: AlphaFold-style triangle multiplicative update, outgoing edges.

x = layernorm_C(z) (no affine, eps 1e-5); a = (x @ w_a) * mask[..., None];
b = (x @ w_b) * mask[..., None]; t[i, j, c] = sum_k a[i, k, c] * b[j, k, c];
out = z + sigmoid(x @ w_g) * (layernorm_C(t) @ w_o).
z (N, N, C), mask (N, N) in {0, 1}, w_a, w_b, w_g, w_o (C, C) -> (N, N, C).

GPU fix: the TPU kernel did everything in one whole-array program; here three Triton calls:
1. project: blocks of block_r rows (128 by default) of the (N*N, C) view of z. Each block
   gets layernorm, the a and b projections and the mask. Both are stored transposed,
   channel-major (C, N*N), so every channel row is written as one contiguous run.
2. triangle: the product per channel, t_c = a_c @ b_c^T. a_c and b_c are channel c's
   (N, N) slices of the channel-major arrays (a squeezed BlockSpec picks the channel).
   Grid (C, N / bt, N / bt) over (bt, bt) output tiles; a K loop over k in bk steps with a
   float32 accumulator (by default 64 x 64 tiles and 32-wide k steps, smaller for tiny N).
   t stays channel-major.
3. output: the row blocks of step 1 again. It reads a (C, block_r) tile of t and
   transposes it back, then applies layernorm and w_o. It recomputes layernorm(z) and the
   sigmoid gate (cheaper than storing the gate) and adds the residual.
C is padded with zeros to a power of two >= 16 for the dots (edge C = 24 -> 32), and every
load and store is masked, so any N and C work.

Tuning: `block_r` and `row_warps` set how many rows each program of the two row kernels
normalizes and projects (registers and dot size) against how many programs share the GPU;
`block_t` sets the triangle product's output tile (reuse of each loaded k step against
programs: C * (N / block_t)^2 of them), `block_k` its k step, `triangle_stages` how many k steps
are in flight, and `triangle_warps` its warps. The config comes from TUNED_CONFIGS for the GPU
and shape class being compiled for, else from a default.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "triangle_update"
FIX_APPLIED: Final = "decomposed_kernels"
FIX_REASON: Final = ("the TPU kernel ran the whole update as one program on whole arrays, "
                     "2^20-element tensors and larger intermediates at large N; row-block "
                     "projection kernels and a per-channel K-looped 2-D dot fit any N and C")
EPS: Final = 1e-5
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
REFERENCE_CHANNELS: Final = 64  # C that config_ok sizes the row kernels' registers for
MAX_ELEMENTS_PER_THREAD: Final = 64  # f32 values of a (block_r, C) tile each thread holds
MAX_ACCUMULATOR_PER_THREAD: Final = 128  # f32 values of the product's accumulator per thread
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try.
CONFIG_SPACE: Final = {"block_r": (16, 32, 64, 128), "row_warps": (2, 4, 8),
                       "block_t": (16, 32, 64, 128), "block_k": (16, 32, 64),
                       "triangle_warps": (2, 4, 8), "triangle_stages": (2, 3, 4)}
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "128x128x64,128x128,64x64,64x64,64x64,64x64": dict(
            block_r=32, row_warps=2, block_t=64, block_k=64, triangle_warps=8,
            triangle_stages=3),
        "128x128x64,128x128,64x64,64x64,64x64,64x64:bfloat16": dict(
            block_r=32, row_warps=4, block_t=64, block_k=64, triangle_warps=4,
            triangle_stages=2),
        "64x64x32,64x64,32x32,32x32,32x32,32x32": dict(
            block_r=16, row_warps=2, block_t=32, block_k=64, triangle_warps=2,
            triangle_stages=3),
        "64x64x32,64x64,32x32,32x32,32x32,32x32:bfloat16": dict(
            block_r=16, row_warps=2, block_t=32, block_k=64, triangle_warps=2,
            triangle_stages=3),
    },
}


def _layernorm(x, col_ok, c: int):
  """Layernorm over the first c columns of x (zeros beyond them); the padding stays 0."""
  mean = jnp.sum(x, axis=1, keepdims=True) / c
  centered = jnp.where(col_ok, x - mean, 0.0)
  var = jnp.sum(centered * centered, axis=1, keepdims=True) / c
  return centered * jax.lax.rsqrt(var + EPS)


def _project_kernel(z_ref, mask_ref, wa_ref, wb_ref, a_ref, b_ref, *, c_pad: int, block_r: int):
  rows, c = z_ref.shape
  r0 = pl.program_id(0) * block_r
  row_ok = r0 + jnp.arange(block_r) < rows
  col_ok = jnp.arange(c_pad) < c
  z = pltriton.load(z_ref.at[pl.ds(r0, block_r), pl.ds(0, c_pad)],
                    mask=row_ok[:, None] & col_ok[None, :], other=0.0).astype(jnp.float32)
  x = _layernorm(z, col_ok[None, :], c)
  keep = pltriton.load(mask_ref.at[pl.ds(r0, block_r)], mask=row_ok,
                       other=0.0).astype(jnp.float32)[:, None]
  for w_ref, o_ref in ((wa_ref, a_ref), (wb_ref, b_ref)):
    w = pltriton.load(w_ref.at[pl.ds(0, c_pad), pl.ds(0, c_pad)],
                      mask=col_ok[:, None] & col_ok[None, :], other=0.0).astype(jnp.float32)
    y = jnp.dot(x, w, preferred_element_type=jnp.float32) * keep
    pltriton.store(o_ref.at[pl.ds(0, c_pad), pl.ds(r0, block_r)], y.T,
                   mask=col_ok[:, None] & row_ok[None, :])


def _triangle_kernel(a_ref, b_ref, t_ref, *, bt: int, bk: int):
  """t[i, j] = sum_k a[i, k] b[j, k] for one channel's (N, N) slices."""
  n = a_ref.shape[0]
  i0, j0 = pl.program_id(1) * bt, pl.program_id(2) * bt
  i_ok = (i0 + jnp.arange(bt) < n)[:, None]
  j_ok = (j0 + jnp.arange(bt) < n)[:, None]

  def step(kb, acc):
    k_ok = (kb * bk + jnp.arange(bk) < n)[None, :]
    a = pltriton.load(a_ref.at[pl.ds(i0, bt), pl.ds(kb * bk, bk)], mask=i_ok & k_ok, other=0.0)
    b = pltriton.load(b_ref.at[pl.ds(j0, bt), pl.ds(kb * bk, bk)], mask=j_ok & k_ok, other=0.0)
    return acc + jnp.dot(a, b.T, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, pl.cdiv(n, bk), step, jnp.zeros((bt, bt), jnp.float32))
  pltriton.store(t_ref.at[pl.ds(i0, bt), pl.ds(j0, bt)], acc, mask=i_ok & j_ok.T)


def _output_kernel(z_ref, t_ref, wg_ref, wo_ref, o_ref, *, c_pad: int, block_r: int):
  rows, c = z_ref.shape
  r0 = pl.program_id(0) * block_r
  row_ok = r0 + jnp.arange(block_r) < rows
  col_ok = jnp.arange(c_pad) < c
  tile_mask = row_ok[:, None] & col_ok[None, :]
  w_mask = col_ok[:, None] & col_ok[None, :]
  z = pltriton.load(z_ref.at[pl.ds(r0, block_r), pl.ds(0, c_pad)], mask=tile_mask,
                    other=0.0).astype(jnp.float32)
  t = pltriton.load(t_ref.at[pl.ds(0, c_pad), pl.ds(r0, block_r)], mask=tile_mask.T, other=0.0).T
  w_g = pltriton.load(wg_ref.at[pl.ds(0, c_pad), pl.ds(0, c_pad)], mask=w_mask,
                      other=0.0).astype(jnp.float32)
  w_o = pltriton.load(wo_ref.at[pl.ds(0, c_pad), pl.ds(0, c_pad)], mask=w_mask,
                      other=0.0).astype(jnp.float32)
  gate = jax.nn.sigmoid(jnp.dot(_layernorm(z, col_ok[None, :], c), w_g,
                                preferred_element_type=jnp.float32))
  update = jnp.dot(_layernorm(t, col_ok[None, :], c), w_o, preferred_element_type=jnp.float32)
  pltriton.store(o_ref.at[pl.ds(r0, block_r), pl.ds(0, c_pad)], z + gate * update,
                 mask=tile_mask)


def config_ok(config) -> bool:
  """Whether a config can compile: the row kernels' (block_r, REFERENCE_CHANNELS) tiles in
  MAX_ELEMENTS_PER_THREAD registers per thread, the product's pipelined k steps in shared
  memory and its accumulator in MAX_ACCUMULATOR_PER_THREAD registers per thread."""
  bt, bk = config["block_t"], config["block_k"]
  rows = config["block_r"] * REFERENCE_CHANNELS // (32 * config["row_warps"])
  accumulator = bt * bt // (32 * config["triangle_warps"])
  return (rows <= MAX_ELEMENTS_PER_THREAD and accumulator <= MAX_ACCUMULATOR_PER_THREAD
          and config["triangle_stages"] * 2 * bt * bk * 4 <= SHARED_MEMORY_BYTES)


def _default_config(n: int) -> dict:
  """128-row blocks; 64 x 64 product tiles and 32-wide k steps, smaller for tiny N."""
  n_pad = max(16, pl.next_power_of_2(n))
  return dict(block_r=128, row_warps=4, block_t=min(64, n_pad), block_k=min(32, n_pad),
              triangle_warps=4, triangle_stages=3)


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


def config_for(z, mask, w_a, w_b, w_g, w_o) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(z, mask, w_a, w_b, w_g, w_o))
  return dict(tuned) if tuned else _default_config(z.shape[0])


def kernel(z, mask, w_a, w_b, w_g, w_o, *, interpret: bool = False, config=None):
  """The triangle update of z; `config` (keys of CONFIG_SPACE) overrides the tuned one."""
  config = {**config_for(z, mask, w_a, w_b, w_g, w_o), **(config or {})}
  out = _triangle_update(z, mask, w_a, w_b, w_g, w_o, interpret=interpret, **config)
  return out.astype(z.dtype)


@functools.partial(jax.jit, static_argnames=("interpret", *CONFIG_SPACE))
def _triangle_update(z, mask, w_a, w_b, w_g, w_o, *, interpret: bool, block_r: int,
                     row_warps: int, block_t: int, block_k: int, triangle_warps: int,
                     triangle_stages: int):
  n, n2, c = z.shape
  if n2 != n or mask.shape != (n, n) or any(w.shape != (c, c) for w in (w_a, w_b, w_g, w_o)):
    raise ValueError(f"{z.shape=}, {mask.shape=} and {w_a.shape=} must be (N, N, C), (N, N), "
                     "(C, C)")
  c_pad = max(16, pl.next_power_of_2(c))
  rows = z.reshape(n * n, c)
  row_grid = (pl.cdiv(n * n, block_r),)
  row_params = pltriton.CompilerParams(num_warps=row_warps, num_stages=2)
  channel_major = jax.ShapeDtypeStruct((c, n * n), jnp.float32)
  a, b = pl.pallas_call(
      functools.partial(_project_kernel, c_pad=c_pad, block_r=block_r), grid=row_grid,
      out_shape=(channel_major, channel_major), compiler_params=row_params,
      interpret=interpret, name=TASK_NAME + "_project")(rows, mask.reshape(n * n), w_a, w_b)
  channel = pl.BlockSpec((None, n, n), lambda ch, i, j: (ch, 0, 0))
  t = pl.pallas_call(
      functools.partial(_triangle_kernel, bt=block_t, bk=block_k),
      grid=(c, pl.cdiv(n, block_t), pl.cdiv(n, block_t)), in_specs=[channel, channel],
      out_specs=channel, out_shape=jax.ShapeDtypeStruct((c, n, n), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=triangle_warps,
                                              num_stages=triangle_stages),
      interpret=interpret, name=TASK_NAME + "_triangle")(a.reshape(c, n, n), b.reshape(c, n, n))
  out = pl.pallas_call(
      functools.partial(_output_kernel, c_pad=c_pad, block_r=block_r), grid=row_grid,
      out_shape=jax.ShapeDtypeStruct((n * n, c), jnp.float32), compiler_params=row_params,
      interpret=interpret, name=TASK_NAME + "_output")(rows, t.reshape(c, n * n), w_g, w_o)
  return out.reshape(n, n, c)
