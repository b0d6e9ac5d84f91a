"""The host code of a Mosaic GPU kernel module: only the shape Mosaic GPU itself emits.

A `mosaic_gpu_v2` custom call's module holds, besides the kernel (the body of its `gpu.launch`),
the host function that XLA compiles and calls natively, in the judge's own process, to build the
kernel's TMA descriptors and launch it. The module's bytes are the candidate's (a hostile exporter
can emit any module), so a host op that writes or reads memory (`llvm.store` through an
`llvm.inttoptr` of a constant, an `llvm.getelementptr` past a stack slot, the descriptor runtime
given a destination of its choosing) would reach the judge's memory and could forge a verdict.
This allow-list is what keeps host code from it: the host code must have the shape Mosaic GPU
emits, checked op by op with the kind of every value it makes, and anything else is refused.

What Mosaic GPU emits (jax 0.11.2, every shipped kernels_gpu Mosaic GPU kernel at small, medium
and large, float32 and bfloat16, and the in-kernel-transpose configs; launch_context.py and
core.py in jax.experimental.mosaic.gpu): one function `(!llvm.ptr, !llvm.ptr) -> ()` of one block
(no attribute but its name, type and llvm.emit_c_interface),
its arguments XLA's stream (cast to a `!gpu.async.token`) and its table of buffer pointers, then

- constants (`arith.constant`, `llvm.mlir.constant`, casts of them to vectors for the kernel);
- per kernel buffer: `llvm.load` of the table's entry i (an `llvm.getelementptr` of the table at
  a constant i, or the table itself for 0), put in a memref descriptor (`llvm.mlir.undef`,
  `llvm.insertvalue` of the pointer at [0] and [1], constants elsewhere) and cast to a memref;
- per TMA descriptor: views of such a memref (`memref.expand_shape`, `memref.transpose`, a
  static `memref.reinterpret_cast`), its `memref.extract_strided_metadata` and
  `memref.extract_aligned_pointer_as_index`, `arith.index_cast`, `llvm.inttoptr` of that aligned
  pointer and an `llvm.getelementptr` of it at the metadata's offset (the base address); three
  `llvm.alloca` of `rank` i64 (sizes, strides, window) filled by `llvm.store` at constant indices
  of constants and metadata; and `func.call @mosaic_gpu_init_tma_desc(dst, base, elem_type, rank,
  sizes, strides, swizzle, window)` where dst is a constant offset (0, 128, ...) of one
  `llvm.alloca` of `!llvm.array<N x i8>` aligned to 64 (tagged `mosaic_gpu_smem_alloc`);
- `llvm.load` of that whole array (the descriptors, which the kernel reads), the `gpu.launch`
  (its operands: the stream's token and constants; its body uses host values only as
  constants, kernel memrefs and that array) and `func.return`.

The rule, so that no host op writes or reads memory except (a) the host function's own allocas
at constant in-bounds offsets, (b) what mosaic_gpu_init_tma_desc writes into such an alloca of
the descriptor's size, and (c) the buffer table's entries XLA passes (one per operand and result
of the custom call):

- ops: the list above, nothing else (no other call, no loop or branch, no op with a region
  other than the one `gpu.launch`, no second function with a body);
- every value has a kind given by what made it, and each op accepts operands of given kinds
  only: an `llvm.store` stores an integer (constant or metadata) at a constant offset of an
  alloca with the value's bytes in bounds; an `llvm.getelementptr` takes the buffer table at a
  constant entry below the buffer count, an alloca (or such a pointer) at constant indices, or
  the `llvm.inttoptr` of a kernel memref's aligned pointer at its metadata offset; an
  `llvm.inttoptr` takes only a kernel memref's aligned pointer; an `llvm.load` reads a table
  entry (a kernel buffer pointer) or a descriptor alloca whole; a kernel buffer pointer goes
  only into a memref descriptor, and the memref so made only into views, metadata and the
  kernel;
- mosaic_gpu_init_tma_desc: dst a 64-aligned constant offset of a 64-aligned `!llvm.array<N x
  i8>` alloca with 128 bytes in bounds; base the base address above; elem_type a constant the
  runtime knows (0..10); rank a constant in 1..5; sizes, strides and window constant offsets of
  i64 allocas (not the descriptors') with `rank` elements in bounds (the runtime reads them and,
  for sub-byte types, writes them); swizzle a constant.

Where a kernel's TMA descriptor points in device memory is the device's concern (the device
memory boundary, docs/design.md); here the base address must come from a kernel buffer all the
same.

Everything here runs inside the walled helper (analysis_process.py), on modules parsed there.
"""

