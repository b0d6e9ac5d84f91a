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
import hashlib
import io
from collections.abc import Callable

import jax
import jax.numpy as jnp
import pytest
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
from jax._src.lib.triton import dialect as tt_dialect
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu_triton

from pallasbench_dataset.evaluation.judge import fingerprint, kernel_state, mosaic_host
from pallasbench_dataset.evaluation.judge.module_analysis import (
    ModuleReport, analyze_module, module_reasons)
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.tasks import get_task, list_tasks
from tests.judge.custom_calls import calls_to

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
                           edit: Callable[[bytes], bytes], *, rehash: bool = True) -> str:
  """`text` with the kernel module (backend_config field `key`) of every `target` call
  replaced by what `edit` makes of it; a Mosaic GPU module's kernel_hash made its new module's
  sha256, as the lowering makes it (unless not `rehash`)."""
  with mlir.make_ir_context():
    module = ir.Module.parse(text)
    for op in calls_to(module, target):
      fields = {n.name: n.attr for n in ir.DictAttr(op.attributes["mhlo.backend_config"])}
      fields[key] = ir.StringAttr.get(edit(ir.StringAttr(fields[key]).value_bytes))
      if rehash and key == "module" and "kernel_hash" in fields:
        fields["kernel_hash"] = ir.StringAttr.get(
            hashlib.sha256(ir.StringAttr(fields[key]).value_bytes).digest())
      op.attributes["mhlo.backend_config"] = ir.DictAttr.get(fields)
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


def test_a_mosaic_gpu_kernel_hash_must_be_its_module_s_sha256():
  """jaxlib keeps a process' compiled Mosaic GPU kernels under their kernel_hash alone: a call
  whose hash is not its module's may run a kernel compiled before (another evaluation's), not
  the module the judge read. A module edited under its old hash, or another hash on the
  shipped module: refused; the module as lowered: not."""
  assert _stateful(_matmul_medium()) == ((), [])
  finding = ("a kernel_hash that is not its module's sha256 (the kernel run need not be the "
             "module read) in Mosaic GPU kernel module mosaic_gpu_v2")
  other_hash = _replace_kernel_module(_matmul_medium(), "mosaic_gpu_v2", "kernel_hash",
                                      lambda data: hashlib.sha256(b"another kernel").digest())
  assert _stateful(other_hash)[0] == (finding,)
  module = _replace_kernel_module(_matmul_medium(), "mosaic_gpu_v2", "module",
                                  lambda data: data + b"\0", rehash=False)
  assert finding in _stateful(module)[0]


def _with_call_attribute(text: str, target: str, name: str, value: str) -> str:
  with mlir.make_ir_context():
    module = ir.Module.parse(text)
    for op in calls_to(module, target):
      op.attributes[name] = ir.Attribute.parse(value)
    return mlir.module_to_string(module)


@pytest.mark.parametrize("name, value, found", [
    ("backend_config", '""', False),
    ("backend_config", '"{name = \\"EVIL\\"}"', True),
    ("api_version", "4 : i32", True),
    ("has_side_effect", "true", True),
    ("mhlo.frontend_attributes", '{_xla_stream_annotation = "1"}', False),
], ids=["empty_config", "string_config", "typed_ffi", "side_effect",
        "frontend_attributes"])
@pytest.mark.parametrize("task, size, target", [
    ("relu", "small", "__gpu$xla.gpu.triton"), ("matmul", "medium", "mosaic_gpu_v2")])
def test_a_kernel_call_carries_only_the_attributes_its_lowering_gives_it(task, size, target,
                                                                          name, value, found):
  """XLA compiles a call's own backend_config (a string, or a dictionary under api_version 4)
  wherever it is not empty, and mhlo.backend_config, which the judge reads, only then (red team
  round 10's shadow configs): a kernel call with any attribute its lowering does not give it is
  refused; one with the empty config, or jax's frontend attributes, is not."""
  text = _matmul_medium() if task == "matmul" else _export_text(task, size)
  stateful = _stateful(_with_call_attribute(text, target, name, value))[0]
  assert any(f.startswith(f"kernel call {target} attribute {name!r}")  # not one it gives
             or f.startswith(f"kernel call {target} attribute {name} = ")  # not of its form
             for f in stateful) is found, stateful
  assert len(stateful) == int(found), stateful


def test_a_kernel_call_whose_mhlo_backend_config_is_no_dictionary_is_refused():
  """XLA takes a string config as the call's own: the judge would read no module at all."""
  text = _with_call_attribute(_export_text("relu", "small"), "__gpu$xla.gpu.triton",
                              "mhlo.backend_config", '"{name = \\"relu\\"}"')
  stateful = _stateful(text)[0]
  assert "the __gpu$xla.gpu.triton call's mhlo.backend_config is not a dictionary" in stateful
  assert any(f.startswith("unreadable Triton kernel module") for f in stateful), stateful


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
  assert found == ("unreadable Triton kernel module relu (it does not parse: what it declares "
                   "cannot be checked)",)  # named by the kernel's name, not by its target


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
    # the launch's own registers are functions of the launch; clocks and placement are not
    ("mov.u32 $0, %tid.x;", None), ("mov.u32 $0, %ctaid.y;", None), ("mov.u32 $0, %laneid;", None),
    ("mov.u32 $0, %clock;", "the special register %clock (no function of the kernel's inputs)"),
    ("mov.u64 $0, %globaltimer;",
     "the special register %globaltimer (no function of the kernel's inputs)"),
    ("mov.u32 $0, %smid;", "the special register %smid (no function of the kernel's inputs)"),
    ("mov.u64 $0, %clock64;", "the special register %clock (no function of the kernel's inputs)"),
    ("mov.u32 $0, %pm0;", "the special register %pm (no function of the kernel's inputs)"),
    ("mov.u32 $0, %r$1;", "a register name completed by an operand"),
    ("{ .reg .u32 %pmask; mov.u32 %pmask, $1; mov.u32 $0, %pmask; }", None),
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


# ---------------------------------------------------------------------------------------------
# Host code, op by op: a hand-written module of the shape Mosaic GPU emits (one kernel buffer
# put in a memref, a second read from the table, one TMA descriptor of rank 2 written at byte
# 128 of a 256-byte descriptor alloca, the launch), and edits of it each refused with its exact
# finding, or (an honest neighbour) accepted. mosaic_host.host_code reads it as the helper does.

_HOST = '''\
module {
  "stable_mosaic_gpu.func.func"() ({
  }) {function_type = (!llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> (), sym_name = "mosaic_gpu_init_tma_desc", sym_visibility = "private"} : () -> ()
  "stable_mosaic_gpu.func.func"() ({
  ^bb0(%arg0: !llvm.ptr, %arg1: !llvm.ptr):
    %one = "stable_mosaic_gpu.arith.constant"() {value = 1 : index} : () -> index
    %smem_bytes = "stable_mosaic_gpu.arith.constant"() {value = 1024 : i32} : () -> i32
    %zero = "stable_mosaic_gpu.llvm.mlir.constant"() {value = 0 : i64} : () -> i64
    %n = "stable_mosaic_gpu.llvm.mlir.constant"() {value = 64 : i64} : () -> i64
    %count = "stable_mosaic_gpu.arith.constant"() {value = 1 : i64} : () -> i64
    %f = "stable_mosaic_gpu.arith.constant"() {value = 0.0 : f32} : () -> f32
    %splat = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%f) : (f32) -> vector<4xf32>
    %undef = "stable_mosaic_gpu.llvm.mlir.undef"() : () -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %token = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%arg0) : (!llvm.ptr) -> !gpu.async.token
    %x = "stable_mosaic_gpu.llvm.load"(%arg1) {ordering = 0 : i64} : (!llvm.ptr) -> !llvm.ptr
    %d0 = "stable_mosaic_gpu.llvm.insertvalue"(%undef, %x) {position = array<i64: 0>} : (!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>, !llvm.ptr) -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %d1 = "stable_mosaic_gpu.llvm.insertvalue"(%d0, %x) {position = array<i64: 1>} : (!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>, !llvm.ptr) -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %d2 = "stable_mosaic_gpu.llvm.insertvalue"(%d1, %zero) {position = array<i64: 2>} : (!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>, i64) -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %d3 = "stable_mosaic_gpu.llvm.insertvalue"(%d2, %n) {position = array<i64: 3, 0>} : (!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>, i64) -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %d4 = "stable_mosaic_gpu.llvm.insertvalue"(%d3, %count) {position = array<i64: 4, 0>} : (!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>, i64) -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %m = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%d4) : (!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>) -> memref<64xf32>
    %entry = "stable_mosaic_gpu.llvm.getelementptr"(%arg1) {elem_type = !llvm.ptr, rawConstantIndices = array<i32: 1>} : (!llvm.ptr) -> !llvm.ptr
    %y = "stable_mosaic_gpu.llvm.load"(%entry) {ordering = 0 : i64} : (!llvm.ptr) -> !llvm.ptr
    %smem = "stable_mosaic_gpu.llvm.alloca"(%count) {alignment = 64 : i64, elem_type = !llvm.array<256 x i8>, mosaic_gpu_smem_alloc} : (i64) -> !llvm.ptr
    %dst = "stable_mosaic_gpu.llvm.getelementptr"(%smem) {elem_type = i8, rawConstantIndices = array<i32: 128>} : (!llvm.ptr) -> !llvm.ptr
    %v = "stable_mosaic_gpu.memref.expand_shape"(%m) {reassociation = [[0, 1]], static_output_shape = array<i64: 2, 32>} : (memref<64xf32>) -> memref<2x32xf32>
    %meta:6 = "stable_mosaic_gpu.memref.extract_strided_metadata"(%v) : (memref<2x32xf32>) -> (memref<f32>, index, index, index, index, index)
    %aligned = "stable_mosaic_gpu.memref.extract_aligned_pointer_as_index"(%v) : (memref<2x32xf32>) -> index
    %aligned_int = "stable_mosaic_gpu.arith.index_cast"(%aligned) : (index) -> i64
    %aligned_ptr = "stable_mosaic_gpu.llvm.inttoptr"(%aligned_int) : (i64) -> !llvm.ptr
    %offset = "stable_mosaic_gpu.arith.index_cast"(%meta#1) : (index) -> i64
    %base = "stable_mosaic_gpu.llvm.getelementptr"(%aligned_ptr, %offset) {elem_type = f32, rawConstantIndices = array<i32: -2147483648>} : (!llvm.ptr, i64) -> !llvm.ptr
    %elem = "stable_mosaic_gpu.arith.constant"() {value = 6 : i64} : () -> i64
    %rank = "stable_mosaic_gpu.arith.constant"() {value = 2 : i64} : () -> i64
    %size0 = "stable_mosaic_gpu.arith.index_cast"(%meta#2) : (index) -> i64
    %size1 = "stable_mosaic_gpu.arith.index_cast"(%meta#3) : (index) -> i64
    %sizes = "stable_mosaic_gpu.llvm.alloca"(%rank) {elem_type = i64} : (i64) -> !llvm.ptr
    %sizes0 = "stable_mosaic_gpu.llvm.getelementptr"(%sizes) {elem_type = i64, rawConstantIndices = array<i32: 0>} : (!llvm.ptr) -> !llvm.ptr
    "stable_mosaic_gpu.llvm.store"(%size0, %sizes0) {ordering = 0 : i64} : (i64, !llvm.ptr) -> ()
    %sizes1 = "stable_mosaic_gpu.llvm.getelementptr"(%sizes) {elem_type = i64, rawConstantIndices = array<i32: 1>} : (!llvm.ptr) -> !llvm.ptr
    "stable_mosaic_gpu.llvm.store"(%size1, %sizes1) {ordering = 0 : i64} : (i64, !llvm.ptr) -> ()
    %strides = "stable_mosaic_gpu.llvm.alloca"(%rank) {elem_type = i64} : (i64) -> !llvm.ptr
    %window = "stable_mosaic_gpu.llvm.alloca"(%rank) {elem_type = i64} : (i64) -> !llvm.ptr
    %swizzle = "stable_mosaic_gpu.arith.constant"() {value = 128 : i64} : () -> i64
    "stable_mosaic_gpu.func.call"(%dst, %base, %elem, %rank, %sizes, %strides, %swizzle, %window) {callee = @mosaic_gpu_init_tma_desc} : (!llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
    %descriptors = "stable_mosaic_gpu.llvm.load"(%smem) {ordering = 0 : i64} : (!llvm.ptr) -> !llvm.array<256 x i8>
    %done = "stable_mosaic_gpu.gpu.launch"(%token, %one, %one, %one, %one, %one, %one, %smem_bytes) ({
    ^bb0(%b0: index, %b1: index, %b2: index, %b3: index, %b4: index, %b5: index, %b6: index, %b7: index, %b8: index, %b9: index, %b10: index, %b11: index):
      %table = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%descriptors) : (!llvm.array<256 x i8>) -> !llvm.ptr
      "stable_mosaic_gpu.kernel.use"(%table, %m, %splat, %one) : (!llvm.ptr, memref<64xf32>, vector<4xf32>, index) -> ()
      "stable_mosaic_gpu.gpu.terminator"() : () -> ()
    }) {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1>} : (!gpu.async.token, index, index, index, index, index, index, i32) -> !gpu.async.token
    "stable_mosaic_gpu.func.return"() : () -> ()
  }) {function_type = (!llvm.ptr, !llvm.ptr) -> (), llvm.emit_c_interface, sym_name = "kernel_mosaic_gpu"} : () -> ()
}
'''

