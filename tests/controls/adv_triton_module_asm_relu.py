"""Adversarial control, class 3/5 (timing; artifact purity), relu -- a call counter declared in
the Triton module's module-level assembly.

Attack: kernel_global's counter (state of the kernel's own, in its kernel module) moved where
the module analysis does not read. The Triton module that travels in the
`__gpu$xla.gpu.triton` call's backend config gets the module attribute `llvm.module_asm`
(the candidate wraps Pallas' `lower_jaxpr_to_triton_module` at import, in the exporter, and
sets the attribute on the module it returns). MLIR's LLVM translation appends that text to the
kernel's LLVM module as module-level assembly, which the NVPTX backend prints verbatim at the
top of the PTX: `.global .align 4 .u32 pallasbench_calls;` declares a device global that lives
from one call of the artifact to the next. The kernel's inline PTX loads it, adds one and stores
it back (`ld.global.u32 %c, [pallasbench_calls]` ...): its text declares nothing (`.global`
only as the qualifier of ld/st, which _PTX_DECLARATION lets through) and reaches no buffer of
the call, so neither ptx_state nor the write tracing has anything to say, and kernel_state's
top-level check reads the module's ops, never its attributes. The same attribute can hold a
`.func` that an inline `call` runs: any PTX at all, past the inline-PTX check. The text also lands
verbatim in the PTX a GPU judge reads from its dump folder into the record's `ptx` artifact,
unbounded but by the artifact's size (64 MiB). Here the counter
is only counted (0 x its value reaches the output): the capability, not the cheat. In
interpret mode (the CPU judge's run) the kernel is a plain relu. Not run on a GPU.

Closed in session 28: kernel_state._MODULE_ATTRIBUTES: rejected, the attribute named.

Expected (correct behaviour): rejected -- a kernel module carries no attribute its lowering
does not set (llvm.module_asm above all): the judge reports it as state of the Triton module.
"""
import functools

import jax
import jax.numpy as jnp
from jax._src.lib.mlir import ir
from jax._src.pallas.triton import lowering as triton_lowering
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

ROWS = 8
MODULE_ASM = (".global .align 4 .u32 pallasbench_calls;",)
_BUMP = ("{ .reg .u32 %c; ld.global.u32 %c, [pallasbench_calls]; add.u32 %c, %c, 1; "
         "st.global.u32 [pallasbench_calls], %c; cvt.rn.f32.u32 $0, %c; }")

_lower = triton_lowering.lower_jaxpr_to_triton_module


@functools.wraps(_lower)
def _lower_with_module_asm(*args, **kwargs):
  result = _lower(*args, **kwargs)
  with result.module.context:
    result.module.operation.attributes["llvm.module_asm"] = ir.ArrayAttr.get(
        [ir.StringAttr.get(s) for s in MODULE_ASM])
  return result


triton_lowering.lower_jaxpr_to_triton_module = _lower_with_module_asm


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def _relu_counting(x_ref, o_ref):
  x = x_ref[...]
  (calls,) = pltriton.elementwise_inline_asm(
      _BUMP, args=[x], constraints="=f,f", pack=1,
      result_shape_dtypes=[jax.ShapeDtypeStruct(x.shape, jnp.float32)])
  # the asm's value is used (0 x a finite count), so the compiler keeps it
  o_ref[...] = jnp.maximum(x, 0.0) + 0.0 * calls


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  grid = (pl.cdiv(x.shape[0], ROWS),)
  body = _relu if interpret else _relu_counting
  return pl.pallas_call(body, grid=grid, in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
