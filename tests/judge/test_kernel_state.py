"""A kernel module declares no state of its own: the stateful ops the judge looks for inside the
Triton and Mosaic GPU modules its kernel calls carry.

An exported kernel must be a pure function of its inputs, and the module analysis refuses
StableHLO ops with state; but the kernels' own modules are raw MLIR (a Mosaic GPU module is
llvm/nvvm/memref/gpu ops, inline PTX and the host code that launches the kernel), where a
module-level global keeps its value from one call to the next: a kernel that counts its calls
can tell the judge's checked calls from its timed ones, or memoize its answer. The hostile
artifacts here are a shipped Mosaic GPU kernel's export (kernels_gpu/matmul.py at `medium`,
the H200's tuned Mosaic GPU config) with its kernel module edited the way a candidate would,
re-serialized as the stable form stores it; the honest side is every shipped GPU kernel.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable

import jax
import jax.numpy as jnp
import pytest
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu_triton

from pallasbench_dataset.evaluation.judge import fingerprint, kernel_state
from pallasbench_dataset.evaluation.judge.module_analysis import (
    ModuleReport, analyze_module, module_reasons)
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.tasks import get_task, list_tasks

PREFIX = "stable_mosaic_gpu."


def _export_text(task: str, size: str, fn=None) -> str:
  fn = fn or functools.partial(load_kernel("gpu", task).kernel, interpret=False)
  return export_for("cuda", fn, *get_task(task).input_structs(size)).mlir_module()


@functools.cache
def _matmul_medium() -> str:
  text = _export_text("matmul", "medium")
  assert "mosaic_gpu_v2" in text  # the H200's tuned config lowers it to Mosaic GPU
  return text


def _reasons(report: ModuleReport, task: str = "matmul", size: str = "medium") -> list[str]:
  spec = get_task(task)
  dims = spec.dims(size)
  return module_reasons(report, task_flops=spec.flops(dims), output_elements=1,
                        task_bytes=spec.io_bytes(dims))


def _replace_kernel_module(text: str, target: str, key: str,
                           edit: Callable[[bytes], bytes]) -> str:
  """`text` with the kernel module (backend_config field `key`) of every `target` call
  replaced by what `edit` makes of it."""
  with mlir.make_ir_context():
    module = ir.Module.parse(text)

    def visit(op):
      op = op.operation
      if (op.name == "stablehlo.custom_call"
          and ir.StringAttr(op.attributes["call_target_name"]).value == target):
        config = ir.DictAttr(op.attributes["mhlo.backend_config"])
        fields = {n.name: n.attr for n in config}
        fields[key] = ir.StringAttr.get(edit(ir.StringAttr(fields[key]).value_bytes))
        op.attributes["mhlo.backend_config"] = ir.DictAttr.get(fields)
      return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return mlir.module_to_string(module)


def _edit_mosaic(text: str, edit: Callable[[ir.Module], None]) -> str:
  """`text` with its Mosaic GPU kernel module edited by `edit` (on the parsed stable form, ops
  unregistered) and written back as bytecode, the form the stable serialization stores."""
  def rewrite(data: bytes) -> bytes:
    context = fingerprint._fresh_context()  # pylint: disable=protected-access
    from jax._src.lib import mosaic_gpu_dialect  # pylint: disable=import-outside-toplevel
    mosaic_gpu_dialect.register_dialect(context)
    context.allow_unregistered_dialects = True
    readable = fingerprint._OLD_DIALECT_ATTR.sub(  # pylint: disable=protected-access
        lambda m: b"#%s.%s<%s>" % m.groups(), data)
    with context, ir.Location.unknown():
      module = ir.Module.parse(readable)
      edit(module)
      out = io.BytesIO()
      module.operation.write_bytecode(out)
      return out.getvalue()

  return _replace_kernel_module(text, "mosaic_gpu_v2", "module", rewrite)


def _launch_block(module: ir.Module) -> ir.Block:
  """The first block of the kernel's device code (the body of its gpu.launch)."""
  found = []

  def visit(op):
    if op.operation.name == PREFIX + "gpu.launch" and not found:
      found.append(op.operation.regions[0].blocks[0])
    return ir.WalkResult.ADVANCE

  module.operation.walk(visit)
  return found[0]


