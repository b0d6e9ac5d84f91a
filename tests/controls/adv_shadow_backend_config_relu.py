"""Adversarial control, class 5 (the module analysed is not the module run), relu.

Attack: two backend configs on one Triton call. jax's mlir.custom_call puts a kernel call's
dictionary config in the unregistered attribute `mhlo.backend_config` and leaves the op's own
`backend_config` the empty string; the judge (module_analysis._backend_fields) reads the kernel
module, its name and grid from `mhlo.backend_config` alone. XLA's StableHLO-to-HLO translation
takes the op's `backend_config` string whenever it is not empty and ignores
`mhlo.backend_config` then (jaxlib 0.11.2: a call with backend_config = "{name = \"EVIL\" ...}"
and mhlo.backend_config = {name = "GOOD" ...} becomes `custom-call(...),
backend_config={name = "EVIL" ...}`), and XLA's Triton emitter parses that string as the
call's dictionary (name, ir, num_warps, grid). The candidate wraps jax's mlir.custom_call in the
exporter: the honest relu module stays in `mhlo.backend_config` (what the analysis, the
kernel-state rules and the copy check read) and a second module, in the printed dictionary,
goes in `backend_config` (what a GPU judge compiles and runs). Here the second module is the
first with round 9's `llvm.module_asm` counter declaration (`.global .u32 pallasbench_calls`),
an attribute kernel_state refuses: any Triton module at all runs unread (a global counter, a
stale-buffer memo, a shipped kernel's module past the copy check). In interpret mode (the CPU
judge's run) the kernel is a plain relu. Not run on a GPU.

Observed (CPU judge at 5de4971): pass, no reason, the record's backends ['triton'] (the honest
module read). Not run on a GPU: that XLA compiles the shadow config is read from jaxlib's own
StableHLO-to-HLO translation (xla_client's mlir_module_to_xla_computation) of this module's
export.

Expected (correct behaviour): rejected -- a kernel call whose own backend_config is not empty
(XLA would compile it, not the dictionary the judge read) is refused, or the judge reads the
config XLA reads.
"""
import jax
import jax.numpy as jnp
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
from jax._src.pallas.triton import lowering as triton_lowering
from jax.experimental import pallas as pl

ROWS = 8
MODULE_ASM = ".global .align 4 .u32 pallasbench_calls;"

_custom_call = mlir.custom_call
_lower = triton_lowering.lower_jaxpr_to_triton_module
_LOWERED = []  # the Triton modules lowered, the last one the call being built


def _recording(*args, **kwargs):
  result = _lower(*args, **kwargs)
  _LOWERED.append(result.module)
  return result


def _shadowed(call_target_name, *args, backend_config="", **kwargs):
  op = _custom_call(call_target_name, *args, backend_config=backend_config, **kwargs)
  if call_target_name != "__gpu$xla.gpu.triton" or not isinstance(backend_config, dict):
    return op
  module = _LOWERED.pop()  # already serialized into backend_config["ir"], as it was
  module.operation.attributes["llvm.module_asm"] = ir.ArrayAttr.get(
      [ir.StringAttr.get(MODULE_ASM)])
  shadow = dict(backend_config, ir=ir.StringAttr.get(str(module)))
  op.operation.attributes["backend_config"] = ir.StringAttr.get(str(ir.DictAttr.get(shadow)))
  return op


triton_lowering.lower_jaxpr_to_triton_module = _recording
mlir.custom_call = _shadowed


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