RUNTIME = frozenset({"mosaic_gpu_init_tma_desc"})


def _host(*edits: tuple[str, str], buffers: int | None = 2) -> set[str]:
  """The findings on _HOST with each `(old, new)` edit made (old must occur in it)."""
  text = _HOST
  for old, new in edits:
    assert old in text, old
    text = text.replace(old, new)
  return mosaic_host.host_code(fingerprint.parse_mosaic_gpu(text.encode()), RUNTIME, buffers)


def test_a_hand_written_host_function_of_mosaic_gpus_shape_is_accepted():
  assert _host() == set()
  module = fingerprint.parse_mosaic_gpu(_HOST.encode())
  assert kernel_state.module_state(module, "mosaic_gpu", "k", max_ops=1000, buffers=2) == ()


_LAUNCH_AT = '    %done = "stable_mosaic_gpu.gpu.launch"'
_LAUNCH_OP = _HOST[_HOST.index(_LAUNCH_AT):_HOST.index("\n", _HOST.index("operandSegmentSizes")) + 1]
_RETURN = '    "stable_mosaic_gpu.func.return"() : () -> ()\n'
_CALL = ('"stable_mosaic_gpu.func.call"(%dst, %base, %elem, %rank, %sizes, %strides, %swizzle, '
         '%window) {callee = @mosaic_gpu_init_tma_desc}')
_CALL_TYPE = "(!llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()"
_TABLE_ENTRY = "rawConstantIndices = array<i32: 1>} : (!llvm.ptr) -> !llvm.ptr\n    %y"
_SIZES_1 = "(%sizes) {elem_type = i64, rawConstantIndices = array<i32: 1>}"
_DST = "{elem_type = i8, rawConstantIndices = array<i32: 128>}"
_SMEM = "{alignment = 64 : i64, elem_type = !llvm.array<256 x i8>"
_USE = "(%table, %m, %splat, %one) : (!llvm.ptr, memref<64xf32>"


def _add(*lines: str) -> tuple[str, str]:
  """An edit that puts `lines` (ops) just before the launch."""
  return (_LAUNCH_AT, "".join(f"    {line}\n" for line in lines) + _LAUNCH_AT)


def _gep(base: str, elem: str, *indices: int) -> str:
  return (f'%g = "stable_mosaic_gpu.llvm.getelementptr"({base}) {{elem_type = {elem}, '
          f'rawConstantIndices = array<i32: {", ".join(map(str, indices))}>}} : (!llvm.ptr) -> '
          '!llvm.ptr')


def _store(value: str, type_: str = "i64", at: str = "%g") -> str:
  return (f'"stable_mosaic_gpu.llvm.store"({value}, {at}) {{ordering = 0 : i64}} : ({type_}, '
          '!llvm.ptr) -> ()')


def _alloca(count: str, elem: str) -> str:
  return f'%a = "stable_mosaic_gpu.llvm.alloca"({count}) {{elem_type = {elem}}} : (i64) -> !llvm.ptr'


def _insert(value: str, position: str, type_: str) -> str:
  """An llvm.insertvalue of `value` into the kernel buffer's memref descriptor."""
  struct = "!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>"
  return (f'%i = "stable_mosaic_gpu.llvm.insertvalue"(%d4, {value}) {{position = array<i64: '
          f'{position}>}} : ({struct}, {type_}) -> {struct}')


_CONST_8193 = '%k = "stable_mosaic_gpu.arith.constant"() {value = 8193 : i64} : () -> i64'
_META_PTR = '%i = "stable_mosaic_gpu.llvm.inttoptr"(%offset) : (i64) -> !llvm.ptr'
_ALL_CALL = "host code: func.call of @mosaic_gpu_init_tma_desc"