def _op(op_name: str, operands=(), results=(), **attributes) -> ir.Operation:
  return ir.Operation.create(
      PREFIX + op_name, operands=list(operands), results=[ir.Type.parse(t) for t in results],
      attributes={k: ir.Attribute.parse(v) for k, v in attributes.items()})


def _add_global(module: ir.Module, sym: str = "calls", *, space: int = 1,
                value: str | None = "0 : i32", type_: str = "i32",
                linkage: str = "internal") -> None:
  attrs = dict(addr_space=f"{space} : i32", global_type=type_, sym_name=f'"{sym}"',
               linkage=f"#llvm.linkage<{linkage}>", visibility_="0 : i64")
  if value is not None:
    attrs["value"] = value
  op = ir.Operation.create(PREFIX + "llvm.mlir.global", regions=1,
                           attributes={k: ir.Attribute.parse(v) for k, v in attrs.items()})
  ir.InsertionPoint.at_block_begin(module.body).insert(op)


def _count_calls(module: ir.Module, sym: str = "calls", space: int = 1) -> None:
  """A device-side call counter: `calls += 1` in the kernel's first block."""
  at = ir.InsertionPoint.at_block_begin(_launch_block(module))
  ptr = _op("llvm.mlir.addressof", results=[f"!llvm.ptr<{space}>"], global_name=f"@{sym}")
  one = _op("llvm.mlir.constant", results=["i32"], value="1 : i32")
  for op in (ptr, one):
    at.insert(op)
  old = _op("llvm.load", [ptr.result], ["i32"])
  new = _op("llvm.add", [old.result, one.result], ["i32"])
  store = _op("llvm.store", [new.result, ptr.result])
  for op in (old, new, store):
    at.insert(op)


def _stateful(text: str) -> tuple[tuple[str, ...], list[str]]:
  report = analyze_module(text)
  return report.stateful_ops, [r for r in _reasons(report) if r.startswith("stateful op")]


# ---------------------------------------------------------------------------------------------
# The attack: a global of its own in a shipped Mosaic GPU kernel's module.

def test_a_global_call_counter_in_a_mosaic_gpu_module_is_stateful():
  def counter(module):
    _add_global(module)
    _count_calls(module)

  hostile = _edit_mosaic(_matmul_medium(), counter)
  assert hostile != _matmul_medium()
  found, reasons = _stateful(hostile)
  assert any("llvm.mlir.global @calls" in f and "Mosaic GPU kernel module" in f
             for f in found), found
  assert any("llvm.mlir.addressof @calls" in f for f in found), found
  assert reasons and "pure function of its inputs" in reasons[0]


def test_the_shipped_matmul_module_rewritten_unchanged_declares_no_state():
  """The control of the edits above: parsing and writing back the module changes nothing the
  check sees."""
  same = _edit_mosaic(_matmul_medium(), lambda module: None)
  assert _stateful(same) == ((), [])


def _add_memref_global(module: ir.Module) -> None:
  op = ir.Operation.create(PREFIX + "memref.global", attributes={
      "sym_name": ir.StringAttr.get("memo"), "type": ir.TypeAttr.get(ir.Type.parse("memref<4xf32>")),
      "initial_value": ir.Attribute.parse("dense<0.0> : tensor<4xf32>")})
  ir.InsertionPoint.at_block_begin(module.body).insert(op)
  get = _op("memref.get_global", results=["memref<4xf32>"], name="@memo")
  ir.InsertionPoint.at_block_begin(_launch_block(module)).insert(get)


def _reshape_scratch(module: ir.Module) -> None:
  """Mosaic GPU's own global, made writable: global memory, a size and an initializer."""
  for op in module.body.operations:
    if "sym_name" in op.operation.attributes and str(
        op.operation.attributes["sym_name"]) == '"global_scratch"':
      op.operation.attributes["addr_space"] = ir.Attribute.parse("1 : i32")
  _count_calls(module, "global_scratch", space=1)


def _external_function(module: ir.Module) -> None:
  """A libc function declared for the host code, which runs in the judge's process."""
  op = ir.Operation.create(PREFIX + "func.func", regions=1, attributes={
      "sym_name": ir.StringAttr.get("getpid"), "sym_visibility": ir.StringAttr.get("private"),
      "function_type": ir.TypeAttr.get(ir.Type.parse("() -> i32"))})
  ir.InsertionPoint.at_block_begin(module.body).insert(op)


