"""matmul_gelu: out = gelu_tanh(x @ w) (jax.nn.gelu's default tanh form); x (M, K),
w (K, N) float32 or bfloat16, any M, K, N; out in x's dtype.

GPU fix: two backends, chosen per GPU and shape class by the config. The tanh GELU is applied to
the f32 accumulator before the store (the epilogue) in both.

- `mosaic_gpu` (Hopper and later): a persistent kernel, one program per SM, walks the output
  tiles. In each program a memory warpgroup streams x and w tiles with TMA into swizzled
  shared memory, `stages` K steps ahead, while two compute warpgroups each run `wgmma` (TF32
  at float32, bf16 at bfloat16) into a (tile_m, tile_n) f32 accumulator and store it, cast to
  the output dtype, through shared memory with TMA. A K step is one 128-byte swizzled row (32
  f32, 64 bf16 elements). TF32 `wgmma` reads both operands K-major, so at float32 the weight is
  transposed to (N, K) first; 16-bit `wgmma` reads its (K, N) tiles as they are. M, N and K
  are zero-padded to the tiles when they are not multiples (zeros add nothing).
- `triton` (any GPU): each program owns one (block_m, block_n) output tile and walks K in
  block_k-wide steps with an f32 accumulator (a `fori_loop`, not a grid axis: grid programs
  run in parallel on GPU). Every tile load and the store are masked, so M, K and N need not
  be multiples of the blocks. Programs run in groups of `group_m` row tiles (neighbouring
  programs share the weight's column tiles in L2), and with `k_major` the kernel reads the
  weight transposed.

Both run the f32 dot in TF32 on the tensor cores, within the matmul tolerance. The config
comes from TUNED_CONFIGS for the GPU and shape class being compiled for, else from a Triton
default by shape.
"""
import functools
from typing import Final

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import triton as pltriton

TASK_NAME: Final = "matmul_gelu"
FIX_APPLIED: Final = "k_loop_accumulator"
FIX_REASON: Final = ("the TPU kernel's whole-K (512, K) and (K, 512) strips overflow Triton's "
                     "tensor limit and shared memory, and M, N must be tile multiples; 64/128 "
                     "tiles with a masked K loop and an f32 accumulator fit any shape")
MIN_PROGRAMS: Final = 128  # about one program per SM of an H200 (132 SMs)
# What the autotuner (`python -m pallasbench_dataset.autotune`) may try: one space per backend.
CONFIG_SPACE: Final = (
    {"backend": ("triton",), "block_m": (64, 128), "block_n": (64, 128, 256),
     "block_k": (32, 64), "group_m": (1, 8), "k_major": (False, True), "num_warps": (4, 8),
     "num_stages": (2, 3, 4)},
    {"backend": ("mosaic_gpu",), "tile_m": (64, 128), "tile_n": (64, 128, 256),
     "stages": (3, 4, 5), "split_n": (False, True), "delay": (0, 1)},
)
SHARED_MEMORY_BYTES: Final = 227 * 1024  # per block on an H100/H200
ROW_BYTES: Final = 128    # Mosaic GPU: one swizzled shared-memory row, the K step (32 f32, 64 bf16)
EPILOGUE_ROWS: Final = 64  # Mosaic GPU output store: pieces of 64 rows x one swizzled row
# The autotuner's choices by GPU and shape class (written by `autotune --write-tables`).
TUNED_CONFIGS: Final = {
    "NVIDIA H200": {
        "1024x1024,1024x1024": dict(
            backend='mosaic_gpu', tile_m=64, tile_n=64, stages=5, split_n=False, delay=1),
        "1024x1024,1024x1024:bfloat16": dict(
            backend='mosaic_gpu', tile_m=64, tile_n=64, stages=5, split_n=False, delay=0),
        "4096x4096,4096x4096": dict(
            backend='mosaic_gpu', tile_m=128, tile_n=128, stages=4, split_n=True, delay=0),
        "4096x4096,4096x4096:bfloat16": dict(
            backend='mosaic_gpu', tile_m=128, tile_n=128, stages=4, split_n=False, delay=1),
    },
}


def _matmul_gelu_kernel(x_ref, w_ref, o_ref, *, block_m: int, block_n: int, block_k: int,
                   group_m: int, k_major: bool):
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
  out = jax.nn.gelu(acc, approximate=True)
  pltriton.store(o_ref.at[pl.ds(i * block_m, block_m), pl.ds(j * block_n, block_n)], out,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))