@pytest.mark.parametrize("edits, buffers, found", [
    # the module and its one host function
    ([('"stable_mosaic_gpu.func.func"() ({\n  ^bb0', '"stable_mosaic_gpu.other"() ({\n  ^bb0')], 2,
     {"host code: 0 function definitions (Mosaic GPU emits one)"}),
    ([("module {\n", 'module {\n  "stable_mosaic_gpu.func.func"() ({\n  ^bb0:\n    '
       '"stable_mosaic_gpu.func.return"() : () -> ()\n  }) {sym_name = "second"} : () -> ()\n')],
     2, {"host code: 2 function definitions (Mosaic GPU emits one)"}),
    ([("llvm.emit_c_interface, sym_name", 'llvm.emit_c_interface, sym_visibility = "private", '
       "sym_name")], 2,
     {"host code: a host function with the attribute sym_visibility (Mosaic GPU sets none)"}),
    ([("llvm.emit_c_interface, sym_name", "llvm.emit_c_interface, sym_name = 3 : i64, x = 1, "
       "ignored")], 2,
     {"host code: a host function with the attribute ignored (Mosaic GPU sets none)",
      "host code: a host function with the attribute x (Mosaic GPU sets none)"}),
    ([('sym_name = "kernel_mosaic_gpu"', 'sym_name = "mosaic_gpu_init_tma_desc"')], 2,
     {"host code: a definition of the runtime's @mosaic_gpu_init_tma_desc"}),
    ([("function_type = (!llvm.ptr, !llvm.ptr) -> (), llvm",
       "function_type = (!llvm.ptr, !llvm.ptr) -> i64, llvm")], 2,
     {"host code: a host function of type (!llvm.ptr, !llvm.ptr) -> i64 (Mosaic GPU's is "
      "(!llvm.ptr, !llvm.ptr) -> ())"}),
    ([("{function_type = (!llvm.ptr, !llvm.ptr) -> (), llvm", "{llvm")], 2,
     {"host code: a host function of type  (Mosaic GPU's is (!llvm.ptr, !llvm.ptr) -> ())"}),
    ([(', sym_name = "kernel_mosaic_gpu"', "")], 2, set()),  # read, not looked up: no finding
    ([("%arg1: !llvm.ptr):", "%arg1: !llvm.ptr, %arg2: i64):")], 2,
     {"host code: a host function whose block does not take its two arguments"}),
    ([(_RETURN, _RETURN + "  ^bb1:\n" + _RETURN)], 2,
     {"host code: a host function of 2 blocks (a branch)"}),
    ([(_LAUNCH_OP, "")], 2, {"host code: 0 gpu.launch ops (Mosaic GPU emits one)"}),
    ([(_LAUNCH_OP, _LAUNCH_OP + _LAUNCH_OP.replace("%done", "%again"))], 2,
     {"host code: 2 gpu.launch ops (Mosaic GPU emits one)"}),
    ([(_RETURN, '    "stable_mosaic_gpu.func.return"(%zero) : (i64) -> ()\n')], 2,
     {"host code: func.return with results"}),
    # ops that are not Mosaic GPU's, or not of its form
    ([_add('%s = "stable_mosaic_gpu.arith.addi"(%zero, %n) : (i64, i64) -> i64')], 2,
     {"host code: arith.addi (not an op of Mosaic GPU's host code)"}),
    ([_add('%r = "stable_mosaic_gpu.arith.constant"() ({\n      "stable_mosaic_gpu.scf.yield"() : '
           '() -> ()\n    }) {value = 1 : i64} : () -> i64')], 2,
     {"host code: arith.constant with a region (no loop or branch in host code)"}),
    ([_add('%c = "stable_mosaic_gpu.arith.constant"(%zero) {value = 1 : i64} : (i64) -> i64')], 2,
     {"host code: arith.constant of an unexpected form"}),
    ([_add('%c:2 = "stable_mosaic_gpu.llvm.mlir.constant"() {value = 1 : i64} : () -> (i64, i64)')],
     2, {"host code: llvm.mlir.constant of an unexpected form"}),
    ([_add('%u = "stable_mosaic_gpu.llvm.mlir.undef"() : () -> i64')], 2,
     {"host code: llvm.mlir.undef of a type that is not a memref descriptor"}),
    ([_add('%u = "stable_mosaic_gpu.llvm.mlir.undef"(%zero) : (i64) -> '
           '!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>')], 2,
     {"host code: llvm.mlir.undef of a type that is not a memref descriptor"}),
    # casts
    ([_add('%i = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%y) : (!llvm.ptr) -> i64')],
     2, {"host code: builtin.unrealized_conversion_cast of a buffer value to i64"}),
    ([_add('%i = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%arg0, %arg1) : '
           '(!llvm.ptr, !llvm.ptr) -> !gpu.async.token')], 2,
     {"host code: builtin.unrealized_conversion_cast of an unexpected form"}),
    ([_add('%i = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%arg0) : (!llvm.ptr) -> '
           'memref<64xf32>')], 2,
     {"host code: builtin.unrealized_conversion_cast of a stream value to memref<64xf32>"}),
    ([_add('%i = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%arg1) : (!llvm.ptr) -> '
           '!gpu.async.token')], 2,
     {"host code: builtin.unrealized_conversion_cast of a table value to !gpu.async.token"}),
    ([("(%d4) : (!llvm.struct", "(%d0) : (!llvm.struct")], 2,  # only the allocated pointer set
     {"host code: builtin.unrealized_conversion_cast of a descriptor value to memref<64xf32>"}),
    ([_add('%i = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%d4) : (!llvm.struct<(ptr, '
           'ptr, i64, array<1 x i64>, array<1 x i64>)>) -> i64')], 2,
     {"host code: builtin.unrealized_conversion_cast of a descriptor value to i64"}),
    ([_add('%i = "stable_mosaic_gpu.builtin.unrealized_conversion_cast"(%zero) : (i64) -> index')],
     2, {"host code: builtin.unrealized_conversion_cast of a const value to index"}),
    # a memref descriptor
    ([_add('%i = "stable_mosaic_gpu.llvm.insertvalue"(%zero, %x) {position = array<i64: 0>} : '
           '(i64, !llvm.ptr) -> i64')], 2, {"host code: llvm.insertvalue into a const value"}),
    ([_add(_insert("%entry", "0", "!llvm.ptr"))], 2,
     {"host code: llvm.insertvalue of a slot value as a memref's pointer"}),
    ([("(%d0, %x) {position = array<i64: 1>}", "(%d0, %arg1) {position = array<i64: 1>}")], 2,
     {"host code: llvm.insertvalue of a table value as a memref's pointer"}),
    ([("(%d3, %count) {position = array<i64: 4, 0>}", "(%d3, %count) {position = array<i64: 5, 0>}")],
     2, {"host code: llvm.insertvalue of a const value at [5, 0]"}),
    ([("(%d3, %count) {position = array<i64: 4, 0>}", "(%d3, %count) {}")], 2,
     {"host code: llvm.insertvalue of a const value at []"}),
    ([_add(_insert("%later", "0", "!llvm.ptr")),  # a value no op made before its use
      (_LAUNCH_AT, '    %later = "stable_mosaic_gpu.llvm.load"(%entry) {ordering = 0 : i64} : '
       "(!llvm.ptr) -> !llvm.ptr\n" + _LAUNCH_AT)], 2,
     {"host code: llvm.insertvalue of a unknown value as a memref's pointer"}),
    ([_add(_insert("%offset", "2", "i64"))], 2,
     {"host code: llvm.insertvalue of a meta value at [2]"}),
    ([_add(_insert("%y", "2", "!llvm.ptr"))], 2,
     {"host code: llvm.insertvalue of a buffer value at [2]"}),
    # views, metadata and the base address
    ([_add('%t = "stable_mosaic_gpu.memref.expand_shape"(%x) {reassociation = [[0, 1]]} : '
           '(!llvm.ptr) -> memref<2x32xf32>')], 2,
     {"host code: memref.expand_shape of anything but a kernel buffer's memref, statically"}),
    ([_add('%t = "stable_mosaic_gpu.memref.transpose"(%v, %v) : (memref<2x32xf32>, '
           'memref<2x32xf32>) -> memref<32x2xf32>')], 2,
     {"host code: memref.transpose of anything but a kernel buffer's memref, statically"}),
    ([_add('%mm:2 = "stable_mosaic_gpu.memref.extract_strided_metadata"(%arg1) : (!llvm.ptr) -> '
           '(memref<f32>, index)')], 2,
     {"host code: memref.extract_strided_metadata of anything but a kernel buffer's memref"}),
    ([_add('%mm:2 = "stable_mosaic_gpu.memref.extract_strided_metadata"(%m, %v) : (memref<64xf32>, '
           'memref<2x32xf32>) -> (memref<f32>, index)')], 2,
     {"host code: memref.extract_strided_metadata of anything but a kernel buffer's memref"}),
    ([_add('%mm = "stable_mosaic_gpu.memref.extract_aligned_pointer_as_index"(%arg1) : '
           '(!llvm.ptr) -> index')], 2,
     {"host code: memref.extract_aligned_pointer_as_index of anything but a kernel buffer's memref"}),
    ([_add('%mm = "stable_mosaic_gpu.memref.extract_aligned_pointer_as_index"(%m, %v) : '
           '(memref<64xf32>, memref<2x32xf32>) -> index')], 2,
     {"host code: memref.extract_aligned_pointer_as_index of anything but a kernel buffer's memref"}),
    ([_add('%i = "stable_mosaic_gpu.arith.index_cast"(%y) : (!llvm.ptr) -> i64')], 2,
     {"host code: arith.index_cast of a buffer value"}),
    ([_add(_META_PTR)], 2,
     {"host code: llvm.inttoptr of a meta value (only of a kernel buffer's aligned pointer)"}),
    # getelementptr: of the buffer table, of a kernel buffer's address, of an alloca
    ([_add('%g = "stable_mosaic_gpu.llvm.getelementptr"(%smem) {elem_type = i8} : (!llvm.ptr) -> '
           '!llvm.ptr')], 2, {"host code: llvm.getelementptr without indices"}),
    ([], 1, {"host code: llvm.getelementptr of the buffer table at entry 1, past its 1 buffers"}),
    ([(_TABLE_ENTRY, _TABLE_ENTRY.replace("1>", "-1>"))], 2,
     {"host code: llvm.getelementptr of the buffer table at entry -1, past its 2 buffers"}),
    ([(_TABLE_ENTRY, _TABLE_ENTRY.replace("1>", "0>"))], None,
     {"host code: llvm.getelementptr of the buffer table at entry 0, past its None buffers",
      "host code: llvm.load of the buffer table of a call without buffers"}),
    ([], 0, {"host code: llvm.getelementptr of the buffer table at entry 1, past its 0 buffers",
             "host code: llvm.load of the buffer table of a call without buffers"}),
    ([("{elem_type = !llvm.ptr, rawConstantIndices = array<i32: 1>}",
       "{elem_type = i8, rawConstantIndices = array<i32: 1>}")], 2,
     {"host code: llvm.getelementptr of the buffer table not at one constant entry"}),
    ([("{elem_type = !llvm.ptr, rawConstantIndices = array<i32: 1>}",
       "{elem_type = !llvm.ptr, rawConstantIndices = array<i32: 1, 0>}")], 2,
     {"host code: llvm.getelementptr of the buffer table not at one constant entry"}),
    ([('(%arg1) {elem_type = !llvm.ptr, rawConstantIndices = array<i32: 1>} : (!llvm.ptr)',
       '(%arg1, %zero) {elem_type = !llvm.ptr, rawConstantIndices = array<i32: 1>} : '
       '(!llvm.ptr, i64)')], 2,
     {"host code: llvm.getelementptr of the buffer table not at one constant entry"}),
    ([("(%aligned_ptr, %offset) {elem_type = f32, rawConstantIndices = array<i32: -2147483648>} : "
       "(!llvm.ptr, i64)",
       "(%aligned_ptr) {elem_type = f32, rawConstantIndices = array<i32: 4>} : (!llvm.ptr)")], 2,
     {"host code: llvm.getelementptr of a kernel buffer's pointer not at its memref's offset"}),
    ([("(%aligned_ptr, %offset) {elem_type = f32, rawConstantIndices = array<i32: -2147483648>} : "
       "(!llvm.ptr, i64)",
       "(%aligned_ptr, %offset, %offset) {elem_type = f32, rawConstantIndices = "
       "array<i32: -2147483648>} : (!llvm.ptr, i64, i64)")], 2,
     {"host code: llvm.getelementptr of a kernel buffer's pointer not at its memref's offset"}),
    ([("(%aligned_ptr, %offset) {elem_type = f32, rawConstantIndices = array<i32: -2147483648>} : "
       "(!llvm.ptr, i64)",
       "(%aligned_ptr, %y) {elem_type = f32, rawConstantIndices = array<i32: -2147483648>} : "
       "(!llvm.ptr, !llvm.ptr)")], 2,
     {"host code: llvm.getelementptr of a kernel buffer's pointer not at its memref's offset"}),
    ([_add(_gep("%y", "i8", 0))], 2, {"host code: llvm.getelementptr of a buffer value"}),
    ([(_SIZES_1 + " : (!llvm.ptr)", "(%sizes, %zero) {elem_type = i64, rawConstantIndices = "
       "array<i32: -2147483648>} : (!llvm.ptr, i64)")], 2,
     {"host code: llvm.getelementptr of an alloca at an index that is not one constant"}),
    ([(_SIZES_1 + " : (!llvm.ptr)", "(%sizes) {elem_type = i64, rawConstantIndices = "
       "array<i32: -2147483648>} : (!llvm.ptr)")], 2,
     {"host code: llvm.getelementptr of an alloca at an index that is not one constant"}),
    ([(_SIZES_1, _SIZES_1.replace("1>", "0, 1>"))], 2,
     {"host code: llvm.getelementptr of an alloca at an index that is not one constant"}),
    ([(_SIZES_1, "(%sizes) {rawConstantIndices = array<i32: 1>}")], 2,
     {"host code: llvm.getelementptr of an alloca over elements of type "}),
    ([("{elem_type = !llvm.ptr, rawConstantIndices = array<i32: 1>}",
       "{rawConstantIndices = array<i32: 1>}")], 2,
     {"host code: llvm.getelementptr of the buffer table not at one constant entry"}),
    ([(_SIZES_1, _SIZES_1.replace("i64", "f64"))], 2,
     {"host code: llvm.getelementptr of an alloca over elements of type f64"}),
    ([(_SIZES_1, _SIZES_1.replace("1>", "3>"))], 2,
     {"host code: llvm.getelementptr of an alloca at byte 24, outside its 16 bytes"}),
    ([(_SIZES_1, _SIZES_1.replace("1>", "-1>"))], 2,
     {"host code: llvm.getelementptr of an alloca at byte -8, outside its 16 bytes"}),
    ([_add(_gep("%sizes1", "i64", 1), _store("%zero"))], 2,  # offsets add up: 8 + 8 of 16
     {"host code: llvm.store of 8 bytes at byte 16 of an alloca of 16"}),
    ([_add(_gep("%smem", "!llvm.array<2 x i64>", 17))], 2,
     {"host code: llvm.getelementptr of an alloca at byte 272, outside its 256 bytes"}),
    # alloca
    ([('%strides = "stable_mosaic_gpu.llvm.alloca"(%rank)',
       '%strides = "stable_mosaic_gpu.llvm.alloca"(%offset)')], 2,
     {"host code: llvm.alloca of a count that is not a positive constant"}),
    ([('%strides = "stable_mosaic_gpu.llvm.alloca"(%rank)',
       '%strides = "stable_mosaic_gpu.llvm.alloca"(%zero)')], 2,
     {"host code: llvm.alloca of a count that is not a positive constant"}),
    ([_add(_alloca("%splat", "i64").replace("(i64)", "(vector<4xf32>)"))], 2,
     {"host code: llvm.alloca of a count that is not a positive constant"}),
    ([_add(_alloca("%count", "f32"))], 2,
     {"host code: llvm.alloca of 1 x f32 (integers or arrays of them, at most 65536 bytes)"}),
    ([_add(_alloca("%count", "!llvm.array<4 x f32>"))], 2,
     {"host code: llvm.alloca of 1 x !llvm.array<4 x f32> (integers or arrays of them, at most "
      "65536 bytes)"}),
    ([_add(_alloca("%count", "!llvm.array<65537 x i8>"))], 2,
     {"host code: llvm.alloca of 1 x !llvm.array<65537 x i8> (integers or arrays of them, at most "
      "65536 bytes)"}),
    ([_add(_CONST_8193, _alloca("%k", "i64"))], 2,
     {"host code: llvm.alloca of 8193 x i64 (integers or arrays of them, at most 65536 bytes)"}),
    ([_add(_alloca("%count", "!llvm.array<0 x i8>"))], 2,
     {"host code: llvm.alloca of 1 x !llvm.array<0 x i8> (integers or arrays of them, at most "
      "65536 bytes)"}),
    ([_add('%a = "stable_mosaic_gpu.llvm.alloca"(%count) : (i64) -> !llvm.ptr')], 2,
     {"host code: llvm.alloca of 1 x  (integers or arrays of them, at most 65536 bytes)"}),
    # store
    ([_add(_store("%y", "!llvm.ptr", at="%sizes1"))], 2,
     {"host code: llvm.store of a buffer value (only integers Mosaic GPU computes)"}),
    ([_add(_store("%f", "f32", at="%sizes1"))], 2,
     {"host code: llvm.store of a const value (only integers Mosaic GPU computes)"}),
    ([_add(_store("%zero", at="%entry"))], 2,
     {"host code: llvm.store through a slot pointer (only into the host function's allocas)"}),
    ([_add(_store("%zero", at="%aligned_ptr"))], 2,
     {"host code: llvm.store through a base_int pointer (only into the host function's allocas)"}),
    ([_add(_gep("%sizes", "i32", 3), _store("%zero"))], 2,
     {"host code: llvm.store of 8 bytes at byte 12 of an alloca of 16"}),
    # load
    ([_add('%l = "stable_mosaic_gpu.llvm.load"(%sizes) {ordering = 0 : i64} : (!llvm.ptr) -> i64')],
     2, {"host code: llvm.load of i64 through a stack pointer"}),
    ([_add('%l = "stable_mosaic_gpu.llvm.load"(%smem) {ordering = 0 : i64} : (!llvm.ptr) -> '
           '!llvm.array<128 x i8>')], 2,
     {"host code: llvm.load of !llvm.array<128 x i8> through a stack pointer"}),
    ([('"stable_mosaic_gpu.llvm.load"(%smem)', '"stable_mosaic_gpu.llvm.load"(%dst)')], 2,
     {"host code: llvm.load of !llvm.array<256 x i8> through a stack pointer"}),
    ([_add(_alloca("%count", "!llvm.array<4 x i64>"), '%l = "stable_mosaic_gpu.llvm.load"(%a) '
           '{ordering = 0 : i64} : (!llvm.ptr) -> !llvm.array<4 x i64>')], 2, set()),
    ([_add('%l = "stable_mosaic_gpu.llvm.load"(%entry) {ordering = 0 : i64} : (!llvm.ptr) -> i64')],
     2, {"host code: llvm.load of i64 through a slot pointer"}),
    ([_add('%l = "stable_mosaic_gpu.llvm.load"(%base) {ordering = 0 : i64} : (!llvm.ptr) -> '
           '!llvm.ptr')], 2, {"host code: llvm.load of !llvm.ptr through a base pointer"}),
    # mosaic_gpu_init_tma_desc
    ([(_CALL, _CALL.replace("@mosaic_gpu_init_tma_desc", "@free"))], 2,
     {"host code: func.call of @free (host code calls mosaic_gpu_init_tma_desc only)"}),
    ([(_CALL, _CALL.replace(" {callee = @mosaic_gpu_init_tma_desc}", ""))], 2,
     {"host code: func.call of (indirect) (host code calls mosaic_gpu_init_tma_desc only)"}),
    ([(_CALL, "%r = " + _CALL), (_CALL_TYPE, _CALL_TYPE.replace("-> ()", "-> i64"))], 2,
     {"host code: func.call of @mosaic_gpu_init_tma_desc (host code calls "
      "mosaic_gpu_init_tma_desc only)"}),
    ([(_CALL, _CALL.replace(", %window", "")), (_CALL_TYPE, _CALL_TYPE.replace(", !llvm.ptr) ", ") "))],
     2, {_ALL_CALL + " with 7 arguments"}),
    ([(_DST, _DST.replace("128", "192"))], 2,
     {_ALL_CALL + " writing 128 bytes at byte 192 of an alloca of !llvm.array<256 x i8> aligned to "
      "64 (not a descriptor's aligned place in it)"}),
    ([(_DST, _DST.replace("128", "160"))], 2,
     {_ALL_CALL + " writing 128 bytes at byte 160 of an alloca of !llvm.array<256 x i8> aligned to "
      "64 (not a descriptor's aligned place in it)"}),
    ([(_DST, _DST.replace("128", "96"))], 2,
     {_ALL_CALL + " writing 128 bytes at byte 96 of an alloca of !llvm.array<256 x i8> aligned to "
      "64 (not a descriptor's aligned place in it)"}),
    ([(_SMEM, _SMEM.replace("64 : i64", "32 : i64"))], 2,
     {_ALL_CALL + " writing 128 bytes at byte 128 of an alloca of !llvm.array<256 x i8> aligned to "
      "32 (not a descriptor's aligned place in it)"}),
    ([(_SMEM, _SMEM.replace("alignment = 64 : i64, ", ""))], 2,
     {_ALL_CALL + " writing 128 bytes at byte 128 of an alloca of !llvm.array<256 x i8> aligned to "
      "0 (not a descriptor's aligned place in it)"}),
    ([("(%dst, %base,", "(%strides, %base,")], 2,  # 16 bytes of i64
     {_ALL_CALL + " writing 128 bytes at byte 0 of an alloca of i64 aligned to 0 (not a "
      "descriptor's aligned place in it)"}),
    ([("(%dst, %base,", "(%y, %base,")], 2,
     {_ALL_CALL + " writing a descriptor through a buffer pointer"}),
    ([("(%dst, %base,", "(%dst, %aligned_ptr,")], 2,
     {_ALL_CALL + " with a base address that is a base_int value, not a kernel buffer's"}),
    ([("(%dst, %base,", "(%dst, %dst,")], 2,
     {_ALL_CALL + " with a base address that is a stack value, not a kernel buffer's"}),
    ([("{value = 6 : i64}", "{value = 11 : i64}")], 2,
     {_ALL_CALL + " with a element type that is not a constant it knows"}),
    ([("{value = 6 : i64}", "{value = -1 : i64}")], 2,
     {_ALL_CALL + " with a element type that is not a constant it knows"}),
    ([("%base, %elem, %rank", "%base, %offset, %rank")], 2,
     {_ALL_CALL + " with a element type that is not a constant it knows"}),
    ([("%elem, %rank, %sizes", "%elem, %zero, %sizes")], 2,
     {_ALL_CALL + " with a rank that is not a constant it knows"}),
    ([("%elem, %rank, %sizes", "%elem, %offset, %sizes")], 2,
     {_ALL_CALL + " with a rank that is not a constant it knows"}),
    ([("{value = 2 : i64}", "{value = 6 : i64}")], 2,  # the allocas hold 6 i64 each
     {_ALL_CALL + " with a rank that is not a constant it knows"}),
    ([("%strides, %swizzle, %window", "%strides, %offset, %window")], 2,
     {_ALL_CALL + " with a swizzle that is not a constant"}),
    ([("%strides, %swizzle, %window", "%strides, %splat, %window"),
      (_CALL_TYPE, _CALL_TYPE.replace("i64, !llvm.ptr) ->", "vector<4xf32>, !llvm.ptr) ->"))], 2,
     {_ALL_CALL + " with a swizzle that is not a constant"}),
    ([("%rank, %sizes, %strides", "%rank, %smem, %strides")], 2,
     {_ALL_CALL + " with sizes that are not an alloca of i64"}),
    ([("%sizes, %strides, %swizzle", "%sizes, %entry, %swizzle")], 2,
     {_ALL_CALL + " with strides that are not an alloca of i64"}),
    ([('%window = "stable_mosaic_gpu.llvm.alloca"(%rank) {elem_type = i64}',
       '%window = "stable_mosaic_gpu.llvm.alloca"(%rank) {elem_type = i32}')], 2,
     {_ALL_CALL + " with window that are not an alloca of i64"}),
    ([('%window = "stable_mosaic_gpu.llvm.alloca"(%rank)',
       '%window = "stable_mosaic_gpu.llvm.alloca"(%count)')], 2,
     {_ALL_CALL + " with window of fewer than its rank, 2, elements in bounds"}),
    ([("%rank, %sizes, %strides", "%rank, %sizes1, %strides")], 2,
     {_ALL_CALL + " with sizes of fewer than its rank, 2, elements in bounds"}),
    ([('%strides = "stable_mosaic_gpu.llvm.alloca"(%rank)',
       '%strides = "stable_mosaic_gpu.llvm.alloca"(%count)')], 2,
     {_ALL_CALL + " with strides of fewer than its rank, 2, elements in bounds"}),
    # the launch
    ([('gpu.launch"(%token,', 'gpu.launch"(%arg0,'),
      ("(!gpu.async.token, index, index", "(!llvm.ptr, index, index")], 2,
     {"host code: gpu.launch not launched on the stream's token"}),
    ([("array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1>", "array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 2>")],
     2, {"host code: gpu.launch not launched on the stream's token"}),
    ([(" {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1>}", "")], 2,
     {"host code: gpu.launch not launched on the stream's token"}),
    ([('gpu.launch"(%token, %one,', 'gpu.launch"(%token, %meta#2,')], 2,
     {"host code: gpu.launch with a grid, block, cluster or shared memory size that is not a "
      "constant"}),
    ([('gpu.launch"(%token, %one,', 'gpu.launch"(%token, %splat,'),
      ("(!gpu.async.token, index, index", "(!gpu.async.token, vector<4xf32>, index")], 2,
     {"host code: gpu.launch with a grid, block, cluster or shared memory size that is not a "
      "constant"}),
    ([(_RETURN, '    "stable_mosaic_gpu.gpu.wait"(%done) : (!gpu.async.token) -> ()\n' + _RETURN)],
     2, {"host code: gpu.launch whose token is used on the host"}),  # gpu.wait: not again
    ([(_USE, "(%table, %y, %splat, %one) : (!llvm.ptr, !llvm.ptr")], 2,
     {"host code: gpu.launch whose kernel uses host values of kind buffer"}),
    ([(_USE + ", vector<4xf32>, index)",
       "(%table, %sizes, %splat, %meta#2) : (!llvm.ptr, !llvm.ptr, vector<4xf32>, index)")], 2,
     {"host code: gpu.launch whose kernel uses host values of kind meta, stack"}),
    ([(_USE, "(%table, %token, %splat, %one) : (!llvm.ptr, !gpu.async.token")], 2,
     {"host code: gpu.launch whose kernel uses host values of kind token"}),
    ([(_USE, "(%table, %meta#0, %splat, %one) : (!llvm.ptr, memref<f32>")], 2,
     {"host code: gpu.launch whose kernel uses host values of kind unused"}),
    ([(_USE, "(%table, %arg1, %splat, %one) : (!llvm.ptr, !llvm.ptr")], 2,
     {"host code: gpu.launch whose kernel uses host values of kind table"}),
    # a refused value is reported where it is made, once, wherever it goes
    ([_add(_META_PTR, _store("%zero", at="%i"))], 2,
     {"host code: llvm.inttoptr of a meta value (only of a kernel buffer's aligned pointer)"}),
    ([_add(_META_PTR), (_USE, "(%table, %i, %splat, %one) : (!llvm.ptr, !llvm.ptr")], 2,
     {"host code: llvm.inttoptr of a meta value (only of a kernel buffer's aligned pointer)"}),
    ([_add('%bad = "stable_mosaic_gpu.arith.addi"(%one, %one) : (index, index) -> index'),
      ('gpu.launch"(%token, %one,', 'gpu.launch"(%token, %bad,')], 2,
     {"host code: arith.addi (not an op of Mosaic GPU's host code)"}),
])
def test_host_code_out_of_mosaic_gpus_shape_is_refused_op_by_op(edits, buffers, found):
  assert _host(*edits, buffers=buffers) == found


