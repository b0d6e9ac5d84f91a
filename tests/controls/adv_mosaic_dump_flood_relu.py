"""Adversarial control, class 5 (an unbounded judge: disk), relu.

Attack: an honest Mosaic GPU relu whose kernel module carries one extra attribute, an 8 MiB
string (`pallasbench.ballast`; any name: nothing reads a Mosaic GPU module's attributes).

A GPU judge and its compile stage set MOSAIC_GPU_DUMP_TO (compile_profile.dump_environment) to
collect Mosaic GPU's PTX. With that variable set, jaxlib turns on every Mosaic GPU dump
(dump.cc `GetOrSetDumpOptionsForModule`: mlir_passes, ptx, ptxas, sass), and `RunPasses`
(custom_call.cc) prints the whole module, with debug info and no elision, before and after
each of the ~35 passes of its pipeline into `<basename>.mlir-passes.log`: some 70 copies of
the attribute, 560 MB of disk for this module, in every compile of it (the compile stage, the
judge's own compile, the memcheck process). The artifact may hold 64 MiB (protocol
MAX_ARTIFACT_BYTES): about 4.5 GB a compile. The judge clears its dump folder after a compile,
but not while one runs, and not what a `../` basename put elsewhere (adv_mosaic_dump_path):
concurrent judges fill the disk, the failure compile_profile's EMITTERS filter was written
to stop for XLA's own Triton dumps (3 GB a minute a compile; 15 at once filled 64 GB).

The same switch turns on the SASS dump: jaxlib's assembly-to-binary pass calls `DumpSass`, which
writes the cubin to a fresh `/tmp/mosaic-gpu-XXXXXX/kernel.bin` (fixed under /tmp, whatever
TMPDIR says) and never removes it (dump.cc: "TODO(apaszke): Unlink in destructor"), then runs
nvdisasm on it. Every Mosaic GPU compile of a GPU judge, honest ones included, leaves one such
folder behind, as large as the kernel's code.

On a CPU judge no dump folder is set and nothing of this runs: the control shows the artifact is
admitted (no GPU here).

Closed in session 28: no process that compiles a candidate sets MOSAIC_GPU_DUMP_TO (the PTX
is printed and collected, compile_profile.dump_environment), and a kernel module carries only
the attributes its lowering emits (kernel_state._MODULE_ATTRIBUTES): rejected, the attribute
named.

Expected (correct behaviour): rejected -- or rather, the trusted side never turns on Mosaic GPU's
pass dumps (MOSAIC_GPU_DUMP_PTX alone, not MOSAIC_GPU_DUMP_TO), and a kernel module's size
and attributes are bounded before anything compiles it.
"""
import jax
import jax.numpy as jnp
from jax._src.lib.mlir import ir
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS = 64
BALLAST_BYTES = 8 << 20


@plgpu.inline_mgpu()
def _ballast(ctx):
  del ctx
  op = ir.InsertionPoint.current.block.owner
  while op.name != "builtin.module":
    op = op.parent
  op.attributes["pallasbench.ballast"] = ir.StringAttr.get("x" * BALLAST_BYTES)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def _relu_with_ballast(x_ref, o_ref):
  _ballast()
  _relu(x_ref, o_ref)


def kernel(x, interpret=False):
  out_shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
  if interpret:
    spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                          out_specs=spec, out_shape=out_shape, interpret=True)(x)
  return plgpu.kernel(_relu_with_ballast, out_type=out_shape, grid=(1,), grid_names=("g",))(x)
