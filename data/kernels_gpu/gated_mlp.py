"""gated_mlp: out = (silu(x @ w_gate) * (x @ w_up)) @ w_down; x (M, D), w_gate and w_up (D, F),
w_down (F, D) float32 or bfloat16, any M, D, F; out (and h) in x's dtype.

GPU fix: two backends, chosen per GPU and shape class by the config. Each computes the hidden
activations h (M, F) in one call, two f32 accumulators (gate and up) sharing each x tile and the
SiLU gate applied in the epilogue, then the down projection h @ w_down in a second. h makes one
round trip through memory; fusing the down projection would recompute h once per output column
tile.

- `mosaic_gpu` (Hopper and later): both calls are persistent kernels, one program per SM walking
  the output tiles; a memory warpgroup streams the operand tiles with TMA into swizzled shared
  memory, `stages` K steps ahead (a K step is one 128-byte swizzled row: 32 f32, 64 bf16
  elements), while two compute warpgroups run `wgmma` (TF32 at float32, bf16 at bfloat16) into
  f32 accumulators and store their tiles, cast to x's dtype, through shared memory with TMA.
  TF32 `wgmma` reads both operands K-major, so at float32 the weights are transposed to (N, K)
  first, and rounded to TF32 on the way (`_tf32`), x too; 16-bit `wgmma` reads the weights'
  (K, N) tiles as they are. M, D and F are zero-padded to the tiles when they are not
  multiples. `tile_m` rows per warpgroup in both calls; `glu_n` and `down_n` columns.
- `triton` (any GPU): each program owns a (bm, bn) tile and walks K in block_k-wide steps; all
  refs are whole arrays and every load and store is masked, so no dimension needs to be a block
  multiple. Each call's tile (`glu_m` x `glu_n`, `down_m` x `down_n`), the K step, warps and
  stages, and `k_major` (the weights read transposed) are tunable.

The f32 dots run in TF32, within the matmul tolerance. The config comes from TUNED_CONFIGS for
the GPU and shape class being compiled for, else from a Triton default by shape.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "gated_mlp"
FIX_APPLIED: Final = "decomposed_kernels"
FIX_REASON: Final = ("the TPU kernel holds all three whole weights per program, past Triton's "
                     "tensor limit and shared memory; a tiled GLU kernel and a tiled "
                     "down-projection, each a masked K loop with f32 accumulators, fit any shape")
MIN_PROGRAMS: Final = 128  # about one program per SM of an H200 (132 SMs)
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try: one space per backend.
CONFIG_SPACE: Final = (
    {"backend": ("triton",), "glu_m": (64, 128), "glu_n": (32, 64, 128), "down_m": (64, 128),
     "down_n": (64, 128, 256), "block_k": (32, 64), "k_major": (False, True),
     "num_warps": (4, 8), "num_stages": (2, 3, 4)},
    {"backend": ("mosaic_gpu",), "tile_m": (64, 128), "glu_n": (64, 128),
     "down_n": (64, 128, 256), "stages": (2, 3, 4), "split_n": (False, True), "delay": (0, 1)},
)
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
ROW_BYTES: Final = 128    # Mosaic GPU: one swizzled shared-memory row, the K step (32 f32, 64 bf16)
EPILOGUE_ROWS: Final = 64  # Mosaic GPU output store: pieces of 64 rows x one swizzled row
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024x2048,2048x4096,2048x4096,4096x2048": dict(
            backend='mosaic_gpu', tile_m=128, glu_n=64, down_n=64, stages=4, split_n=False,
            delay=0),
        "1024x2048,2048x4096,2048x4096,4096x2048:bfloat16": dict(
            backend='mosaic_gpu', tile_m=64, glu_n=128, down_n=128, stages=4, split_n=False,
            delay=0),
        "256x512,512x1024,512x1024,1024x512": dict(
            backend='mosaic_gpu', tile_m=64, glu_n=64, down_n=64, stages=4, split_n=True,
            delay=0),
        "256x512,512x1024,512x1024,1024x512:bfloat16": dict(
            backend='mosaic_gpu', tile_m=64, glu_n=64, down_n=64, stages=4, split_n=True,
            delay=0),
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
    return acc + jnp.dot(h.astype(wd.dtype), wd, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, pl.cdiv(k, block_k), step, jnp.zeros((bm, bn), jnp.float32))
  pltriton.store(o_ref.at[pl.ds(i * bm, bm), pl.ds(j * bn, bn)], acc,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))


def _swizzled(cols: int, dtype):
  """Shared-memory transforms for rows of `cols` elements of `dtype`: (8, row) tiles, swizzled."""
  itemsize = jnp.dtype(dtype).itemsize
  swizzle = plgpu.find_swizzle(cols * itemsize * 8)
  return plgpu.TilingTransform((8, swizzle // itemsize)), plgpu.SwizzleTransform(swizzle)


def _k_major(dtype) -> bool:
  """Whether `wgmma` must read the weights K-major, as (N, K): TF32 (f32 operands) only does."""
  return jnp.dtype(dtype).itemsize == 4


def _padded(a, rows: int, cols: int):
  """`a` zero-padded at the end to multiples of (rows, cols); `a` itself when it is one."""
  pad = (-a.shape[0] % rows, -a.shape[1] % cols)
  return jnp.pad(a, ((0, pad[0]), (0, pad[1]))) if any(pad) else a


def _tf32(a):
  """`a` rounded to TF32 (10 mantissa bits, to nearest even), as the kernel's operands; a
  16-bit `a` as it is (bf16 `wgmma` reads it exactly).

  TF32 `wgmma` reads f32 operands from shared memory by dropping their low 13 bits, which
  rounds every product toward zero; through two calls that bias adds up past the matmul
  tolerance (relative L2 error 0.0023 against 0.002 on the H200). Rounded to nearest first,
  the operands pass exactly, and the error stays unbiased. h, written by the first call, is
  still truncated by the second.
  """
  if a.dtype != jnp.float32:
    return a
  return lax.reduce_precision(a, exponent_bits=8, mantissa_bits=10)


def _sm_count() -> int:
  """Programs of the persistent kernel: the target GPU's SMs (one when interpreting on CPU)."""
  device = jax.sharding.get_abstract_mesh().abstract_device or jax.devices()[0]
  return getattr(device, "num_cores", None) or getattr(device, "core_count", 1)