@pytest.mark.parametrize("edits", [
    [_add('%t = "stable_mosaic_gpu.memref.transpose"(%v) {permutation = affine_map<(d0, d1) -> '
          '(d1, d0)>} : (memref<2x32xf32>) -> memref<32x2xf32, strided<[1, 32]>>')],
    [_add('%t = "stable_mosaic_gpu.memref.reinterpret_cast"(%v) {operandSegmentSizes = array<i32: '
          '1, 0, 0, 0>, static_offsets = array<i64: 0>, static_sizes = array<i64: 64>, '
          'static_strides = array<i64: 1>} : (memref<2x32xf32>) -> memref<64xf32>')],
    [_add(_gep("%sizes", "i64", 2))],  # one past the end, not written
    [_add(_gep("%sizes", "i32", 3), _store("%smem_bytes", "i32"))],  # the last 4 bytes
    [_add(_gep("%smem", "!llvm.array<2 x i64>", 15), _store("%zero"))],
    [_add(_gep("%smem", "!llvm.array<2 x i64>", 16))],
    [_add(_alloca("%count", "!llvm.array<65536 x i8>"))], [_add(_alloca("%count", "i8"))],
    [_add(_CONST_8193.replace("8193", "8192"), _alloca("%k", "i64"))],
    [_add('%k = "stable_mosaic_gpu.arith.index_cast"(%one) : (index) -> i64',
          _alloca("%k", "i64"))],
    [(_DST, _DST.replace("128", "0"))], [(_DST, _DST.replace("128", "64"))],
    [(_SMEM, _SMEM.replace("64 : i64", "128 : i64"))],
    [("{value = 6 : i64}", "{value = 10 : i64}")], [("{value = 6 : i64}", "{value = 0 : i64}")],
    [("%elem, %rank, %sizes", "%elem, %count, %sizes")],  # rank 1, of allocas of 2
    [("{value = 2 : i64}", "{value = 5 : i64}")],  # rank 5, of allocas of 5
    [("%rank, %sizes, %strides", "%rank, %sizes1, %strides"),
     ('%sizes = "stable_mosaic_gpu.llvm.alloca"(%rank)',
      '%sizes = "stable_mosaic_gpu.llvm.alloca"(%n)')],  # sizes from element 1 of 64
    [(_TABLE_ENTRY, _TABLE_ENTRY.replace("1>", "0>"))],
    [("(%aligned_ptr, %offset)", "(%aligned_ptr, %zero)")],  # the memref's offset, a constant
], ids=["transpose", "reinterpret_cast", "gep_one_past_the_end", "store_at_the_end",
        "store_in_the_descriptors", "gep_one_past_the_descriptors", "alloca_of_64k", "alloca_of_1", "alloca_of_8192_i64",
        "count_through_index_cast", "descriptor_at_0", "descriptor_at_64",
        "descriptors_aligned_to_128", "element_type_10", "element_type_0", "rank_1", "rank_5",
        "sizes_at_an_offset", "table_entry_0", "base_at_a_constant_offset"])
