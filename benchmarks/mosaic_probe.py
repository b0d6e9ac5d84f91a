"""A TF32 matmul on Mosaic GPU (TMA, swizzled shared memory, `wgmma`, warp specialisation),
timed against XLA and the Triton kernel: the probe for issue #12's Mosaic GPU core.

    PYTHONPATH=. python -m benchmarks.mosaic_probe [--sizes 1024 4096] [--out FILE]

Each config is compiled, checked against a float64 product (the judge's matmul tolerance
is not needed for a probe: the figure printed is the max relative error), and timed with
the project's CUPTI timing. A config that fails prints its error and the probe goes on.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import functools
import itertools
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu


@dataclasses.dataclass(frozen=True)
class Config:
  tile_m: int = 128      # rows of the output tile each compute warpgroup owns
  tile_n: int = 128      # columns of the output tile each compute warpgroup owns
  tile_k: int = 32       # 32 f32 = one 128-byte swizzle row
  stages: int = 4        # K steps in flight
  split_n: bool = True   # the two compute warpgroups split N (else M)
  epi_n: int = 32        # columns per epilogue store (one 128-byte swizzle row)
  group: int = 8         # tile rows walked together (planar snake width)
  delay: int = 0         # wgmma groups left in flight (a stage is released one step later)


def _transforms(cols: int):
  swizzle = plgpu.find_swizzle(cols * 4 * 8)
  return (plgpu.TilingTransform((8, swizzle // 4)), plgpu.SwizzleTransform(swizzle))


def matmul(x, y_t, config: Config, num_sms: int):
  """x (M, K) @ y_t.T, y_t (N, K) K-major; M, N, K multiples of the tiles."""
  (m, k), n = x.shape, y_t.shape[0]
  c = config
  cta_m = c.tile_m * (1 if c.split_n else 2)
  cta_n = c.tile_n * (2 if c.split_n else 1)
  if m % cta_m or n % cta_n or k % c.tile_k:
    raise ValueError(f"{x.shape=} {y_t.shape=} are not multiples of {cta_m}x{cta_n}x{c.tile_k}")
  tiles_m, tiles_n, steps = m // cta_m, n // cta_n, k // c.tile_k
  operand = _transforms(c.tile_k)
  out_tf = _transforms(c.epi_n)

  def body(x_gmem, y_gmem, o_gmem):
    def pipeline(step_body, context):
      return plgpu.emit_pipeline_warp_specialized(
          step_body, grid=(steps,), memory_registers=40, wg_axis="wg", num_compute_wgs=2,
          max_concurrent_steps=c.stages, compute_context=context,
          in_specs=[plgpu.BlockSpec((cta_m, c.tile_k), lambda s: (0, s), transforms=operand,
                                    memory_space=plgpu.SMEM, delay_release=c.delay),
                    plgpu.BlockSpec((cta_n, c.tile_k), lambda s: (0, s), transforms=operand,
                                    memory_space=plgpu.SMEM, delay_release=c.delay)])

    nothing = lambda *_, **__: None

    @functools.partial(pl.run_scoped,
                       allocs=pipeline(nothing, nothing).get_allocations(x_gmem, y_gmem),
                       out_smem=plgpu.SMEM((2, 2, 64, c.epi_n), jnp.float32, transforms=out_tf),
                       collective_axes="wg")
    def scope(allocs, out_smem):
      wg = lax.axis_index("wg")

      @plgpu.nd_loop((tiles_m * tiles_n,), collective_axes="sm")
      def tile_loop(info):
        (t,) = info.index
        i, j = plgpu.planar_snake(t, (tiles_m, tiles_n), 1, c.group)
        rows = pl.ds(i * cta_m, cta_m)
        cols = pl.ds(j * cta_n, cta_n)
        wg_rows = slice(None) if c.split_n else pl.ds(wg * c.tile_m, c.tile_m)
        wg_cols = pl.ds(wg * c.tile_n, c.tile_n) if c.split_n else slice(None)

        def context(run):
          @functools.partial(pl.run_scoped, acc=plgpu.ACC((c.tile_m, c.tile_n), jnp.float32))
          def accumulate(acc):
            run(acc)
            out = acc[...]
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)
            for a in range(c.tile_m // 64):
              for b in range(c.tile_n // c.epi_n):
                slot = (a * (c.tile_n // c.epi_n) + b) % 2
                plgpu.wait_smem_to_gmem(1, wait_read_only=True)
                out_smem[wg, slot] = out[a * 64:(a + 1) * 64, b * c.epi_n:(b + 1) * c.epi_n]
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(
                    out_smem.at[wg, slot],
                    o_gmem.at[rows, cols].at[wg_rows, wg_cols]
                    .at[pl.ds(a * 64, 64), pl.ds(b * c.epi_n, c.epi_n)])

        def step(_, x_smem, y_smem, acc):
          plgpu.wgmma(acc, x_smem.at[wg_rows], y_smem.at[wg_cols].transpose((1, 0)))
          plgpu.wgmma_wait(c.delay)
          return acc

        pipeline(step, context)(x_gmem.at[rows, :], y_gmem.at[cols, :], allocations=allocs)

    plgpu.wait_smem_to_gmem(0, wait_read_only=True)

  return plgpu.kernel(
      body, out_type=jax.ShapeDtypeStruct((m, n), jnp.float32), grid=(num_sms,),
      grid_names=("sm",), num_threads=3, thread_name="wg",
      compiler_params=plgpu.CompilerParams(
          lowering_semantics=plgpu.LoweringSemantics.Warpgroup))(x, y_t)


CONFIGS = [Config(tile_m=tm, tile_n=tn, stages=s, split_n=sn, delay=d)
           for tm, tn, s, sn, d in itertools.product((64, 128), (64, 128, 256), (3, 4, 5),
                                                     (True, False), (0, 1))]


def fits(c: Config) -> bool:
  """Shared memory (pipeline stages and epilogue slots) and accumulator registers."""
  cta_m = c.tile_m * (1 if c.split_n else 2)
  cta_n = c.tile_n * (2 if c.split_n else 1)
  smem = c.stages * c.tile_k * (cta_m + cta_n) * 4 + 2 * 2 * 64 * c.epi_n * 4
  return smem <= 225 * 1024 and c.tile_m * c.tile_n // 128 <= 128


def _compile(fn, x, y):
  try:
    return fn.lower(x, y).compile(), None
  except Exception as e:  # pylint: disable=broad-except  (a config that does not compile)
    return None, f"{type(e).__name__}: {str(e)[:300]}"


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
  parser.add_argument("--out", help="JSON Lines file for the figures")
  args = parser.parse_args(argv)
  from pallasbench_dataset.evaluation import timing  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.kernels import load_kernel  # pylint: disable=import-outside-toplevel
  triton = load_kernel("gpu", "matmul")
  device = jax.devices()[0]
  sms = device.core_count
  print(f"{device.device_kind}, {sms} SMs, jax {jax.__version__}", flush=True)
  rows = []
  for size in args.sizes:
    kx, ky = jax.random.split(jax.random.key(size))
    sets = [(jax.random.normal(jax.random.fold_in(kx, i), (size, size), jnp.float32),
             jax.random.normal(jax.random.fold_in(ky, i), (size, size), jnp.float32)
             / np.sqrt(size)) for i in range(4)]
    x, y = sets[0]
    want = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
    configs = [c for c in CONFIGS if fits(c)]
    fns = [jax.jit(lambda a, b, c=c: matmul(a, b.T, c, sms)) for c in configs]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
      compiled = list(pool.map(lambda f: _compile(f, x, y), fns))
    print(f"size {size}: {len(configs)} configs compiled in "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    timed, names = [jax.jit(lambda a, b: a @ b), jax.jit(triton.kernel)], ["xla", "triton"]
    for c, (exe, error) in zip(configs, compiled):
      row = dict(size=size, **dataclasses.asdict(c), error=error)
      if exe is not None:
        try:
          got = np.asarray(exe(x, y))
          row["max_rel_err"] = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
          if row["max_rel_err"] < 1e-2:
            timed.append(exe)
            names.append(len(rows))
        except Exception as e:  # pylint: disable=broad-except
          row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
      rows.append(row)
    results = timing.time_interleaved(timed, [sets] * len(timed), iterations=30, rounds=2,
                                      warmup=2, method=timing.available_method())
    base = {}
    for name, t in zip(names, results):
      ms = t.samples.median_ms
      if isinstance(name, str):
        base[name] = ms
        print(f"size {size}: {name} {ms:.4f} ms, {2 * size ** 3 / ms / 1e9:.0f} TFLOP/s",
              flush=True)
      else:
        rows[name].update(ms=ms, tflops=round(2 * size ** 3 / ms / 1e9, 1))
    for row in rows:
      if row["size"] == size:
        row.update(xla_ms=base["xla"], triton_ms=base["triton"])
        print(json.dumps(row), flush=True)
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      f.writelines(json.dumps(r) + "\n" for r in rows)
  return 0


if __name__ == "__main__":
  sys.exit(main())
