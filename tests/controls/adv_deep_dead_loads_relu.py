"""Adversarial control, class 5 (modules written to stop the analysis), relu.

Attack: the cost of kernel_state._StoredFirst. An honest Triton relu whose module (the
candidate wraps jax's mlir.custom_call in the exporter and swaps the bytecode in the call's
`ir`; the module's indented text, which the exporter also reports, stays the honest one's, as
the text of a deep nest would outgrow its 4 MiB) also holds, before
its `tt.return`, DEPTH nested `scf.if`s and, in the innermost, LOADS loads of the output
pointer whose values nothing uses (dead: the GPU compile drops them). read_buffers asks
_StoredFirst about every load of a traced buffer before it looks at whether its value is used,
and _StoredFirst walks from the load up through every block that holds it, looking for an
earlier store of its address: each of these loads walks DEPTH blocks and finds none. Its
docstring's claim (each block's stores read once, so linear in the kernel's ops) holds for
the blocks, not for the walks: the work is LOADS x DEPTH, here 30,000 x 3,000 block lookups
(about 1.4 us each: some 125 s against the helper's 60 s; the same loads 10 levels deep take
about 10 s) in a module of about 39,000 ops, under the
analysis' 200,000-op budget that is meant to bound its time. The nesting stays where MLIR's
recursive parser and walk keep within an 8 MiB stack (4,000 levels overflow it). In interpret
mode (the CPU judge's run) the kernel is a plain relu.

Observed (CPU judge at 5de4971): rejected after 60 s, "the module analysis took longer than 60 s
... the artifact's module cannot be read safely": fail-closed, but a minute of the judge's
helper for every such candidate, where the op budget was to bound it.

Expected (correct behaviour): pass, within the analysis' time -- the loads are dead (no value
used, nothing of a former call reaches an output) and the relu is honest; a judge whose
_StoredFirst work is linear in the ops (a walk's answer memoized per block and address, or the
nesting depth bounded) reads this module in seconds.
"""
import io

import jax
import jax.numpy as jnp
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
from jax._src.pallas.triton import lowering as triton_lowering
from jax.experimental import pallas as pl

ROWS = 8
DEPTH = 3000
LOADS = 30_000

_lower = triton_lowering.lower_jaxpr_to_triton_module
_custom_call = mlir.custom_call
_LOWERED = []  # the Triton modules lowered, the last one the call being built


def _nest() -> str:
  lines = ["%pb_t = arith.constant true"]
  lines += [f"scf.if %pb_t {{ %pb_l{k} = tt.load %arg1 : !tt.ptr<f32>" for k in range(DEPTH)]
  lines += [f"%pb_x{j} = tt.load %arg1 : !tt.ptr<f32>" for j in range(LOADS)]
  lines += ["}"] * DEPTH
  return "\n".join(lines) + "\n"


def _recording(*args, **kwargs):
  result = _lower(*args, **kwargs)
  _LOWERED.append(result.module)
  return result


def _deepened(call_target_name, *args, backend_config="", **kwargs):
  if call_target_name == "__gpu$xla.gpu.triton" and isinstance(backend_config, dict):
    module = _LOWERED.pop()
    text = module.operation.get_asm()
    at = text.rindex("tt.return")
    with module.context:
      deep = ir.Module.parse(text[:at] + _nest() + text[at:])
    buffer = io.BytesIO()
    deep.operation.write_bytecode(buffer)
    backend_config = dict(backend_config, ir=ir.StringAttr.get(buffer.getvalue()))
  return _custom_call(call_target_name, *args, backend_config=backend_config, **kwargs)


triton_lowering.lower_jaxpr_to_triton_module = _recording
mlir.custom_call = _deepened


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