def test_host_code_of_mosaic_gpus_shape_is_accepted_at_the_edges(edits):
  assert _host(*edits) == set()


# ---------------------------------------------------------------------------------------------
# State, op by op, in hand-written modules: _HOST (Mosaic GPU) with module-level ops or device
# ops added, and a Triton module of one function.

_SCRATCH = ('  "stable_mosaic_gpu.llvm.mlir.global"() ({\n  }) {addr_space = 4 : i32, global_type = '
            '!llvm.array<0 x i8>, linkage = #llvm.linkage<external>, sym_name = "global_scratch"'
            '{extra}} : () -> ()\n')
_DEVICE_AT = '      "stable_mosaic_gpu.gpu.terminator"() : () -> ()'
_TRITON = '''\
module {
  "tt.func"() ({
  ^bb0(%arg0: f32):
    %0 = "arith.constant"() {value = 1.0 : f32} : () -> f32
OPS    "tt.return"() : () -> ()
  }) {function_type = (f32) -> (), sym_name = "triton_kernel"} : () -> ()
}
'''


def _parsed(text: str):
  context = fingerprint._fresh_context()  # pylint: disable=protected-access
  context.allow_unregistered_dialects = True
  return ir.Module.parse(text, context=context)


def _mosaic_state(*, top: str = "", device: str = "", host: str = "", max_ops: int = 1000
                  ) -> tuple[str, ...]:
  """module_state of _HOST with `top` ops at module level, `device` ops in the kernel and
  `host` ops before the launch."""
  text = _HOST.replace("module {\n", "module {\n" + top).replace(_DEVICE_AT, device + _DEVICE_AT)
  text = text.replace(_LAUNCH_AT, host + _LAUNCH_AT)
  return kernel_state.module_state(_parsed(text), "mosaic_gpu", "mm", max_ops=max_ops, buffers=2)


def _triton_state(ops: str = "", top: str = "", max_ops: int = 1000) -> tuple[str, ...]:
  text = _TRITON.replace("OPS", ops).replace("module {\n", "module {\n" + top)
  return kernel_state.module_state(_parsed(text), "triton", "tk", max_ops=max_ops)


def _in(op: str, where: str = "Mosaic GPU kernel module mm") -> tuple[str, ...]:
  return (f"{op} in {where}",)


@pytest.mark.parametrize("extra, found", [
    ("", ()),
    (", tls_mode = 0 : i64, visibility_ = 0 : i64, unnamed_addr = 0 : i64", ()),
    (", visibility_ = 1 : i64", _in("llvm.mlir.global @global_scratch")),
    (", unnamed_addr = 2 : i64", _in("llvm.mlir.global @global_scratch")),
    (", constant", _in("llvm.mlir.global @global_scratch")),
    (", value = 0 : i8", _in("llvm.mlir.global @global_scratch")),
], ids=["as_mosaic_gpu_declares_it", "defaults_printed", "visibility", "unnamed_addr", "constant",
        "initial_value"])
def test_global_scratch_is_allowed_in_exactly_mosaic_gpus_shape(extra, found):
  assert _mosaic_state(top=_SCRATCH.replace("{extra}", extra)) == found


@pytest.mark.parametrize("edit", [
    ("addr_space = 4 : i32", "addr_space = 1 : i32"),
    ("!llvm.array<0 x i8>", "!llvm.array<64 x i8>"),
    ("#llvm.linkage<external>", "#llvm.linkage<internal>"),
    ("linkage = #llvm.linkage<external>, ", ""),
    ("({\n  })", '({\n    "stable_mosaic_gpu.llvm.return"() : () -> ()\n  })'),
], ids=["global_memory", "a_size", "internal", "no_linkage", "an_initializer"])
def test_global_scratch_reshaped_is_state(edit):
  scratch = _SCRATCH.replace("{extra}", "")
  assert edit[0] in scratch
  assert _mosaic_state(top=scratch.replace(*edit)) == _in("llvm.mlir.global @global_scratch")