from __future__ import annotations

import re
from typing import Final

from jaxlib.mlir import ir

PREFIX: Final = "stable_mosaic_gpu."
INIT_TMA_DESC: Final = "mosaic_gpu_init_tma_desc"
# The runtime's CUtensorMap (jaxlib/mosaic/gpu/runtime.cc), and the alignment it demands.
TMA_DESCRIPTOR_BYTES: Final = 128
TMA_DESCRIPTOR_ALIGNMENT: Final = 64
# The element types mosaic_gpu_init_tma_desc knows (launch_context._tma_dma_type), the ranks it
# accepts, and the largest stack slot the host code may ask for.
_TMA_ELEMENT_TYPES: Final = frozenset(range(11))
_MAX_RANK: Final = 5
_MAX_ALLOCA_BYTES: Final = 1 << 16
_DYNAMIC_INDEX: Final = -2147483648  # llvm.getelementptr's marker of a dynamic index
_HOST_TYPE: Final = "(!llvm.ptr, !llvm.ptr) -> ()"
# The host function's attributes Mosaic GPU sets, and no other: func-to-llvm carries the rest
# onto the llvm.func XLA runs (`passthrough = ["naked"]`, llvm.cconv, an argument's llvm.byval
# change its frame or what its arguments are).
_HOST_ATTRIBUTES: Final = frozenset({"sym_name", "function_type", "llvm.emit_c_interface"})
_MEMREF_VIEWS: Final = frozenset({"memref.expand_shape", "memref.transpose",
                                  "memref.reinterpret_cast"})
_INT: Final = re.compile(r"i(8|16|32|64)")
_ARRAY: Final = re.compile(r"!llvm\.array<(\d+) x (.+)>")

# Value kinds. A value of kind BAD came from an op already refused (not reported again): an op
# with such an operand is skipped, so BAD is given only by a refusal. A value no op of Mosaic
# GPU's uses (extract_strided_metadata's base memref) is UNUSED, and a value the analysis gave
# no kind (a launch's token) is UNKNOWN: no op accepts either, so any use of them is refused.
CONST, TOKEN, STREAM, TABLE, SLOT, BUFFER, DESCRIPTOR, MEMREF, META, ADDRESS, BASE_INT, BASE, \
    STACK, TMA_ARRAY, UNUSED, UNKNOWN, BAD = (
        "const", "token", "stream", "table", "slot", "buffer", "descriptor", "memref", "meta",
        "address", "base_int", "base", "stack", "tma_array", "unused", "unknown", "bad")


def op_name(op: ir.Operation) -> str:
  """The op's name without the prefix Mosaic GPU's stable serialization gives every op."""
  name = op.name
  return name[len(PREFIX):] if name.startswith(PREFIX) else name


def _size(type_: str) -> int | None:
  """Bytes of an integer or an array of them, else None."""
  if m := _INT.fullmatch(type_):
    return int(m.group(1)) // 8
  if m := _ARRAY.fullmatch(type_):
    inner = _size(m.group(2))
    return None if inner is None else int(m.group(1)) * inner
  return None


def _int_attr(op: ir.Operation, key: str) -> int | None:
  attr = op.attributes[key] if key in op.attributes else None
  return attr.value if isinstance(attr, ir.IntegerAttr) else None


def _indices(op: ir.Operation, key: str) -> list[int] | None:
  if key not in op.attributes:
    return None
  try:
    return [int(i) for i in op.attributes[key]]  # a dense i32/i64 array
  except TypeError:
    return None