def _asm(text: str, *, host: bool = False) -> Callable[[ir.Module], None]:
  """Inline PTX `text` in the kernel's device code, or in its host code (before the launch)."""
  def edit(module: ir.Module) -> None:
    op = _op("llvm.inline_asm", results=["!llvm.void"], asm_string=f'"{text}"',
             constraints='""', has_side_effects="unit")
    block = _launch_block(module)
    at = (ir.InsertionPoint(block.owner) if host else ir.InsertionPoint.at_block_begin(block))
    at.insert(op)
  return edit


@pytest.mark.parametrize("edit, finding", [
    (_add_memref_global, "memref.global @memo"),
    (_add_memref_global, "memref.get_global"),
    (_reshape_scratch, "llvm.mlir.global @global_scratch"),
    (_external_function, "external function @getpid"),
    (_asm(".global .u32 calls;"), "llvm.inline_asm with the directive .global"),
    (_asm("} .global .u32 calls; .func f() {"), "a brace that closes a scope"),
    (_asm("membar.gl;", host=True), "llvm.inline_asm in host code"),
], ids=["memref_global", "memref_get_global", "writable_scratch", "external_function",
        "ptx_global", "ptx_leaves_its_scope", "host_asm"])
def test_state_of_its_own_in_a_mosaic_gpu_module_is_stateful(edit, finding):
  found, reasons = _stateful(_edit_mosaic(_matmul_medium(), edit))
  assert any(finding in f and f.endswith("in Mosaic GPU kernel module matmul") for f in found), found
  assert reasons


def test_what_mosaic_gpu_itself_declares_is_no_state():
  """The honest neighbours: reading global_scratch (Mosaic GPU's TMA descriptors in constant
  memory) and inline PTX of the shipped kind in device code."""
  def honest(module):
    at = ir.InsertionPoint.at_block_begin(_launch_block(module))
    at.insert(_op("llvm.mlir.addressof", results=["!llvm.ptr<4>"], global_name="@global_scratch"))
    _asm("{ .reg .pred p; setp.ne.b32 p, 1, 0; @p fence.proxy.async.global; }")(module)
  assert _stateful(_edit_mosaic(_matmul_medium(), honest)) == ((), [])


def test_an_unreadable_kernel_module_is_refused_not_passed():
  """A module that does not parse cannot be shown to declare nothing: no free pass."""
  garbage = _replace_kernel_module(_matmul_medium(), "mosaic_gpu_v2", "module",
                                   lambda data: b"ML\xefR" + data[4:100])
  found, reasons = _stateful(garbage)
  assert found == ("unreadable Mosaic GPU kernel module mosaic_gpu_v2 (it does not parse: what "
                   "it declares cannot be checked)",)
  assert reasons
  triton = _replace_kernel_module(_export_text("relu", "small"), "__gpu$xla.gpu.triton", "ir",
                                  lambda data: b"not a module")
  found, _ = _stateful(triton)
  assert found and all(f.startswith("unreadable Triton kernel module") for f in found), found