_DECLARATION = ('  "stable_mosaic_gpu.func.func"() ({\n  }) {function_type = (!llvm.ptr, !llvm.ptr, i64, '
                'i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> (), sym_name = '
                '"mosaic_gpu_init_tma_desc", sym_visibility = "private"} : () -> ()\n')


@pytest.mark.parametrize("top, found", [
    (_DECLARATION.replace(', sym_visibility = "private"', ""),
     "external function @mosaic_gpu_init_tma_desc"),
    (_DECLARATION.replace("i64, !llvm.ptr) -> ()", "i64, !llvm.ptr) -> i64"),
     "external function @mosaic_gpu_init_tma_desc"),
    (_DECLARATION.replace("mosaic_gpu_init_tma_desc", "getpid"), "external function @getpid"),
    (_DECLARATION.replace('sym_name = "mosaic_gpu_init_tma_desc", ', ""), "external function"),
    ('  "stable_mosaic_gpu.llvm.func"() ({\n  }) {sym_name = "f", function_type = '
     '!llvm.func<void ()>} : () -> ()\n', "external function @f"),
    ('  "stable_mosaic_gpu.llvm.mlir.global"() ({\n  }) {sym_name = "n", global_type = i32} : '
     '() -> ()\n', "llvm.mlir.global @n"),
    ('  "stable_mosaic_gpu.memref.global"() {sym_name = "memo", type = memref<4xf32>} : () -> ()\n',
     "memref.global @memo"),
    ('  "stable_mosaic_gpu.gpu.module"() ({\n  }) {sym_name = "elsewhere"} : () -> ()\n',
     "gpu.module @elsewhere"),
    ('  "stable_mosaic_gpu.llvm.mlir.global_ctors"() {ctors = []} : () -> ()\n',
     "llvm.mlir.global_ctors"),
], ids=["public_runtime", "runtime_of_another_type", "libc", "nameless", "llvm_func", "global",
        "memref_global", "gpu_module", "ctors"])
def test_a_module_level_op_of_its_own_in_a_mosaic_gpu_module_is_state(top, found):
  assert _mosaic_state(top=top) == _in(found)


@pytest.mark.parametrize("device, found", [
    ('      %p = "stable_mosaic_gpu.llvm.mlir.addressof"() {global_name = @global_scratch} : () -> '
     '!llvm.ptr<4>\n', ()),
    ('      %p = "stable_mosaic_gpu.llvm.mlir.addressof"() {global_name = @calls} : () -> '
     '!llvm.ptr<1>\n', _in("llvm.mlir.addressof @calls")),
    ('      %p = "stable_mosaic_gpu.llvm.mlir.addressof"() : () -> !llvm.ptr<1>\n',
     _in("llvm.mlir.addressof None")),
    ('      %g = "stable_mosaic_gpu.memref.get_global"() {name = @memo} : () -> memref<4xf32>\n',
     _in("memref.get_global")),
    ('      "stable_mosaic_gpu.llvm.mlir.global"() ({\n      }) {sym_name = "inner"} : () -> ()\n',
     _in("llvm.mlir.global @inner")),
    ('      "stable_mosaic_gpu.builtin.module"() ({\n      ^bb0:\n      }) : () -> ()\n',
     _in("builtin.module")),
    ('      %z = "stable_mosaic_gpu.llvm.mlir.zero"() : () -> !llvm.ptr\n'
     '      "stable_mosaic_gpu.llvm.call"(%z) {operandSegmentSizes = array<i32: 1, 0>} : '
     '(!llvm.ptr) -> ()\n', _in("llvm.call (indirect)")),
    ('      "stable_mosaic_gpu.llvm.call"() {callee = @__nv_expf, operandSegmentSizes = '
     'array<i32: 0, 0>} : () -> ()\n', ()),
    ('      %z = "stable_mosaic_gpu.llvm.mlir.zero"() : () -> !llvm.ptr\n'
     '      "stable_mosaic_gpu.func.call_indirect"(%z) : (!llvm.ptr) -> ()\n',
     _in("func.call_indirect (indirect)")),
    ('      "stable_mosaic_gpu.llvm.inline_asm"() {asm_string = "fence.proxy.async;"} : () -> ()\n',
     ()),
    ('      "stable_mosaic_gpu.llvm.inline_asm"() {asm_string = ".global .u32 n;"} : () -> ()\n',
     _in("llvm.inline_asm with the directive .global")),
    ('      "stable_mosaic_gpu.llvm.inline_asm"() : () -> ()\n', ()),
], ids=["scratch_address", "global_address", "address_of_nothing", "get_global", "nested_global",
        "nested_module", "indirect_llvm_call", "direct_llvm_call", "call_indirect", "ptx",
        "ptx_global", "asm_without_text"])
def test_state_in_mosaic_gpu_device_code_is_found_where_it_is(device, found):
  assert _mosaic_state(device=device) == found


def test_inline_asm_in_mosaic_gpu_host_code_is_refused_even_when_it_declares_nothing():
  asm = '    "stable_mosaic_gpu.llvm.inline_asm"() {asm_string = "nop;"} : () -> ()\n'
  assert _mosaic_state(host=asm) == (
      "host code: llvm.inline_asm (not an op of Mosaic GPU's host code) in Mosaic GPU kernel "
      "module mm", "llvm.inline_asm in host code in Mosaic GPU kernel module mm")


def test_the_op_budget_counts_every_op_and_stops_there():
  ops = [0]
  _parsed(_HOST).operation.walk(lambda op: ops.__setitem__(0, ops[0] + 1) or ir.WalkResult.ADVANCE)
  assert _mosaic_state(max_ops=ops[0]) == ()
  over = "more ops than the {} the analysis reads (not checked) in Mosaic GPU kernel module mm"
  assert _mosaic_state(max_ops=ops[0] - 1) == (over.format(ops[0] - 1),)
  # the walk stops at the budget: a global past it is not reached (the module is refused anyway)
  late = ('      "stable_mosaic_gpu.memref.get_global"() {name = @memo} : () -> ()\n')
  assert _mosaic_state(device=late, max_ops=20) == (over.format(20),)
  assert _mosaic_state(device=late, max_ops=ops[0] + 1) == _in("memref.get_global")


@pytest.mark.parametrize("ops, top, found", [
    ("", "", ()),
    ('    %1 = "tt.extern_elementwise"(%0) {symbol = "__nv_expf", libname = "", libpath = ""} : '
     '(f32) -> f32\n', "", ()),
    ('    %1 = "tt.extern_elementwise"(%0) {symbol = "__nv_expf"} : (f32) -> f32\n', "", ()),
    ('    %1 = "tt.extern_elementwise"(%0) {symbol = "expf"} : (f32) -> f32\n', "",
     ("tt.extern_elementwise expf outside libdevice",)),
    ('    %1 = "tt.extern_elementwise"(%0) {symbol = "__nv_expf", libpath = "/tmp/mine.bc"} : '
     '(f32) -> f32\n', "", ("tt.extern_elementwise __nv_expf outside libdevice",)),
    ('    %1 = "tt.extern_elementwise"(%0) {symbol = "__nv_expf", libname = "mine"} : '
     '(f32) -> f32\n', "", ("tt.extern_elementwise __nv_expf outside libdevice",)),
    ('    %1 = "tt.extern_elementwise"(%0) : (f32) -> f32\n', "",
     ("tt.extern_elementwise ? outside libdevice",)),
    ('    %1 = "tt.elementwise_inline_asm"(%0) {asm_string = "mov.b32 $0, $1;"} : (f32) -> f32\n',
     "", ()),
    ('    %1 = "tt.elementwise_inline_asm"(%0) {asm_string = "}"} : (f32) -> f32\n', "",
     ("tt.elementwise_inline_asm with a brace that closes a scope it did not open",)),
    ("", '  "tt.func"() ({\n  }) {sym_name = "ext", function_type = () -> ()} : () -> ()\n',
     ("external function @ext",)),
    ("", '  "func.func"() ({\n  ^bb0:\n    "func.return"() : () -> ()\n  }) {sym_name = "host", '
     'function_type = () -> ()} : () -> ()\n', ("external function @host",)),
    ("", _SCRATCH.replace("{extra}", "").replace("stable_mosaic_gpu.", ""),
     ("llvm.mlir.global @global_scratch",)),
], ids=["plain", "libdevice", "libdevice_no_paths", "libc", "libpath", "libname", "no_symbol",
        "ptx", "ptx_leaves_its_scope", "declared_function", "func_func", "scratch"])
def test_state_in_a_triton_module_is_found_and_only_libdevice_is_external(ops, top, found):
  assert _triton_state(ops, top) == tuple(f"{f} in Triton kernel module tk" for f in found)


@pytest.mark.parametrize("attributes, found", [
    ('sym_name = "relu_kernel"', ()),
    ('sym_name = "relu.kernel$2"', ()),
    ('sym_name = "_relu_\\C3\\BC"', ()),  # a Python identifier of non-ASCII letters
    ('llvm.module_asm = [".global .u32 calls;"]',
     ("module attribute 'llvm.module_asm' (not one its lowering emits)",)),
    ('sym_name = "../../tmp/x"',
     ("module attribute sym_name = '\"../../tmp/x\"' (not of the form its lowering emits)",)),
    ('sym_name = ".hidden"',
     ("module attribute sym_name = '\".hidden\"' (not of the form its lowering emits)",)),
    (f'sym_name = "{"k" * 513}"',
     (f"module attribute sym_name = '\"{"k" * 63}' (not of the form its lowering emits)",)),
    ('mosaic_gpu.dump_basename = "relu_0"',
     ("module attribute 'mosaic_gpu.dump_basename' (not one its lowering emits)",)),
], ids=["plain", "dots_and_dollars", "non_ascii", "module_asm", "a_path", "leading_dot",
        "too_long", "mosaic_gpu_s_attribute"])
def test_a_triton_module_carries_only_the_attributes_its_lowering_emits(attributes, found):
  """Triton's module carries its sym_name, a plain name; anything else (llvm.module_asm is
  module-level PTX: a global of its own) is a finding."""
  text = _TRITON.replace("OPS", "").replace("module {", "module attributes {" + attributes + "} {")
  assert kernel_state.module_state(_parsed(text), "triton", "tk", max_ops=1000) == tuple(
      f"{f} in Triton kernel module tk" for f in found)