class _Host:
  """The dataflow check of one host function's block."""

  def __init__(self, block: ir.Block, buffers: int | None):
    self.buffers = buffers
    self.kinds: dict[ir.Value, tuple] = {}
    self.allocas: dict[int, tuple[str, int, int, bool]] = {}  # id: (elem type, bytes, align, tma)
    self.found: set[str] = set()
    self.launches = 0
    self.block = block
    stream, table = block.arguments
    self.kinds[stream] = (STREAM,)
    self.kinds[table] = (TABLE,)

  def kind(self, value: ir.Value) -> tuple:
    return self.kinds.get(value, (UNKNOWN,))

  def refuse(self, op: ir.Operation, why: str) -> None:
    self.found.add(f"host code: {op_name(op)} {why}")

  def run(self) -> set[str]:
    for op in self.block.operations:
      self.visit(op.operation)
    if self.launches != 1:
      self.found.add(f"host code: {self.launches} gpu.launch ops (Mosaic GPU emits one)")
    return self.found

  def set(self, op: ir.Operation, *kind) -> None:
    for r in op.results:
      self.kinds[r] = kind

  def visit(self, op: ir.Operation) -> None:
    name = op_name(op)
    operands = list(op.operands)
    kinds = [self.kind(v) for v in operands]
    if any(k[0] == BAD for k in kinds) and name != "gpu.launch":
      self.set(op, BAD)  # refused where it was made
      return
    if name != "gpu.launch" and any(len(r.blocks) for r in op.regions):
      return self.fail(op, "with a region (no loop or branch in host code)")
    handler = _HANDLERS.get(name)
    if handler is None:
      return self.fail(op, "(not an op of Mosaic GPU's host code)")
    why = handler(self, op, operands, kinds)
    if why is not None:
      self.fail(op, why)

  def fail(self, op: ir.Operation, why: str) -> None:
    self.refuse(op, why)
    self.set(op, BAD)

  # The ops, each returning why it is refused, or None after giving its results their kinds.

  def constant(self, op, operands, kinds):
    if operands or len(op.results) != 1:
      return "of an unexpected form"
    self.set(op, CONST, _int_attr(op, "value"))
    return None

  def undef(self, op, operands, kinds):
    if operands or not str(op.results[0].type).startswith("!llvm.struct<(ptr, ptr, i64"):
      return "of a type that is not a memref descriptor"
    self.set(op, DESCRIPTOR, frozenset())
    return None

  def cast(self, op, operands, kinds):
    if len(operands) != 1 or len(op.results) != 1:
      return "of an unexpected form"
    to = str(op.results[0].type)
    if kinds[0][0] == STREAM and to == "!gpu.async.token":
      self.set(op, TOKEN)
    elif kinds[0][0] == DESCRIPTOR and to.startswith("memref<") and kinds[0][1] == {(0,), (1,)}:
      self.set(op, MEMREF)
    elif kinds[0][0] == CONST and to.startswith("vector<"):
      self.set(op, CONST, None)
    else:
      return f"of a {kinds[0][0]} value to {to}"
    return None

  def insertvalue(self, op, operands, kinds):
    position = tuple(_indices(op, "position") or ())
    into_kind, value_kind = kinds
    if into_kind[0] != DESCRIPTOR:
      return f"into a {into_kind[0]} value"
    if position in ((0,), (1,)):
      if value_kind[0] != BUFFER:
        return f"of a {value_kind[0]} value as a memref's pointer"
      self.set(op, DESCRIPTOR, into_kind[1] | {position})
    elif value_kind[0] == CONST and position and position[0] in (2, 3, 4):
      self.set(op, DESCRIPTOR, into_kind[1])
    else:
      return f"of a {value_kind[0]} value at {list(position)}"
    return None

  def view(self, op, operands, kinds):
    if len(operands) != 1 or kinds[0][0] != MEMREF:
      return "of anything but a kernel buffer's memref, statically"
    self.set(op, MEMREF)
    return None

  def metadata(self, op, operands, kinds):
    if len(operands) != 1 or kinds[0][0] != MEMREF:
      return "of anything but a kernel buffer's memref"
    self.kinds[op.results[0]] = (UNUSED,)  # the base memref: no use of it is Mosaic GPU's
    for r in list(op.results)[1:]:
      self.kinds[r] = (META,)
    return None

  def aligned_pointer(self, op, operands, kinds):
    if len(operands) != 1 or kinds[0][0] != MEMREF:
      return "of anything but a kernel buffer's memref"
    self.set(op, ADDRESS)
    return None

  def index_cast(self, op, operands, kinds):
    kind = kinds[0]
    if kind[0] not in (CONST, META, ADDRESS):
      return f"of a {kind[0]} value"
    self.set(op, *kind)
    return None

  def inttoptr(self, op, operands, kinds):
    if kinds[0][0] != ADDRESS:
      return f"of a {kinds[0][0]} value (only of a kernel buffer's aligned pointer)"
    self.set(op, BASE_INT)
    return None

  def getelementptr(self, op, operands, kinds):
    indices = _indices(op, "rawConstantIndices")
    elem = str(op.attributes["elem_type"]) if "elem_type" in op.attributes else ""
    base, dynamic = kinds[0], kinds[1:]
    if indices is None:
      return "without indices"
    if base[0] == TABLE:
      if dynamic or len(indices) != 1 or elem != "!llvm.ptr":
        return "of the buffer table not at one constant entry"
      if not 0 <= indices[0] < (self.buffers or 0):
        return (f"of the buffer table at entry {indices[0]}, past its {self.buffers} buffers")
      self.set(op, SLOT, indices[0])
    elif base[0] == BASE_INT:
      if (indices != [_DYNAMIC_INDEX] or len(dynamic) != 1
          or dynamic[0][0] not in (META, CONST)):
        return "of a kernel buffer's pointer not at its memref's offset"
      self.set(op, BASE)
    elif base[0] == STACK:
      size = _size(elem)
      if dynamic or len(indices) != 1 or _DYNAMIC_INDEX in indices:
        return "of an alloca at an index that is not one constant"
      if size is None:
        return f"of an alloca over elements of type {elem}"
      offset = base[2] + indices[0] * size
      if not 0 <= offset <= self.allocas[base[1]][1]:
        return (f"of an alloca at byte {offset}, outside its {self.allocas[base[1]][1]} bytes")
      self.set(op, STACK, base[1], offset)
    else:
      return f"of a {base[0]} value"
    return None

  def alloca(self, op, operands, kinds):
    elem = str(op.attributes["elem_type"]) if "elem_type" in op.attributes else ""
    size, count = _size(elem), kinds[0]
    if count[0] != CONST or count[1] is None or count[1] < 1:
      return "of a count that is not a positive constant"
    if size is None or not 0 < size * count[1] <= _MAX_ALLOCA_BYTES:
      return (f"of {count[1]} x {elem} (integers or arrays of them, at most "
              f"{_MAX_ALLOCA_BYTES} bytes)")
    align = _int_attr(op, "alignment") or 0
    self.allocas[len(self.allocas)] = (elem, size * count[1], align,
                                       _ARRAY.fullmatch(elem) is not None)
    self.set(op, STACK, len(self.allocas) - 1, 0)
    return None

  def store(self, op, operands, kinds):
    value, address = kinds
    size = _size(str(operands[0].type))
    if value[0] not in (CONST, META) or size is None:
      return f"of a {value[0]} value (only integers Mosaic GPU computes)"
    if address[0] != STACK:
      return f"through a {address[0]} pointer (only into the host function's allocas)"
    if address[2] + size > self.allocas[address[1]][1]:
      return (f"of {size} bytes at byte {address[2]} of an alloca of "
              f"{self.allocas[address[1]][1]}")
    return None

  def load(self, op, operands, kinds):
    address = kinds[0]
    to = str(op.results[0].type)
    if address[0] in (TABLE, SLOT) and to == "!llvm.ptr":
      if address[0] == TABLE and not self.buffers:
        return "of the buffer table of a call without buffers"
      self.set(op, BUFFER)
    elif (address[0] == STACK and address[2] == 0 and self.allocas[address[1]][3]
          and self.allocas[address[1]][0] == to):
      self.set(op, TMA_ARRAY)
    else:
      return f"of {to} through a {address[0]} pointer"
    return None

  def call(self, op, operands, kinds):
    callee = str(op.attributes["callee"]) if "callee" in op.attributes else "(indirect)"
    if callee != f"@{INIT_TMA_DESC}" or op.results:
      return f"of {callee} (host code calls {INIT_TMA_DESC} only)"
    if len(operands) != 8:
      return f"of @{INIT_TMA_DESC} with {len(operands)} arguments"
    dst, base, elem, rank, sizes, strides, swizzle, window = kinds
    where = f"@{INIT_TMA_DESC}"
    if dst[0] != STACK:
      return f"of {where} writing a descriptor through a {dst[0]} pointer"
    elem_type, nbytes, align, is_array = self.allocas[dst[1]]
    if (not is_array or align < TMA_DESCRIPTOR_ALIGNMENT or dst[2] % TMA_DESCRIPTOR_ALIGNMENT
        or dst[2] + TMA_DESCRIPTOR_BYTES > nbytes):
      return (f"of {where} writing {TMA_DESCRIPTOR_BYTES} bytes at byte {dst[2]} of an alloca "
              f"of {elem_type} aligned to {align} (not a descriptor's aligned place in it)")
    if base[0] != BASE:
      return f"of {where} with a base address that is a {base[0]} value, not a kernel buffer's"
    for label, kind, allowed in (("element type", elem, _TMA_ELEMENT_TYPES),
                                 ("rank", rank, range(1, _MAX_RANK + 1))):
      if kind[0] != CONST or kind[1] not in allowed:
        return f"of {where} with a {label} that is not a constant it knows"
    if swizzle[0] != CONST or swizzle[1] is None:
      return f"of {where} with a swizzle that is not a constant"
    for label, kind in (("sizes", sizes), ("strides", strides), ("window", window)):
      if kind[0] != STACK or self.allocas[kind[1]][3] or self.allocas[kind[1]][0] != "i64":
        return f"of {where} with {label} that are not an alloca of i64"
      if kind[2] + 8 * rank[1] > self.allocas[kind[1]][1]:
        return (f"of {where} with {label} of fewer than its rank, {rank[1]}, "
                "elements in bounds")
    return None

  def launch(self, op, operands, kinds):
    self.launches += 1
    if any(k[0] == BAD for k in kinds):
      return None  # refused where they were made
    segments = _indices(op, "operandSegmentSizes") or []
    if not segments or segments[0] != 1 or kinds[0][0] != TOKEN:
      return "not launched on the stream's token"
    if any(k[0] != CONST or k[1] is None for k in kinds[1:]):
      return "with a grid, block, cluster or shared memory size that is not a constant"
    if any(len(list(r.uses)) for r in op.results):
      return "whose token is used on the host"
    captured: set[str] = set()

    def visit(inner: ir.Operation) -> ir.WalkResult:
      for v in inner.operation.operands:
        kind = self.kinds.get(v)
        if kind is not None and kind[0] not in (CONST, MEMREF, TMA_ARRAY, BAD):
          captured.add(kind[0])
      return ir.WalkResult.ADVANCE

    for region in op.regions:
      for block in region.blocks:
        for inner in block.operations:
          inner.operation.walk(visit)
    if captured:
      return f"whose kernel uses host values of kind {', '.join(sorted(captured))}"
    return None

  def ret(self, op, operands, kinds):
    return "with results" if operands else None


