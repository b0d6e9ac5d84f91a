"""#37, the float32 stragglers: can a Mosaic GPU kernel read y (K, N) as it lies, with no XLA
transpose before it? TF32 `wgmma` reads both shared-memory operands K-major, so today every
float32 contraction first transposes y in XLA (7% of matmul's time at `large`, 27% of
batched_matmul's). Two ways round it, each tried on one (64, 32) x (32, 64) tile:

- `registers`: out^T = y^T @ x^T with y^T as wgmma's A operand in registers;
- `smem`: the compute warpgroup loads y's tile through a transposed view of its shared memory
  into registers (WGMMA layout) and stores it into a K-major buffer, which wgmma then reads.

Each is lowered for the abstract H200 (what CI can check) and, where it lowers, run in Mosaic
GPU's interpret mode against a float64 product. Prints one line per way. CPU only:

    .venv/bin/python docs/runs/h200-2026-12-06-session22/tf32_transpose_probe.py
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from pallasbench_dataset import lowering

TM, TK, TN = 64, 32, 64  # one K step of 128 bytes at float32


def _swizzled(cols: int):
  swizzle = plgpu.find_swizzle(cols * 4 * 8)
  return plgpu.TilingTransform((8, swizzle // 4)), plgpu.SwizzleTransform(swizzle)


def _body(x_gmem, y_gmem, o_gmem, *, way: str):
  out_shape = (TN, TM) if way == "registers" else (TM, TN)

  @functools.partial(pl.run_scoped,
                     x_smem=plgpu.SMEM((TM, TK), jnp.float32, transforms=_swizzled(TK)),
                     y_smem=plgpu.SMEM((TK, TN), jnp.float32, transforms=_swizzled(TN)),
                     yt_smem=plgpu.SMEM((TN, TK), jnp.float32, transforms=_swizzled(TK)),
                     o_smem=plgpu.SMEM(out_shape, jnp.float32,
                                       transforms=_swizzled(out_shape[1])),
                     bar=plgpu.Barrier(num_arrivals=2))
  def _scope(x_smem, y_smem, yt_smem, o_smem, bar):
    plgpu.copy_gmem_to_smem(x_gmem, x_smem, bar)
    plgpu.copy_gmem_to_smem(y_gmem, y_smem, bar)
    plgpu.barrier_wait(bar)
    y_t = plgpu.load(y_smem.T, layout=plgpu.Layout.WGMMA)  # (TN, TK) in registers

    @functools.partial(pl.run_scoped, acc=plgpu.ACC(out_shape, jnp.float32))
    def _accumulate(acc):
      if way == "registers":
        plgpu.wgmma(acc, y_t, x_smem.T)
      else:
        yt_smem[...] = y_t
        plgpu.commit_smem()
        plgpu.wgmma(acc, x_smem, yt_smem.T)
      plgpu.wgmma_wait(0)
      o_smem[...] = acc[...]
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(o_smem, o_gmem)
    plgpu.wait_smem_to_gmem(0)


def _call(way: str, interpret: bool):
  out_shape = (TN, TM) if way == "registers" else (TM, TN)
  return plgpu.kernel(
      functools.partial(_body, way=way), out_type=jax.ShapeDtypeStruct(out_shape, jnp.float32),
      compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
      interpret=plgpu.InterpretGPUParams() if interpret else None)


def main() -> None:
  structs = (jax.ShapeDtypeStruct((TM, TK), jnp.float32),
             jax.ShapeDtypeStruct((TK, TN), jnp.float32))
  x = jax.random.normal(jax.random.key(0), (TM, TK))
  y = jax.random.normal(jax.random.key(1), (TK, TN))
  want = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
  for way in ("registers", "smem"):
    try:
      with lowering.abstract_gpu():
        lowering.export_for("cuda", jax.jit(_call(way, False)), *structs)
    except Exception as e:  # pylint: disable=broad-except  (the answer is which one it is)
      print(f"{way}: does not lower for the H200: {type(e).__name__}: {str(e)[:160]}")
      continue
    got = np.asarray(jax.jit(_call(way, True))(x, y), np.float64)
    got = got.T if way == "registers" else got
    print(f"{way}: lowers for the H200; interpret mode max |error| {np.max(np.abs(got - want)):.2e}")


if __name__ == "__main__":
  main()