@pytest.mark.parametrize("attributes, found", [
    ("", None),
    (", arg_attrs = [{tt.divisibility = 16 : i32}]", None),
    (", arg_attrs = [{}, {tt.divisibility = 16 : i32}]", None),
    (", noinline = true", "'noinline' (not one its lowering emits)"),
    (", tt.divisibility = 16 : i32", "'tt.divisibility' (not one its lowering emits)"),
    (', sym_visibility = "private"',
     "sym_visibility = '\"private\"' (not of the form its lowering emits)"),
    (", arg_attrs = [{llvm.noalias}]",
     "arg_attrs = '[{llvm.noalias}]' (not of the form its lowering emits)"),
    (', noinline = true, sym_visibility = "private"',
     "'noinline' (not one its lowering emits), kernel function attribute sym_visibility = "
     "'\"private\"' (not of the form its lowering emits)"),
], ids=["pallas", "divisible_argument", "one_of_two_divisible", "noinline",
        "divisibility_on_the_function", "private", "other_argument_attribute", "two_of_them"])
def test_a_triton_kernel_function_carries_only_the_attributes_its_lowering_emits(attributes,
                                                                               found):
  text = _TRITON.replace("OPS", "").replace(
      'sym_name = "triton_kernel"}', 'sym_name = "triton_kernel"' + attributes + "}")
  want = () if found is None else (
      f"kernel function attribute {found} in Triton kernel module tk",)
  assert kernel_state.module_state(_parsed(text), "triton", "tk", max_ops=1000) == want


@pytest.mark.parametrize("attributes, found", [
    ('sym_name = "matmul", mosaic_gpu.dump_basename = "matmul_3", mosaic_gpu.arch_major = 9 : i32,'
     ' mosaic_gpu.arch_minor = 0 : i32, stable_mosaic_gpu.version = 6 : i64', ()),
    ('mosaic_gpu.dump_basename = "../../judge-17/x"',
     ("module attribute mosaic_gpu.dump_basename = '\"../../judge-17/x\"' (not of the form its "
      "lowering emits)",)),
    ('llvm.module_asm = ["mosaic_gpu_module_load: ret"]',
     ("module attribute 'llvm.module_asm' (not one its lowering emits)",)),
    ('mosaic_gpu.arch_major = 9 : i64',
     ("module attribute mosaic_gpu.arch_major = '9 : i64' (not of the form its lowering emits)",)),
    ('pallasbench.ballast = "xxxx"',
     ("module attribute 'pallasbench.ballast' (not one its lowering emits)",)),
], ids=["as_lowered", "dump_path", "module_asm", "arch_of_another_type", "ballast"])
def test_a_mosaic_gpu_module_carries_only_the_attributes_its_lowering_emits(attributes, found):
  """Mosaic GPU names its dump files after dump_basename (or sym_name), and llvm.module_asm is
  assembly in the host object it JIT-compiles in the judge's process."""
  text = _HOST.replace("module {", "module attributes {" + attributes + "} {", 1)
  assert kernel_state.module_state(_parsed(text), "mosaic_gpu", "mm", max_ops=1000,
                                   buffers=2) == tuple(sorted(_in(f)[0] for f in found))


@pytest.mark.parametrize("asm, why", [
    ("}{", "a brace that closes a scope it did not open"), ("{}}", "a brace that closes a scope "
     "it did not open"), ("{{}", "a brace left open"), ("{ .reg .b32 r; }", None),
    (".visible .entry k()", "the directive .visible"), ("st.global.u32 [$0], $1;", None),
    ("mov.u32 $0, %r.const;", None), ("x:.weak", None), ("\t.weak f;", "the directive .weak"),
    ("{.common .b8 c;}", "the directive .common"), (".globalize", None), ("", None),
])
def test_ptx_state_reads_braces_and_directives_in_order(asm, why):
  assert kernel_state.ptx_state(asm) == why


def test_an_unreadable_module_is_named_with_its_backend_and_why():
  assert kernel_state.unreadable("triton", "k", "no module") == (
      "unreadable Triton kernel module k (no module: what it declares cannot be checked)",)


# ---------------------------------------------------------------------------------------------
# read_buffers: which of a Triton kernel's buffers it may read (a dropped result it reads is
# state: module_analysis._dropped_results)

def _kernel(body: str) -> str:
  """A Triton kernel @k of two f32 buffers, %arg0 and %arg1, with `body`."""
  return ("\n  tt.func public @k(%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<f32>) {\n" + body
          + "\n    tt.return\n  }")


_LOOPED = _kernel("""\
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %p = scf.for %i = %c0 to %c1 step %c1 iter_args(%q = %arg0) -> (!tt.ptr<f32>) {
      %c = arith.constant 1 : i32
      %n = tt.addptr %arg1, %c : !tt.ptr<f32>, i32
      scf.yield %n : !tt.ptr<f32>
    }
    %v = tt.load %p : !tt.ptr<f32>
    tt.store %arg0, %v : !tt.ptr<f32>""")
_ATOMIC = _kernel("""\
    %one = arith.constant 1.0 : f32
    %old = tt.atomic_rmw fadd, acq_rel, gpu, %arg1, %one : (!tt.ptr<f32>, f32) -> f32
    tt.store %arg0, %old : !tt.ptr<f32>""")
_DEAD_LOAD = _kernel("""\
    %one = arith.constant 1.0 : f32
    %old = tt.load %arg1 : !tt.ptr<f32>
    tt.store %arg1, %one : !tt.ptr<f32>""")
_IN_THE_LOOP = _kernel("""\
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %zero = arith.constant 0.0 : f32
    %s = scf.for %i = %c0 to %c1 step %c1 iter_args(%q = %zero) -> (f32) {
      %v = tt.load %arg1 : !tt.ptr<f32>
      scf.yield %v : f32
    }
    %t = scf.for %i = %c0 to %c1 step %c1 iter_args(%q = %arg0) -> (!tt.ptr<f32>) {
      %w = tt.load %q : !tt.ptr<f32>
      tt.store %arg0, %w : !tt.ptr<f32>
      scf.yield %q : !tt.ptr<f32>
    }
    tt.store %arg0, %s : !tt.ptr<f32>""")
_TWO_FUNCTIONS = _DEAD_LOAD + _DEAD_LOAD.replace("@k(", "@k2(")


@pytest.mark.parametrize(("body", "reads"), [
    (_LOOPED, frozenset({0, 1})), (_ATOMIC, frozenset({1})), (_DEAD_LOAD, frozenset()),
    (_IN_THE_LOOP, frozenset({0, 1})), (_TWO_FUNCTIONS, None)],
    ids=["loop_carried", "atomic", "dead_load", "in_the_loop", "two_functions"])
def test_a_buffer_is_read_where_a_used_value_comes_through_its_pointer(body, reads):
  """A pointer followed out of a loop that yields it or into one that carries it, an atomic
  whose old value is used: reads. A load nothing uses (Pallas' swap) and a store through a
  pointer: no read. No single function: any buffer may be read."""
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  module = ir.Module.parse("module {" + body + "\n}", context=context)
  assert kernel_state.read_buffers(module, max_ops=1000) == reads
  assert kernel_state.read_buffers(module, max_ops=2) is None  # past the budget: any buffer


# A result the kernel zeroes, then accumulates into (%arg1, its row at the program's offset),
# in Pallas' shape: each access computes its pointer anew, from equal ops.
_ZEROED_THEN_ACCUMULATED = _kernel("""\
    %pid = tt.get_program_id x : i32
    %c8 = arith.constant 8 : i32
    %at = arith.muli %pid, %c8 : i32
    %p = tt.addptr %arg1, %at : !tt.ptr<f32>, i32
    %zero = arith.constant 0.0 : f32
    %limit = arith.constant 4 : i32
    %m = arith.cmpi slt, %pid, %limit : i32
    STORE
    %c8b = arith.constant 8 : i32
    %again = arith.muli %pid, %c8b : i32
    %q = tt.addptr %arg1, %again : !tt.ptr<f32>, i32
    %limit2 = arith.constant 4 : i32
    %n = arith.cmpi slt, %pid, %limit2 : i32
    LOAD
    %x = tt.load %arg0 : !tt.ptr<f32>
    %sum = arith.addf %v, %x : f32
    tt.store %q, %sum : !tt.ptr<f32>""")
_STORE, _LOAD = "tt.store %p, %zero : !tt.ptr<f32>", "%v = tt.load %q : !tt.ptr<f32>"
_C = "%c0 = arith.constant 0 : index\n    %c1 = arith.constant 1 : index\n    "
_STORED_IN_A_LOOP = _C + """scf.for %i = %c0 to %c1 step %c1 {
      tt.store %p, %zero : !tt.ptr<f32>
    }"""
_LOADED_IN_A_LOOP = _C + """%v = scf.for %i = %c0 to %c1 step %c1 iter_args(%a = %zero) -> (f32) {
      %l = tt.load %q : !tt.ptr<f32>
      scf.yield %l : f32
    }"""
_MASKED_STORE = "tt.store %p, %zero, %m : !tt.ptr<f32>"
_INDEX_LOADS = [
    ("%at = arith.muli %pid, %c8 : i32",
     "%i0 = tt.load %arg0 : !tt.ptr<i32>\n    %at = arith.muli %i0, %c8 : i32"),
    ("%again = arith.muli %pid, %c8b : i32",
     "%i1 = tt.load %arg0 : !tt.ptr<i32>\n    %again = arith.muli %i1, %c8b : i32"),
    ("%arg0: !tt.ptr<f32>, %arg1", "%arg0: !tt.ptr<i32>, %arg1"),
    ("%x = tt.load %arg0 : !tt.ptr<f32>", "%x = arith.constant 1.0 : f32")]


def _accumulating(store: str = _STORE, load: str = _LOAD,
                  replace: tuple[tuple[str, str], ...] | list[tuple[str, str]] = ()) -> str:
  body = _ZEROED_THEN_ACCUMULATED.replace("STORE", store).replace("LOAD", load)
  for old, new in replace:
    assert old in body, old
    body = body.replace(old, new)
  return body