_HANDLERS: Final = {
    "arith.constant": _Host.constant, "llvm.mlir.constant": _Host.constant,
    "llvm.mlir.undef": _Host.undef, "builtin.unrealized_conversion_cast": _Host.cast,
    "llvm.insertvalue": _Host.insertvalue,
    **{v: _Host.view for v in _MEMREF_VIEWS},
    "memref.extract_strided_metadata": _Host.metadata,
    "memref.extract_aligned_pointer_as_index": _Host.aligned_pointer,
    "arith.index_cast": _Host.index_cast, "llvm.inttoptr": _Host.inttoptr,
    "llvm.getelementptr": _Host.getelementptr, "llvm.alloca": _Host.alloca,
    "llvm.store": _Host.store, "llvm.load": _Host.load, "func.call": _Host.call,
    "gpu.launch": _Host.launch, "func.return": _Host.ret,
}


def host_code(module: ir.Module, runtime: frozenset[str], buffers: int | None) -> set[str]:
  """Why the host code of a parsed Mosaic GPU module is not of the shape Mosaic GPU emits, one
  finding per refused op (`host code: llvm.store through a base_int pointer ...`); empty when
  it is. `runtime`: the runtime functions' names (declared, never defined here); `buffers`: the
  buffers XLA's table holds for the call (its operands and results), None where unknown (no
  table entry is then readable)."""
  found: set[str] = set()
  hosts = [op.operation for op in module.body.operations
           if op_name(op.operation) == "func.func"
           and any(len(r.blocks) for r in op.operation.regions)]
  if len(hosts) != 1:
    return {f"host code: {len(hosts)} function definitions (Mosaic GPU emits one)"}
  host = hosts[0]
  sym = host.attributes["sym_name"] if "sym_name" in host.attributes else None
  name = sym.value if isinstance(sym, ir.StringAttr) else ""
  fn_type = str(host.attributes["function_type"]) if "function_type" in host.attributes else ""
  if name in runtime:
    found.add(f"host code: a definition of the runtime's @{name}")
  attributes = {host.attributes[i].name for i in range(len(host.attributes))}
  for extra in sorted(attributes - _HOST_ATTRIBUTES):
    found.add(f"host code: a host function with the attribute {extra} (Mosaic GPU sets none)")
  if fn_type != _HOST_TYPE:
    found.add(f"host code: a host function of type {fn_type} (Mosaic GPU's is {_HOST_TYPE})")
  region = host.regions[0]
  if len(region.blocks) != 1:
    found.add(f"host code: a host function of {len(region.blocks)} blocks (a branch)")
    return found
  block = region.blocks[0]
  if len(block.arguments) != 2:
    return found | {"host code: a host function whose block does not take its two arguments"}
  return found | _Host(block, buffers).run()