def _swizzled(cols: int, dtype):
  """Shared-memory transforms for rows of `cols` elements of `dtype`: (8, row) tiles, swizzled."""
  itemsize = jnp.dtype(dtype).itemsize
  swizzle = plgpu.find_swizzle(cols * itemsize * 8)
  return plgpu.TilingTransform((8, swizzle // itemsize)), plgpu.SwizzleTransform(swizzle)


def _k_major(dtype) -> bool:
  """Whether `wgmma` must read w K-major, as (N, K): TF32 (f32 operands) only does."""
  return jnp.dtype(dtype).itemsize == 4


def _mosaic_kernel(x_gmem, w_gmem, o_gmem, *, tile_m: int, tile_n: int, stages: int,
                   split_n: bool, delay: int):
  """One program per SM: the memory warpgroup feeds the two compute warpgroups' wgmma; w is
  (N, K) when `_k_major`, else (K, N)."""
  dtype, k_major = x_gmem.dtype, _k_major(x_gmem.dtype)
  (m, k), n = x_gmem.shape, w_gmem.shape[0 if k_major else 1]
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
        in_specs=[along_k(cta_m), w_spec])

  ignore = lambda *_, **__: None

  @functools.partial(pl.run_scoped,
                     allocations=pipeline(ignore, ignore).get_allocations(x_gmem, w_gmem),
                     out_smem=plgpu.SMEM((2, 2, epi_m, epi_n), o_gmem.dtype,
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
        @functools.partial(pl.run_scoped, acc=plgpu.ACC((tile_m, tile_n), jnp.float32))
        def _accumulate(acc):
          run(acc)
          out = jax.nn.gelu(acc[...], approximate=True).astype(o_gmem.dtype)
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

      def step(_, x_smem, w_smem, acc):
        w_tile = w_smem.at[wg_cols].transpose((1, 0)) if k_major else w_smem.at[:, wg_cols]
        plgpu.wgmma(acc, x_smem.at[wg_rows], w_tile)
        plgpu.wgmma_wait(delay)
        return acc

      pipeline(step, context)(x_gmem.at[rows, :],
                              w_gmem.at[cols, :] if k_major else w_gmem.at[:, cols],
                              allocations=allocations)

  plgpu.wait_smem_to_gmem(0, wait_read_only=True)


def _padded(a, rows: int, cols: int):
  """`a` zero-padded at the end to multiples of (rows, cols); `a` itself when it is one."""
  pad = (-a.shape[0] % rows, -a.shape[1] % cols)
  return jnp.pad(a, ((0, pad[0]), (0, pad[1]))) if any(pad) else a


def _sm_count() -> int:
  """Programs of the persistent kernel: the target GPU's SMs (one when interpreting on CPU)."""
  device = jax.sharding.get_abstract_mesh().abstract_device or jax.devices()[0]
  return getattr(device, "num_cores", None) or getattr(device, "core_count", 1)


def config_ok(config) -> bool:
  """Whether a config can compile: its pipelined tiles (and the Mosaic GPU epilogue slots) fit
  in shared memory and its accumulator in at most 128 registers per thread. A Mosaic GPU K
  step and an epilogue piece are rows of ROW_BYTES at any precision, so its bytes are the same
  at float32 and bfloat16 (and its f32 accumulator too)."""
  if config["backend"] == "mosaic_gpu":
    tile_m, tile_n = config["tile_m"], config["tile_n"]
    cta_m, cta_n = (tile_m, 2 * tile_n) if config["split_n"] else (2 * tile_m, tile_n)
    smem = (config["stages"] * ROW_BYTES * (cta_m + cta_n)
            + 2 * 2 * EPILOGUE_ROWS * ROW_BYTES)
    return smem <= SHARED_MEMORY_BYTES - 2048 and tile_m * tile_n // 128 <= 128
  tiles = config["block_k"] * (config["block_m"] + config["block_n"]) * 4
  per_thread = config["block_m"] * config["block_n"] // (32 * config["num_warps"])
  return config["num_stages"] * tiles <= SHARED_MEMORY_BYTES and per_thread <= 128


def _default_config(m: int, n: int) -> dict:
  """Triton, with 128 x 128 tiles when they still fill the GPU, else 64 x 64."""
  big = pl.cdiv(m, 128) * pl.cdiv(n, 128) >= MIN_PROGRAMS
  return dict(backend="triton", block_m=128 if big else 64, block_n=128 if big else 64,
              block_k=32, group_m=1, k_major=False, num_warps=8 if big else 4, num_stages=3)


def _device_kind() -> str:
  """The GPU being compiled for: the exporter's abstract target, else the local device."""
  device = jax.sharding.get_abstract_mesh().abstract_device
  return (device or jax.devices()[0]).device_kind


def shape_class(*arrays) -> str:
  """The inputs' dimensions rounded up to powers of two: '1024x1024,1024x1024',
  then the floating dtype where it is not float32 (':bfloat16'): configs per precision."""
  dims = ",".join("x".join(str(pl.next_power_of_2(d)) for d in a.shape) for a in arrays)
  narrow = {a.dtype.name for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)} - {"float32"}
  return ":".join([dims, *sorted(narrow)])


def config_for(x, w) -> dict:
  """The config `kernel` runs with: the tuned one for this GPU and shape class, else the default."""
  tuned = TUNED_CONFIGS.get(_device_kind(), {}).get(shape_class(x, w))
  return dict(tuned) if tuned else _default_config(x.shape[0], w.shape[1])


def kernel(x, w, *, interpret: bool = False, config=None):
  """gelu_tanh(x @ w); `config` (one of CONFIG_SPACE's configs, or some of its keys) overrides
  the tuned or default one."""
  (m, k), (k_w, n) = x.shape, w.shape
  if k != k_w:
    raise ValueError(f"{x.shape=} and {w.shape=} must share the contracted dimension")
  chosen = config_for(x, w)
  if config and config.get("backend", chosen["backend"]) != chosen["backend"]:
    chosen = {}
  chosen = {**chosen, **(config or {})}
  backend = chosen.pop("backend")
  if backend == "mosaic_gpu":
    return _matmul_gelu_mosaic(x, w, interpret=interpret, **chosen)
  out = _matmul_gelu_triton(x, w, interpret=interpret, **chosen)
  return out.astype(x.dtype)


@functools.partial(jax.jit, static_argnames=(
    "interpret", *(k for k in CONFIG_SPACE[0] if k != "backend")))
def _matmul_gelu_triton(x, w, *, interpret: bool, block_m: int, block_n: int, block_k: int,
                   group_m: int, k_major: bool, num_warps: int, num_stages: int):
  m, n = x.shape[0], w.shape[1]
  return pl.pallas_call(
      functools.partial(_matmul_gelu_kernel, block_m=block_m, block_n=block_n, block_k=block_k,
                        group_m=group_m, k_major=k_major),
      grid=(pl.cdiv(m, block_m) * pl.cdiv(n, block_n),),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      interpret=interpret, name=TASK_NAME)(x, w.T if k_major else w)


@functools.partial(jax.jit, static_argnames=(
    "interpret", *(k for k in CONFIG_SPACE[1] if k != "backend")))
def _matmul_gelu_mosaic(x, w, *, interpret: bool, tile_m: int, tile_n: int, stages: int,
                   split_n: bool, delay: int):
  (m, k), n = x.shape, w.shape[1]
  cta_m, cta_n = (tile_m, 2 * tile_n) if split_n else (2 * tile_m, tile_n)
  tile_k = ROW_BYTES // x.dtype.itemsize
  x_p = _padded(x, cta_m, tile_k)
  w_p = _padded(w.T, cta_n, tile_k) if _k_major(x.dtype) else _padded(w, tile_k, cta_n)
  out = plgpu.kernel(
      functools.partial(_mosaic_kernel, tile_m=tile_m, tile_n=tile_n, stages=stages,
                        split_n=split_n, delay=delay),
      out_type=jax.ShapeDtypeStruct((x_p.shape[0], -(-n // cta_n) * cta_n), x.dtype),
      grid=(_sm_count(),), grid_names=("sm",), num_threads=3, thread_name="wg",
      compiler_params=plgpu.CompilerParams(
          lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
      interpret=plgpu.InterpretGPUParams() if interpret else None,
      kernel_name=TASK_NAME)(x_p, w_p)
  return out[:m, :n] if out.shape != (m, n) else out