@pytest.mark.parametrize(("body", "reads"), [
    (_accumulating(), {0}),
    (_accumulating(_MASKED_STORE, "%v = tt.load %q, %n : !tt.ptr<f32>"), {0}),
    (_accumulating(load="%v = tt.load %q, %n : !tt.ptr<f32>"), {0}),
    (_accumulating(_STORE + "\n    " + _C.replace("%c", "%d"), _LOADED_IN_A_LOOP), {0, 1}),
    (_accumulating(_STORED_IN_A_LOOP), {0, 1}),
    (_accumulating("", _LOAD + "\n    " + _STORE), {0, 1}),
    (_accumulating(_MASKED_STORE), {0, 1}),
    (_accumulating(_MASKED_STORE, "%v = tt.load %q, %t : !tt.ptr<f32>",
                   [("%limit2 =", "%t = arith.constant true\n    %limit2 =")]), {0, 1}),
    (_accumulating(replace=[("%again = arith.muli", "%again = arith.addi")]), {0, 1}),
    (_accumulating(replace=[("%c8b = arith.constant 8", "%c8b = arith.constant 16")]), {0, 1}),
    (_accumulating(replace=_INDEX_LOADS), {0, 1}),
], ids=["zeroed_first", "both_under_equal_masks", "masked_load_of_an_unmasked_store",
        "stored_before_a_loop", "stored_in_a_loop_before", "loaded_before_stored",
        "masked_store_unmasked_load", "masked_store_other_mask", "another_offset",
        "another_constant", "each_offset_loaded_apart"])
def test_a_result_read_only_where_its_program_stored_first_is_not_read(body, reads):
  """A load whose every element its program stored before it (through a pointer of equal ops,
  unmasked or under an equal mask, earlier in its block or one holding it) reads nothing a
  former call left: the result is not read (the honest zero-then-accumulate). Stored in a loop
  the load is not in (it may run no trip), loaded in a loop (the pipeliner issues it stages
  ahead), stored after, under a mask the load does not share, at another offset, or at one that
  comes from memory (two loads of it may differ): read."""
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  module = ir.Module.parse("module {" + body + "\n}", context=context)
  assert kernel_state.read_buffers(module, max_ops=1000) == frozenset(reads)


def _offset_chains(length: int, store_type: str = "i32", load_type: str = "i32") -> str:
  """A result stored, then loaded, at an offset each access computes through `length` ops of
  its own (from the program id), truncated to the given type last."""
  lines = ["%pid = tt.get_program_id x : i32", "%c1 = arith.constant 1 : i32",
           "%big = arith.constant 300 : i32", "%zero = arith.constant 0.0 : f32"]
  for side, type_ in (("s", store_type), ("l", load_type)):
    lines += [f"%{side}0 = arith.addi %pid, %big : i32"]
    lines += [f"%{side}{i} = arith.addi %{side}{i - 1}, %c1 : i32" for i in range(1, length)]
    lines += [f"%{side}t = arith.trunci %{side}{length - 1} : i32 to {type_}"
              if type_ != "i32" else f"%{side}t = arith.addi %{side}{length - 1}, %c1 : i32",
              f"%{side}p = tt.addptr %arg1, %{side}t : !tt.ptr<f32>, {type_}"]
    lines += ["tt.store %sp, %zero : !tt.ptr<f32>"] if side == "s" else [
        "%v = tt.load %lp : !tt.ptr<f32>", "tt.store %arg0, %v : !tt.ptr<f32>"]
  return _kernel("    " + "\n    ".join(lines))


@pytest.mark.parametrize(("body", "reads"), [
    (_offset_chains(62), set()), (_offset_chains(63), {1}),
    (_offset_chains(8, "i8", "i16"), {1}), (_offset_chains(8, "i8", "i8"), set())],
    ids=["63_ops_below", "64_ops_below", "offsets_of_two_types", "offsets_of_one_type"])
def test_pointers_are_equal_by_their_ops_to_a_depth_and_by_their_types(body, reads):
  """Two pointers are of one number where their ops are equal down to 63 ops below them (the
  first add of a 62-add chain; the program id, the constants are one value each), not 64:
  deeper, every value is a number of its own, and the result is read. An offset truncated to
  i8 (300 -> 44) is not the one truncated to i16 (300), however equal its ops."""
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  module = ir.Module.parse("module {" + body + "\n}", context=context)
  assert kernel_state.read_buffers(module, max_ops=1000) == frozenset(reads)


def _stored_then_loaded_in_a_nest(depth: int) -> str:
  """%arg1 zeroed, then loaded `depth` scf.if levels down and stored into %arg0."""
  opening = "".join(f"    scf.if %t {{\n" for _ in range(depth))
  closing = "".join("    }\n" for _ in range(depth))
  return _kernel("    %t = arith.constant true\n    %zero = arith.constant 0.0 : f32\n"
                 "    tt.store %arg1, %zero : !tt.ptr<f32>\n" + opening
                 + "    %v = tt.load %arg1 : !tt.ptr<f32>\n    tt.store %arg0, %v : !tt.ptr<f32>\n"
                 + closing.rstrip("\n"))


@pytest.mark.parametrize("depth, reads", [(15, set()), (16, {1})])
def test_a_store_is_looked_for_in_sixteen_blocks_around_a_load(depth, reads):
  """The load's own block and the 15 that hold it (15 scf.if levels, the function's body the
  sixteenth); past them the load is taken as a read: a nest of loads costs its ops, not loads x
  depth (red team round 10's adv_deep_dead_loads)."""
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  module = ir.Module.parse("module {" + _stored_then_loaded_in_a_nest(depth) + "\n}",
                           context=context)
  assert kernel_state.read_buffers(module, max_ops=1000) == frozenset(reads)


# Red team round 10: a mask reshaped with allow_reorder, once for the store and once for the
# load. Triton lets the compiler order the elements of each such reshape as it likes, so two
# of equal operands need not hold the same mask: the store may cover other elements than the
# load reads (%arg1's upper half, what the last call left).
_REORDERED_MASKS = _kernel("""\
    %r = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %c64 = arith.constant dense<64> : tensor<128xi32>
    %m0 = arith.cmpi slt, %r, %c64 : tensor<128xi32>
    %b = tt.splat %arg1 : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %p0 = tt.addptr %b, %r : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %p = tt.reshape %p0 : tensor<128x!tt.ptr<f32>> -> tensor<8x16x!tt.ptr<f32>>
    %ms = tt.reshape %m0 allow_reorder : tensor<128xi1> -> tensor<8x16xi1>
    %z = arith.constant dense<0.0> : tensor<8x16xf32>
    tt.store %p, %z, %ms : tensor<8x16x!tt.ptr<f32>>
    %ml = tt.reshape %m0 allow_reorder : tensor<128xi1> -> tensor<8x16xi1>
    %v = tt.load %p, %ml : tensor<8x16x!tt.ptr<f32>>
    %o0 = tt.splat %arg0 : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %o1 = tt.addptr %o0, %r : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %o = tt.reshape %o1 : tensor<128x!tt.ptr<f32>> -> tensor<8x16x!tt.ptr<f32>>
    tt.store %o, %v : tensor<8x16x!tt.ptr<f32>>""")


def test_a_mask_reshaped_with_reordering_is_no_mask_of_the_store():
  """A tt.reshape with allow_reorder is no function of its operand: a value number of its own."""
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  module = ir.Module.parse("module {" + _REORDERED_MASKS + "\n}", context=context)
  assert kernel_state.read_buffers(module, max_ops=1000) == frozenset({1})
  # without the reordering, the same kernel reads nothing it did not store first
  plain = ir.Module.parse("module {" + _REORDERED_MASKS.replace(" allow_reorder", "")
                          + "\n}", context=context)
  assert kernel_state.read_buffers(plain, max_ops=1000) == frozenset()


def test_a_kernel_of_exactly_max_ops_ops_is_read():
  """The budget counts the function's ops, itself included: _DEAD_LOAD's five are read at 5."""
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  module = ir.Module.parse("module {" + _DEAD_LOAD + "\n}", context=context)
  assert kernel_state.read_buffers(module, max_ops=5) == frozenset()
  assert kernel_state.read_buffers(module, max_ops=4) is None


# ---------------------------------------------------------------------------------------------
# written_buffers: which of a Triton kernel's buffers it may write (an unaliased operand it
# writes is state: module_analysis._kept_operands)

_PTR_TO_INT = _kernel("""\
    %i = tt.ptr_to_int %arg1 : !tt.ptr<f32> -> i64
    %v = tt.load %arg0 : !tt.ptr<f32>""")
_OFFSET_STORE = _kernel("""\
    %c = arith.constant 4 : i32
    %one = arith.constant 1.0 : f32
    %p = tt.addptr %arg1, %c : !tt.ptr<f32>, i32
    %v = tt.load %arg0 : !tt.ptr<f32>
    tt.store %p, %one : !tt.ptr<f32>""")

_THROUGH_A_CONDITION = _kernel("""\
    %r = scf.while (%q = %arg0) : (!tt.ptr<f32>) -> !tt.ptr<f32> {
      %c = arith.constant 1 : i32
      %n = tt.addptr %arg1, %c : !tt.ptr<f32>, i32
      %t = arith.constant true
      scf.condition(%t) %n : !tt.ptr<f32>
    } do {
    ^bb0(%a: !tt.ptr<f32>):
      scf.yield %a : !tt.ptr<f32>
    }
    %one = arith.constant 1.0 : f32
    tt.store %r, %one : !tt.ptr<f32>""")  # %arg1's pointer leaves the loop by its condition


@pytest.mark.parametrize(("body", "writes"), [
    (_LOOPED, frozenset({0})), (_ATOMIC, frozenset({0, 1})), (_DEAD_LOAD, frozenset({1})),
    (_IN_THE_LOOP, frozenset({0})), (_PTR_TO_INT, frozenset({1})),
    (_OFFSET_STORE, frozenset({1})), (_THROUGH_A_CONDITION, frozenset({0, 1})),
    (_TWO_FUNCTIONS, None)],
    ids=["loop_carried", "atomic", "dead_load", "in_the_loop", "ptr_to_int", "offset_store",
         "through_a_condition", "two_functions"])
def test_a_buffer_is_written_where_its_pointer_reaches_a_store_or_leaves_the_pointer_ops(
    body, writes):
  """A store's address (through a loop that yields or carries the pointer, or a while's
  condition that hands it on) and an atomic: writes. A pointer only loaded through (a constant
  mask): no write; a load's value is data, not a pointer. A pointer turned into an integer may
  be written through. No single function, or past the op budget: any buffer may be written."""
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  module = ir.Module.parse("module {" + body + "\n}", context=context)
  assert kernel_state.written_buffers(module, max_ops=1000) == writes
  assert kernel_state.written_buffers(module, max_ops=2) is None
