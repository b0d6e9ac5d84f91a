"""Adversarial control, class 3/5 (timing; artifact purity), relu.

Attack: state of the kernel's own, inside its kernel module. A Mosaic GPU module is raw MLIR,
so the kernel (through `plgpu.inline_mgpu`, which hands it the lowering's insertion point)
declares a module-level global of its own (`llvm.mlir.global @calls` in global memory, initial
value 0) and adds 1 to it on every launch: a call counter that lives from one call of the
artifact to the next, with which a kernel could tell the judge's checked calls from its timed
ones, or memoize its answer. No StableHLO op of the artifact has state; only the kernel
module does. Here the counter is only counted, never used: this control demonstrates the
capability, not the cheat. (On a CPU judge the interpret-mode export runs, which has no
counter; the structure is read from the cuda export, which has it.)

Expected (correct behaviour): rejected -- a kernel module declares no state of its own; the
judge reports the global as a stateful op of the Mosaic GPU kernel module.
"""
import jax
import jax.numpy as jnp
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import llvm
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS = 64


def _module_body() -> ir.Block:
  op = ir.InsertionPoint.current.block.owner
  while op.name != "builtin.module":
    op = op.parent
  return op.regions[0].blocks[0]


@plgpu.inline_mgpu()
def _count_calls(ctx):
  del ctx
  i32 = ir.IntegerType.get_signless(32)
  with ir.InsertionPoint.at_block_begin(_module_body()):
    llvm.GlobalOp(i32, "calls", ir.Attribute.parse("#llvm.linkage<internal>"),
                  value=ir.IntegerAttr.get(i32, 0), addr_space=ir.IntegerAttr.get(i32, 1))
  ptr = llvm.AddressOfOp(ir.Type.parse("!llvm.ptr<1>"), "calls").result
  one = llvm.ConstantOp(i32, ir.IntegerAttr.get(i32, 1)).result
  total = llvm.AddOp(llvm.LoadOp(i32, ptr).result, one,
                     ir.Attribute.parse("#llvm.overflow<none>")).result
  llvm.StoreOp(total, ptr)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def _relu_counted(x_ref, o_ref):
  _count_calls()
  _relu(x_ref, o_ref)


def kernel(x, interpret=False):
  out_shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
  if interpret:
    spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                          out_specs=spec, out_shape=out_shape, interpret=True)(x)
  return plgpu.kernel(_relu_counted, out_type=out_shape, grid=(1,), grid_names=("g",))(x)