def _triton_asm(asm: str):
  def body(x_ref, o_ref):
    o_ref[...] = plgpu_triton.elementwise_inline_asm(
        asm, args=[x_ref[...]], constraints="=r,r", pack=1,
        result_shape_dtypes=[jax.ShapeDtypeStruct(x_ref.shape, jnp.float32)])[0]

  def kernel(x):
    spec = pl.BlockSpec((x.shape[0] // 16, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(body, grid=(16,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
  return kernel


def test_inline_ptx_of_a_triton_kernel_declares_nothing():
  honest = analyze_module(_export_text("relu", "small", _triton_asm("tanh.approx.f32 $0, $1;")))
  assert honest.stateful_ops == ()
  hostile = analyze_module(_export_text(
      "relu", "small", _triton_asm("{ .global .u32 n; mov.b32 $0, $1; }")))
  assert any("tt.elementwise_inline_asm with the directive .global in Triton kernel module"
             in f for f in hostile.stateful_ops), hostile.stateful_ops


@pytest.mark.parametrize("asm, why", [
    ("bar.sync $0, 128;", None), ("ld.global.nc.f32 $0, [$1];", None),
    ("cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], 16;", None),
    ("{ .reg .pred p; setp.ne.b32 p, $66, 0; wgmma.fence.sync.aligned; }", None),
    (".const .u32 c = 1;", "the directive .const"), (".extern .func malloc;", "the directive .extern"),
    ("#define G .glo ## bal", "a preprocessor line"), ("{ mov.b32 $0, $1;", "a brace left open"),
])
def test_inline_ptx_declarations_are_found_by_their_position(asm, why):
  assert kernel_state.ptx_state(asm) == why


def test_no_shipped_gpu_kernel_module_declares_state():
  """Every shipped kernels_gpu kernel at small and medium (Triton and Mosaic GPU modules): no
  state reported, and every kernel module read (a fingerprint)."""
  calls = {"triton": 0, "mosaic_gpu": 0}
  for spec in list_tasks():
    for size in ("small", "medium"):
      try:
        report = analyze_module(_export_text(spec.name, size))
      except Exception:  # pylint: disable=broad-except  (does not lower there)
        continue
      assert report.stateful_ops == (), f"{spec.name} [{size}]: {report.stateful_ops}"
      for k in report.kernels:
        assert k.fingerprint is not None, f"{spec.name} [{size}]"
        calls[k.backend] += 1
  assert calls["triton"] >= 90 and calls["mosaic_gpu"] >= 5, calls


def test_an_indirect_call_in_a_mosaic_gpu_module_is_refused():
  """A call through a pointer (host code can make one from any integer) reaches anything."""
  def indirect(module):
    block = _launch_block(module)
    fn = _op("llvm.mlir.zero", results=["!llvm.ptr"])
    call = _op("llvm.call", [fn.result], [], operandSegmentSizes="array<i32: 1, 0>")
    at = ir.InsertionPoint(block.owner)
    at.insert(fn)
    at.insert(call)
  found, _ = _stateful(_edit_mosaic(_matmul_medium(), indirect))
  assert "llvm.call (indirect) in Mosaic GPU kernel module matmul" in found, found


# ---------------------------------------------------------------------------------------------
# Host code: a Mosaic GPU module's host function (outside gpu.launch) runs natively in the
# judge's process, so any host op that writes or reads memory other than its own stack slots
# reaches the judge's memory. Each edit below is one such write, read or door, in a shipped
# module's host code; each must be refused (mosaic_host.py).

def _host_ops(module: ir.Module, name: str) -> list[ir.Operation]:
  """The ops named `name` in the host function's body (not inside gpu.launch), in order."""
  host = _launch_block(module).owner.operation.block
  return [op.operation for op in host.operations if op.operation.name == PREFIX + name]


def _before_launch(module: ir.Module, *ops: ir.Operation) -> None:
  at = ir.InsertionPoint(_launch_block(module).owner)
  for op in ops:
    at.insert(op)


def _const(value: int, type_: str = "i64") -> ir.Operation:
  return _op("arith.constant", results=[type_], value=f"{value} : {type_}")


def _store_to(address: ir.Value, *ops: ir.Operation) -> list[ir.Operation]:
  value = _const(1)
  return [*ops, value, _op("llvm.store", [value.result, address], ordering="0 : i64")]


def _host_store_at_constant_address(module):
  """`*(int64_t *)0x7f0000001000 = 1`: a store anywhere in the judge's address space."""
  address = _const(0x7F0000001000)
  ptr = _op("llvm.inttoptr", [address.result], ["!llvm.ptr"])
  _before_launch(module, address, ptr, *_store_to(ptr.result))


def _i64_alloca(module) -> ir.Operation:
  return next(op for op in _host_ops(module, "llvm.alloca")
              if str(op.attributes["elem_type"]) == "i64")


def _host_store_past_an_alloca(module):
  """A stack slot of 4 i64, written at element 4096: the judge's stack beyond it."""
  gep = _op("llvm.getelementptr", [_i64_alloca(module).result], ["!llvm.ptr"], elem_type="i64",
            rawConstantIndices="array<i32: 4096>")
  _before_launch(module, gep, *_store_to(gep.result))


def _host_store_at_a_dynamic_index(module):
  """A stack slot indexed by a value the analysis cannot bound (a kernel buffer's metadata)."""
  index = next(op for op in _host_ops(module, "arith.index_cast")
               if "extract_strided_metadata" in op.operands[0].owner.name)
  gep = _op("llvm.getelementptr", [_i64_alloca(module).result, index.result], ["!llvm.ptr"],
            elem_type="i64", rawConstantIndices="array<i32: -2147483648>")
  _before_launch(module, gep, *_store_to(gep.result))


def _host_load_through_a_kernel_buffer(module):
  """The host dereferences the kernel's first buffer pointer (a device address, or whatever a
  forged buffer table holds)."""
  buffer = next(op for op in _host_ops(module, "llvm.load")
                if str(op.results[0].type) == "!llvm.ptr")
  _before_launch(module, _op("llvm.load", [buffer.result], ["i64"], ordering="0 : i64"))


def _tma_descriptor_written_anywhere(module):
  """Mosaic GPU's runtime writes a 128-byte descriptor wherever its first argument points."""
  address = _const(0x7F0000001000)
  ptr = _op("llvm.inttoptr", [address.result], ["!llvm.ptr"])
  call = _host_ops(module, "func.call")[0]
  ir.InsertionPoint(call).insert(address)
  ir.InsertionPoint(call).insert(ptr)
  call.operands[0] = ptr.result


def _tma_descriptor_over_the_buffer_table(module):
  """The descriptor written over XLA's table of buffer pointers (its entry 1), a pointer the
  host code may form, but only to read a kernel buffer's address from it."""
  entry = next(op for op in _host_ops(module, "llvm.getelementptr")
               if str(op.attributes["elem_type"]) == "!llvm.ptr")
  _host_ops(module, "func.call")[0].operands[0] = entry.result


def _tma_descriptor_past_a_small_alloca(module):
  """The descriptor's 128 bytes written into a stack slot of 4 i64 (32 bytes)."""
  _host_ops(module, "func.call")[0].operands[0] = _i64_alloca(module).result


def _tma_descriptor_of_rank_64(module):
  """A rank past the runtime's arrays: it reads (and, for sub-byte types, writes) sizes[63]."""
  call = _host_ops(module, "func.call")[0]
  rank = _const(64)
  ir.InsertionPoint(call).insert(rank)
  call.operands[3] = rank.result


def _host_calls_itself(module):
  """A call to anything but the descriptor's init: here the host function itself, again."""
  host = _launch_block(module).owner.operation.parent
  name = ir.StringAttr(host.attributes["sym_name"]).value
  token = _host_ops(module, "builtin.unrealized_conversion_cast")[0].operands[0]
  table = next(op for op in _host_ops(module, "llvm.load")).operands[0]
  _before_launch(module, _op("func.call", [token, table], callee=f"@{name}"))


def _from_the_base_memref(module, before: ir.Operation) -> ir.Operation:
  """An address made from the base memref extract_strided_metadata returns (a value no op of
  Mosaic GPU's uses): its aligned pointer, minus itself, plus 0x7f0000001000."""
  meta = _host_ops(module, "memref.extract_strided_metadata")[0]
  aligned = _op("memref.extract_aligned_pointer_as_index", [meta.results[0]], ["index"])
  as_int = _op("arith.index_cast", [aligned.result], ["i64"])
  zero = _op("arith.subi", [as_int.result, as_int.result], ["i64"])
  address = _const(0x7F0000001000)
  total = _op("arith.addi", [zero.result, address.result], ["i64"])
  ptr = _op("llvm.inttoptr", [total.result], ["!llvm.ptr"])
  for op in (aligned, as_int, zero, address, total, ptr):
    ir.InsertionPoint(before).insert(op)
  return ptr


def _host_store_through_the_base_memref(module):
  """`*(int64_t *)0x7f0000001000 = 1` again, its address derived from the base memref."""
  launch = _launch_block(module).owner.operation
  ptr = _from_the_base_memref(module, launch)
  for op in _store_to(ptr.result):
    ir.InsertionPoint(launch).insert(op)


def _tma_descriptor_written_through_the_base_memref(module):
  """The descriptor written at 0x7f0000001000, an address derived from the base memref."""
  call = _host_ops(module, "func.call")[0]
  call.operands[0] = _from_the_base_memref(module, call).result


def _host_memref_store_into_the_base_memref(module):
  """A host-side memref.store through the base memref (a kernel buffer's device address, or
  whatever the buffer table holds)."""
  meta = _host_ops(module, "memref.extract_strided_metadata")[0]
  value = _op("arith.constant", results=["f32"], value="1.0 : f32")
  _before_launch(module, value, _op("memref.store", [value.result, meta.results[0]]))


@pytest.mark.parametrize("edit, finding", [
    (_host_store_at_constant_address, "llvm.inttoptr"),
    (_host_store_past_an_alloca, "llvm.getelementptr"),
    (_host_store_at_a_dynamic_index, "llvm.getelementptr"),
    (_host_load_through_a_kernel_buffer, "llvm.load"),
    (_tma_descriptor_written_anywhere, "llvm.inttoptr"),
    (_tma_descriptor_over_the_buffer_table, "mosaic_gpu_init_tma_desc writing a descriptor"),
    (_tma_descriptor_past_a_small_alloca, "mosaic_gpu_init_tma_desc writing 128 bytes"),
    (_tma_descriptor_of_rank_64, "mosaic_gpu_init_tma_desc"),
    (_host_calls_itself, "func.call"),
    (_host_store_through_the_base_memref, "memref.extract_aligned_pointer_as_index"),
    (_tma_descriptor_written_through_the_base_memref, "memref.extract_aligned_pointer_as_index"),
    (_host_memref_store_into_the_base_memref, "memref.store"),
], ids=["store_at_constant_address", "store_past_an_alloca", "store_at_dynamic_index",
        "load_through_kernel_buffer", "tma_descriptor_anywhere",
        "tma_descriptor_over_buffer_table", "tma_descriptor_past_small_alloca",
        "tma_descriptor_rank_64",
        "call_of_another_function", "store_through_base_memref",
        "tma_descriptor_through_base_memref", "memref_store_into_base_memref"])
def test_host_code_that_reaches_the_judges_memory_is_refused(edit, finding):
  found, reasons = _stateful(_edit_mosaic(_matmul_medium(), edit))
  assert any(f.startswith("host code") and finding in f
             and f.endswith("in Mosaic GPU kernel module matmul") for f in found), found
  assert reasons


def _host_function_attribute(name: str, value: str) -> Callable[[ir.Module], None]:
  def edit(module: ir.Module) -> None:
    _launch_block(module).owner.operation.block.owner.attributes[name] = ir.Attribute.parse(value)
  return edit


@pytest.mark.parametrize("name, value", [
    ("passthrough", '["naked"]'), ("llvm.cconv", "#llvm.cconv<cc_10>"),
    ("arg_attrs", "[{}, {llvm.byval = !llvm.array<64 x ptr>}]"),
], ids=["naked", "cconv", "byval_table"])
def test_host_function_attributes_of_its_own_are_refused(name, value):
  found, _ = _stateful(_edit_mosaic(_matmul_medium(), _host_function_attribute(name, value)))
  assert any(f.startswith(f"host code: a host function with the attribute {name}")
             for f in found), found


MOSAIC_GPU_TASKS = ("batched_matmul", "gated_mlp", "geglu", "linear_bias_relu", "matmul",
                    "matmul_gelu", "matmul_relu", "matmul_silu", "swiglu", "transformer_block")
TRANSPOSING = ("matmul", "batched_matmul", "matmul_relu", "linear_bias_relu", "swiglu", "geglu")


@pytest.mark.parametrize("task", MOSAIC_GPU_TASKS)
def test_every_shipped_mosaic_gpu_kernels_host_code_is_mosaic_gpus(task):
  """The honest side of the host-code rule: each shipped kernel that lowers to Mosaic GPU for
  the H200, at small, medium and large, float32 and bfloat16, and (the six transposing
  kernels) the first and last in-kernel-transpose configs at float32: no finding, and the
  Mosaic GPU calls were there to be read."""
  from pallasbench_dataset import autotune  # pylint: disable=import-outside-toplevel
  module = load_kernel("gpu", task)
  runs = [(get_task(task).at_precision(p), size, None)
          for p in ("float32", "bfloat16") for size in ("small", "medium", "large")]
  if task in TRANSPOSING:
    configs = [c for c in autotune.candidates(module, {"backend": None}, 1000,
                                              ["mosaic_gpu"])[1:] if c["transpose_in_kernel"]]
    runs += [(get_task(task), size, config) for config in (configs[0], configs[-1])
             for size in ("small", "medium", "large")]
  mosaic = 0
  for spec, size, config in runs:
    fn = functools.partial(module.kernel, interpret=False, config=config)
    report = analyze_module(export_for("cuda", fn, *spec.input_structs(size)).mlir_module())
    assert report.stateful_ops == (), (spec.precision, size, config, report.stateful_ops)
    mosaic += sum(k.backend == "mosaic_gpu" for k in report.kernels)
  assert mosaic, task