def _store(out, slots, out_tile) -> None:
  """Writes the tile `out`, cast to the dtype of `slots`, to `out_tile` in GMEM, pieces of
  EPILOGUE_ROWS rows x one swizzled row through the two shared-memory `slots`, each refilled
  once its previous TMA store has read it."""
  out = out.astype(slots.dtype)
  epi_m, epi_n = EPILOGUE_ROWS, ROW_BYTES // jnp.dtype(slots.dtype).itemsize
  tile_m, tile_n = out.shape
  plgpu.wait_smem_to_gmem(0, wait_read_only=True)
  for a in range(tile_m // epi_m):
    for b in range(tile_n // epi_n):
      slot = (a * (tile_n // epi_n) + b) % 2
      plgpu.wait_smem_to_gmem(1, wait_read_only=True)
      slots[slot] = out[a * epi_m:(a + 1) * epi_m, b * epi_n:(b + 1) * epi_n]
      plgpu.commit_smem()
      plgpu.copy_smem_to_gmem(slots.at[slot],
                              out_tile.at[pl.ds(a * epi_m, epi_m), pl.ds(b * epi_n, epi_n)])


def _projection_kernel(x_gmem, *refs, tile_m: int, tile_n: int, stages: int, split_n: bool,
                       delay: int):
  """o = x @ w, or silu(x @ w0) * (x @ w1) with two weights; one program per SM, the memory
  warpgroup feeding the two compute warpgroups' wgmma, one accumulator per weight (both
  sharing each x tile); the weights are (N, K) when `_k_major`, else (K, N)."""
  w_gmems, o_gmem = refs[:-1], refs[-1]
  dtype, k_major = x_gmem.dtype, _k_major(x_gmem.dtype)
  (m, k), n = x_gmem.shape, w_gmems[0].shape[0 if k_major else 1]
  tile_k = ROW_BYTES // jnp.dtype(dtype).itemsize
  # A stage released `delay` steps late races when the K loop is not longer than that (one
  # K step with split_n: wrong sums, barrier errors in interpret mode); none to overlap.
  delay = min(delay, k // tile_k - 1)
  cta_m, cta_n = (tile_m, 2 * tile_n) if split_n else (2 * tile_m, tile_n)
  tiles_m, tiles_n = m // cta_m, n // cta_n
  epi_n = ROW_BYTES // jnp.dtype(o_gmem.dtype).itemsize

  def pipeline(step, context):
    spec = functools.partial(plgpu.BlockSpec, memory_space=plgpu.SMEM, delay_release=delay)
    along_k = lambda rows: spec((rows, tile_k), lambda s: (0, s),
                                transforms=_swizzled(tile_k, dtype))
    w_spec = (along_k(cta_n) if k_major else
              spec((tile_k, cta_n), lambda s: (s, 0), transforms=_swizzled(cta_n, dtype)))
    return plgpu.emit_pipeline_warp_specialized(
        step, grid=(k // tile_k,), memory_registers=40, wg_axis="wg", num_compute_wgs=2,
        max_concurrent_steps=stages, compute_context=context,
        in_specs=[along_k(cta_m)] + [w_spec] * len(w_gmems))

  ignore = lambda *_, **__: None

  @functools.partial(pl.run_scoped,
                     allocations=pipeline(ignore, ignore).get_allocations(x_gmem, *w_gmems),
                     out_smem=plgpu.SMEM((2, 2, EPILOGUE_ROWS, epi_n), o_gmem.dtype,
                                         transforms=_swizzled(epi_n, o_gmem.dtype)),
                     collective_axes="wg")
  def _scope(allocations, out_smem):
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
                                                for _ in w_gmems])
        def _accumulate(accs):
          run(tuple(accs))
          if len(accs) == 2:
            out = jax.nn.silu(accs[0][...]) * accs[1][...]
          else:
            out = accs[0][...]
          _store(out, out_smem.at[wg], out_tile)

      def step(_, x_smem, *w_and_accs):
        w_smems, accs = w_and_accs[:-1], w_and_accs[-1]
        for acc, w_smem in zip(accs, w_smems):
          plgpu.wgmma(acc, x_smem.at[wg_rows],
                      w_smem.at[wg_cols].transpose((1, 0)) if k_major else w_smem.at[:, wg_cols])
        plgpu.wgmma_wait(len(accs) * delay)
        return accs

      w_cols = (lambda w: w.at[cols, :]) if k_major else (lambda w: w.at[:, cols])
      pipeline(step, context)(x_gmem.at[rows, :], *map(w_cols, w_gmems),
                              allocations=allocations)

  plgpu.wait_smem_to_gmem(0, wait_read_only=True)


def config_ok(config) -> bool:
  """Whether both calls can compile: pipelined tiles (and the Mosaic GPU epilogue slots) in
  shared memory, accumulators in at most 128 registers per thread (the GLU call holds two). A
  Mosaic GPU K step and an epilogue piece are rows of ROW_BYTES at any precision, so its bytes
  are the same at float32 and bfloat16 (and its f32 accumulators too)."""
  if config["backend"] == "mosaic_gpu":
    epilogue = 2 * 2 * EPILOGUE_ROWS * ROW_BYTES
    ok = True
    for tile_n, width in ((config["glu_n"], 2), (config["down_n"], 1)):
      tile_m = config["tile_m"]
      cta_m, cta_n = (tile_m, 2 * tile_n) if config["split_n"] else (2 * tile_m, tile_n)
      smem = config["stages"] * ROW_BYTES * (cta_m + width * cta_n) + epilogue
      ok &= smem <= SHARED_MEMORY_BYTES - 2048 and width * tile_m * tile_n // 128 <= 128
    return ok
  glu, down = (config["glu_m"], config["glu_n"]), (config["down_m"], config["down_n"])
  threads = 32 * config["num_warps"]
  return all(config["num_stages"] * config["block_k"] * (bm + width * bn) * 4
             <= SHARED_MEMORY_BYTES and width * bm * bn // threads <= 128
             for (bm, bn), width in ((glu, 2), (down, 1)))


def _default_config(m: int, d: int, f: int) -> dict:
  """Triton: 128 x 64 GLU tiles (two accumulators) and 128 x 128 down tiles when they fill
  the GPU."""
  big_glu = pl.cdiv(m, 128) * pl.cdiv(f, 64) >= MIN_PROGRAMS
  big_down = pl.cdiv(m, 128) * pl.cdiv(d, 128) >= MIN_PROGRAMS
  return dict(backend="triton", glu_m=128 if big_glu else 64, glu_n=64,
              down_m=128 if big_down else 64, down_n=128 if big_down else 64, block_k=32,
              k_major=False, num_warps=8 if big_glu else 4, num_stages=3)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '1024x1024,1024x4096,...',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(x, w_gate, w_up, w_down) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x, w_gate, w_up, w_down))
  return dict(tuned) if tuned else _default_config(x.shape[0], x.shape[1], w_gate.shape[1])


def kernel(x, w_gate, w_up, w_down, *, interpret: bool = False, config=None):
  """The gated MLP; `config` (one of CONFIG_SPACE's configs, or some of its keys) overrides the
  tuned or default one."""
  (m, d), (d_w, f) = x.shape, w_gate.shape
  if d != d_w or w_up.shape != w_gate.shape or w_down.shape != (f, d):
    raise ValueError(f"{x.shape=}, {w_gate.shape=}, {w_up.shape=}, {w_down.shape=} must be "
                     "(M, D), (D, F), (D, F), (F, D)")
  chosen = config_for(x, w_gate, w_up, w_down)
  if config and config.get("backend", chosen["backend"]) != chosen["backend"]:
    chosen = {}
  chosen = {**chosen, **(config or {})}
  backend = chosen.pop("backend")
  if backend == "mosaic_gpu":
    return _gated_mlp_mosaic(x, w_gate, w_up, w_down, interpret=interpret, **chosen)
  out = _gated_mlp_triton(x, w_gate, w_up, w_down, interpret=interpret, **chosen)
  return out.astype(x.dtype)


@functools.partial(jax.jit, static_argnames=(
    "interpret", *(k for k in CONFIG_SPACE[0] if k != "backend")))
def _gated_mlp_triton(x, w_gate, w_up, w_down, *, interpret: bool, glu_m: int, glu_n: int,
                      down_m: int, down_n: int, block_k: int, k_major: bool, num_warps: int,
                      num_stages: int):
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


def _mosaic_call(body, out_shape, name: str, interpret: bool, *operands):
  return plgpu.kernel(
      body, out_type=jax.ShapeDtypeStruct(out_shape, operands[0].dtype), grid=(_sm_count(),),
      grid_names=("sm",), num_threads=3, thread_name="wg",
      compiler_params=plgpu.CompilerParams(
          lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
      interpret=plgpu.InterpretGPUParams() if interpret else None, kernel_name=name)(*operands)


@functools.partial(jax.jit, static_argnames=(
    "interpret", *(k for k in CONFIG_SPACE[1] if k != "backend")))
def _gated_mlp_mosaic(x, w_gate, w_up, w_down, *, interpret: bool, tile_m: int, glu_n: int,
                      down_n: int, stages: int, split_n: bool, delay: int):
  (m, d), f = x.shape, w_gate.shape[1]
  cta_m = tile_m if split_n else 2 * tile_m
  glu_cta_n, down_cta_n = (2 * glu_n, 2 * down_n) if split_n else (glu_n, down_n)
  # h's columns are the down projection's K: padded to both the GLU tile and the K step.
  f_pad = -(-f // glu_cta_n) * glu_cta_n
  tile_k = ROW_BYTES // x.dtype.itemsize
  x_p = _padded(_tf32(x), cta_m, tile_k)
  if _k_major(x.dtype):
    wg_p, wu_p = _padded(_tf32(w_gate.T), f_pad, tile_k), _padded(_tf32(w_up.T), f_pad, tile_k)
  else:
    wg_p, wu_p = _padded(w_gate, tile_k, f_pad), _padded(w_up, tile_k, f_pad)
  params = dict(tile_m=tile_m, stages=stages, split_n=split_n, delay=delay)
  hidden = _mosaic_call(functools.partial(_projection_kernel, tile_n=glu_n, **params),
                        (x_p.shape[0], f_pad), TASK_NAME + "_glu", interpret, x_p, wg_p, wu_p)
  if _k_major(x.dtype):
    wd_p = _padded(_tf32(w_down.T), down_cta_n, tile_k)
    wd_p = jnp.pad(wd_p, ((0, 0), (0, f_pad - wd_p.shape[1]))) if wd_p.shape[1] != f_pad else wd_p
    d_pad = wd_p.shape[0]
  else:
    wd_p = _padded(w_down, f_pad, down_cta_n)
    d_pad = wd_p.shape[1]
  out = _mosaic_call(functools.partial(_projection_kernel, tile_n=down_n, **params),
                     (x_p.shape[0], d_pad), TASK_NAME + "_down", interpret, hidden, wd_p)
  return out[:m, :d] if out.shape != (m, d) else out
