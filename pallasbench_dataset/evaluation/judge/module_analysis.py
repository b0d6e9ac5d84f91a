"""Reading an exported StableHLO module: its kernel custom calls and the work XLA does around them.

The sealed judge never runs a candidate's Python: it receives the `jax.export` artifact and has
to decide from the module text alone whether the candidate is a real Pallas kernel or does the
task in plain XLA ops around a trivial one. This module walks the parsed module (the MLIR
bindings of jaxlib, not regexes), finds the Triton and Mosaic GPU custom calls, and costs every
other op. The cost model is sound rather than exact: loop bodies are multiplied by their most
trips (an interval analysis of their counters), a `case`/`if` costs the most of each kind of
work over its branches, and a loop whose trip count cannot be proven is reported.

What runs is what XLA compiles, not the module as exported, and the two differ where XLA picks
an implementation of its own: a `stablehlo.composite` it knows (top_k, ragged_dot) becomes a
native op and its decomposition is dropped. So every op is costed from its own semantics or
refused: an op without a cost model, composites included, is listed in `unknown_ops` and
rejected (an allow-list, closed by construction: a new op XLA could run as anything is never
free), and custom calls other than the kernels are refused.

The module is hostile input: its text is scanned for nesting before MLIR parses it, and the
analysis is linear in its size (each function once per pattern of data-derived arguments, a
loop body once) within a budget of op visits and a depth limit (`AnalysisLimits`).

A value "derives from data" when it is computed, transitively, from an argument of @main or
from a kernel's result; constants, iota, shapes and loop counters do not. Gathers, scatters and
dynamic slices indexed by such values, and selects whose predicate is such a value, move or
pick data by its content: that is the work of an embedding or a mask, counted apart from
arithmetic as `data_dependent_moves`; so are the results of a `case`/`if` whose branch index
derives from data (a switch that picks data by its content is a select).

Bytes cost like FLOPs: memory that XLA fills costs no arithmetic, yet a splat broadcast to
gigabytes behind an `optimization_barrier` makes every call allocate and fill it. Every op is
charged the bytes of its results that XLA must store (used by anything but an op XLA fuses them
into: a kernel, a barrier, a loop, a return; reshapes are views, scalars registers; an in-place
update writes its update), and the kernels the buffers they return; module_reasons limits both
relative to the task's own bytes.

An exported kernel must also be a pure function of its inputs: ops with hidden state or effects
outside their results (`stablehlo.rng`, infeed/outfeed, send/recv, custom calls marked
`has_side_effect`) are listed as `stateful_ops` and rejected wherever they appear; so is the
state a kernel's own module declares (a global of its own, inline PTX that declares one, an
external function: kernel_state.py), named with its kernel module, and a Triton or Mosaic GPU
kernel module that cannot be read, whose state cannot be checked. A kernel also holds a raw
pointer to every buffer XLA hands it, and nothing stops a store through one: an operand the
kernel writes (kernel_state.written_buffers) is state unless it is aliased to a result (XLA
then copies it into the result's buffer before each call), whatever it derives from (XLA may
fold `constant + (x & 0)` into the constant, whose buffer it keeps from one call to the next);
where a kernel's writes are not traced (Mosaic GPU, inline PTX), every operand that derives
from no input is. So is a kernel result nothing the
program returns reads, unless aliased to an operand: XLA keeps it in its temporary allocation,
uninitialised, where a kernel that reads it finds what the last call left (one a Triton kernel
only stores to, or loads only where its program stored first, is not read:
kernel_state.read_buffers).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from pallasbench_dataset.evaluation.judge import fingerprint, kernel_state, mlir_context
from pallasbench_dataset.schema import ErrorType

logger = logging.getLogger(__name__)

# Pallas kernels by custom-call target. The TPU one counts only where the judge reads a TPU
# export: on a CPU host, for a kernel that does not lower to Triton (the originals).
KERNEL_TARGETS: Final = {"__gpu$xla.gpu.triton": "triton", "mosaic_gpu_v2": "mosaic_gpu",
                         "tpu_custom_call": "mosaic_tpu"}
# Custom calls jax itself emits that compute nothing: lax.empty's buffer, and the sharding
# annotations of the GSPMD (non-Shardy) lowering.
PLUMBING_CUSTOM_CALLS: Final = frozenset(
    {"AllocateBuffer", "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})
# module_reasons' limits, as fractions of the task's work.
OUTSIDE_WORK_LIMIT: Final = 0.10
OUTSIDE_CONTRACTION_LIMIT: Final = 0.01
# The bytes plain XLA ops may write per call, and the bytes of the buffers the kernels return,
# as multiples of the task's own bytes (its inputs and output), and at the least (a small
# task's wrapper may still pad or reshape). Kernels may return more: a decomposed kernel hands
# float32 intermediates to the next (triangle_update at bfloat16 returns 3.9x its own bytes).
OUTSIDE_BYTES_LIMIT: Final = 4.0
KERNEL_BYTES_LIMIT: Final = 16.0
BYTES_FLOOR: Final = 16 << 20
TOP_OPS: Final = 5
# Integer expressions followed deeper than this when bounding a loop are unknown.
MAX_EXPRESSION_DEPTH: Final = 64
NO_KERNEL_REASON: Final = ("no Pallas kernel in the exported module: no Triton or Mosaic GPU "
                           "custom call (was interpret=True forced, or the work done in jnp?)")

# Ops that cost nothing: plumbing, shapes and data movement that does not look at the data.
_FREE: Final = frozenset({
    "func.return", "stablehlo.return", "stablehlo.tuple", "stablehlo.get_tuple_element",
    "stablehlo.constant", "stablehlo.reshape", "stablehlo.broadcast_in_dim",
    "stablehlo.broadcast", "stablehlo.transpose", "stablehlo.slice", "stablehlo.concatenate",
    "stablehlo.pad", "stablehlo.iota", "stablehlo.bitcast_convert", "stablehlo.reverse",
    "stablehlo.optimization_barrier", "stablehlo.get_dimension_size",
})
_ELEMENTWISE: Final = frozenset({
    "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
    "stablehlo.remainder", "stablehlo.maximum", "stablehlo.minimum", "stablehlo.negate",
    "stablehlo.abs", "stablehlo.sign", "stablehlo.floor", "stablehlo.ceil",
    "stablehlo.round_nearest_afz", "stablehlo.round_nearest_even", "stablehlo.compare",
    "stablehlo.convert", "stablehlo.clamp", "stablehlo.and", "stablehlo.or", "stablehlo.xor",
    "stablehlo.not", "stablehlo.shift_left", "stablehlo.shift_right_arithmetic",
    "stablehlo.shift_right_logical", "stablehlo.popcnt", "stablehlo.count_leading_zeros",
    "stablehlo.is_finite", "stablehlo.real", "stablehlo.imag", "stablehlo.complex",
    "stablehlo.reduce_precision",
})
_TRANSCENDENTAL: Final = frozenset({
    "stablehlo.exponential", "stablehlo.exponential_minus_one", "stablehlo.log",
    "stablehlo.log_plus_one", "stablehlo.logistic", "stablehlo.tanh", "stablehlo.sqrt",
    "stablehlo.rsqrt", "stablehlo.cbrt", "stablehlo.power", "stablehlo.sine", "stablehlo.cosine",
    "stablehlo.tan", "stablehlo.atan2", "chlo.erf", "chlo.erfc", "chlo.erf_inv", "chlo.lgamma",
    "chlo.digamma", "chlo.tan", "chlo.sinh", "chlo.cosh", "chlo.asin", "chlo.acos", "chlo.atan",
    "chlo.asinh", "chlo.acosh", "chlo.atanh", "chlo.polygamma", "chlo.zeta", "chlo.bessel_i1e",
})
# Ops XLA fuses their operands into (loop and input fusions): an operand used only by these
# (or by views of it that are) is computed inside the fusion and never stored. Anything else
# that uses a value (a kernel, a barrier, a loop, a return, a sort) makes XLA store it.
_FUSING: Final = _ELEMENTWISE | _TRANSCENDENTAL | frozenset({
    "stablehlo.broadcast_in_dim", "stablehlo.broadcast", "stablehlo.select",
    "stablehlo.reduce", "stablehlo.transpose", "stablehlo.slice", "stablehlo.dynamic_slice",
    "stablehlo.concatenate", "stablehlo.pad", "stablehlo.reverse", "stablehlo.bitcast_convert",
})
# Ops with hidden state or effects beyond their results: the same artifact, called twice on
# the same input, may compute differently (and so tell checked calls from timed ones).
STATEFUL_OPS: Final = frozenset({
    "stablehlo.rng", "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv",
})
# Ops that write no buffer of their own: plumbing, views (a reshape is a bitcast of its
# operand's buffer), and ops whose results are what their regions (costed op by op) or a
# callee yield.
_NO_BUFFER: Final = frozenset({
    "func.return", "stablehlo.return", "stablehlo.tuple", "stablehlo.get_tuple_element",
    "stablehlo.while", "stablehlo.case", "stablehlo.if", "func.call", "stablehlo.reshape",
})
# Ops that only move elements of their one operand: a rounding reaching @main's return through
# them computes nothing more (_Analyzer._rounds_the_answer).
_MOVES: Final = frozenset({"stablehlo.reshape", "stablehlo.slice", "stablehlo.transpose"})
# Views: a value used by one is stored exactly when the view's result is.
_VIEWS: Final = frozenset({"stablehlo.reshape"})
_FUSING_OR_VIEW: Final = _FUSING | _VIEWS
# Ops that only pass their operand's value on: seen through when proving a loop's trip count
# (for scalars; an integer `convert` only where it keeps every value, see _preserves).
_IDENTITIES: Final = frozenset({
    "sdy.sharding_constraint", "sdy.reshard", "stablehlo.reshape", "stablehlo.broadcast_in_dim",
})
_DIRECTION_FLIP: Final = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}
_STATIC_ARITHMETIC: Final[dict[str, Callable[[int, int], int]]] = {
    "stablehlo.add": lambda a, b: a + b, "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.multiply": lambda a, b: a * b, "stablehlo.maximum": max, "stablehlo.minimum": min,
}
_CONTRACTIONS: Final = frozenset({
    "stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution",
    "stablehlo.triangular_solve", "stablehlo.cholesky", "stablehlo.fft",
})

# (name, backend, grid, num_warps, num_stages, fingerprint): a KernelCall without its launch
# count.
_KernelKey = tuple[str, str, tuple[int, ...], int | None, int | None, str | None]


class ModuleAnalysisError(ValueError):
  """The module cannot be analyzed soundly (unparsable, no @main, dynamic shapes, recursion,
  nested deeper or larger than the analysis' limits).

  The judge must reject such an artifact: its cost cannot be bounded. `ended_by` says when a
  limit or a signal ended the helper analysing it (a crash, its time, its memory) rather than
  the analysis refusing the module: the host's load can decide those (red team round 15), so
  the record carries it as its error type and the verdict cache never keeps it.
  """

  def __init__(self, message: str, ended_by: ErrorType | None = None):
    super().__init__(message)
    self.ended_by = ended_by


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AnalysisLimits:
  """How much of a module the analysis reads before refusing it. The shipped kernels' modules
  (cuda and interpret mode, every size) have at most about 1100 ops nested 5 regions and 7
  brackets deep; MLIR's parser overflows an 8 MiB stack from about 3000 nested regions."""
  op_visits: int = 200_000   # ops visited by the data-flow fixpoint, the costing and the loops
  nesting: int = 64          # calls and regions, one inside another
  brackets: int = 256        # {, (, [ and < open at once in the module's text, before parsing


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KernelCall:
  """One kernel custom call, with how often it runs per call of the module."""
  name: str                       # backend_config name, or the target when it has none
  backend: str                    # "triton" | "mosaic_gpu"
  grid: tuple[int, ...]           # (grid_x, grid_y, grid_z) for Triton; () when not recorded
  num_warps: int | None
  num_stages: int | None
  launches: int                   # loop trip counts around the call multiplied
  fingerprint: str | None = None  # of the lowered Triton kernel, names stripped (fingerprint.py)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ModuleReport:
  """What the module runs: its kernels, and the work XLA does outside them."""
  kernels: tuple[KernelCall, ...]
  outside_flops: int               # all arithmetic outside kernels, contractions included
  outside_contraction_flops: int   # dot_general, convolution, triangular_solve, cholesky, fft
  outside_transcendentals: int     # elements of exp, log, tanh, ... outside kernels
  data_dependent_moves: int        # elements gathered, scattered, sliced or selected by data
  outside_bytes: int               # bytes plain XLA ops write per call (buffers they fill)
  kernel_bytes: int                # bytes of the buffers the kernels return per call
  prefilled_bytes: int             # bytes XLA moves per call to fill in-place buffers (below)
  unknown_ops: tuple[str, ...]     # ops without a cost model, composites included: refused
  unbounded_loops: int             # while loops not provably bounded that change their carry
  disallowed_custom_calls: tuple[str, ...]  # targets neither kernels, plumbing nor allowed
  stateful_ops: tuple[str, ...]    # ops with hidden state or side effects, anywhere in the module
  top_ops: tuple[tuple[str, int], ...]      # (op name, cost), most costly first
  top_byte_ops: tuple[tuple[str, int], ...]  # (op name, bytes written), most first


@dataclasses.dataclass(slots=True, kw_only=True)
class _Tally:
  """The mutable running cost of a region; summed, scaled by trip counts, merged over branches."""
  flops: int = 0
  contraction: int = 0
  transcendentals: int = 0
  moves: int = 0
  bytes: int = 0
  kernel_bytes: int = 0
  prefilled: int = 0
  op_costs: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
  op_bytes: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
  kernels: collections.Counter[_KernelKey] = dataclasses.field(default_factory=collections.Counter)
  unknown: set[str] = dataclasses.field(default_factory=set)
  disallowed: set[str] = dataclasses.field(default_factory=set)
  unbounded: int = 0

  @property
  def work(self) -> int:
    return self.flops + self.moves

  @staticmethod
  def most(tallies: Iterable[_Tally]) -> _Tally:
    """Each cost at its highest over `tallies` (of which one runs): FLOPs, contractions,
    transcendentals, moves, bytes and each op's share apart; kernels and findings of all."""
    out = _Tally()
    for t in tallies:
      out.flops, out.contraction = max(out.flops, t.flops), max(out.contraction, t.contraction)
      out.transcendentals = max(out.transcendentals, t.transcendentals)
      out.moves = max(out.moves, t.moves)
      out.bytes, out.kernel_bytes = max(out.bytes, t.bytes), max(out.kernel_bytes, t.kernel_bytes)
      out.prefilled = max(out.prefilled, t.prefilled)
      out.op_costs |= t.op_costs
      out.op_bytes |= t.op_bytes
      out.kernels += t.kernels
      out.unknown |= t.unknown
      out.disallowed |= t.disallowed
      out.unbounded += t.unbounded
    return out

  def charge(self, name: str, *, flops: int = 0, contraction: int = 0, transcendentals: int = 0,
             moves: int = 0, written: int = 0) -> None:
    self.flops += flops
    self.contraction += contraction
    self.transcendentals += transcendentals
    self.moves += moves
    self.bytes += written
    if flops + moves:
      self.op_costs[name] += flops + moves
    if written:
      self.op_bytes[name] += written

  def add(self, other: _Tally, times: int = 1, *, label: str | None = None) -> None:
    """Adds `other` run `times` times; under `label` its cost is filed as that one op's."""
    self.flops += other.flops * times
    self.contraction += other.contraction * times
    self.transcendentals += other.transcendentals * times
    self.moves += other.moves * times
    self.bytes += other.bytes * times
    self.kernel_bytes += other.kernel_bytes * times
    self.prefilled += other.prefilled * times
    if label is None:
      for name, cost in other.op_costs.items():
        self.op_costs[name] += cost * times
      for name, written in other.op_bytes.items():
        self.op_bytes[name] += written * times
    else:
      if other.work:
        self.op_costs[label] += other.work * times
      if other.bytes:
        self.op_bytes[label] += other.bytes * times
    for key, launches in other.kernels.items():
      self.kernels[key] += launches * times
    self.unknown |= other.unknown
    self.disallowed |= other.disallowed
    self.unbounded += other.unbounded


def _elements(value_type: ir.Type) -> int:
  """Elements of a value; tokens count one. Dynamic and unranked shapes cannot be costed."""
  if isinstance(value_type, ir.ShapedType):
    if not value_type.has_rank or not value_type.has_static_shape:
      raise ModuleAnalysisError(f"dynamic shape {value_type}: the module's cost is unbounded")
    return math.prod(value_type.shape)
  if isinstance(value_type, ir.TupleType):
    return sum(_elements(value_type.get_type(i)) for i in range(value_type.num_types))
  return 1


def _out_elements(op: ir.Operation) -> int:
  return max(1, sum(_elements(r.type) for r in op.results))


def _bytes(value_type: ir.Type) -> int:
  """Bytes of a value in memory: whole bytes per element (i1 and i4 take one), two parts of a
  complex; tokens none."""
  if isinstance(value_type, ir.TupleType):
    return sum(_bytes(value_type.get_type(i)) for i in range(value_type.num_types))
  if not isinstance(value_type, ir.ShapedType):
    return 0
  element = value_type.element_type
  parts = 2 if isinstance(element, ir.ComplexType) else 1
  if parts == 2:
    element = ir.ComplexType(element).element_type
  width = element.width if isinstance(element, (ir.IntegerType, ir.FloatType)) else 64
  return _elements(value_type) * parts * max(1, -(-width // 8))


def _results_bytes(op: ir.Operation) -> int:
  return sum(_bytes(r.type) for r in op.results)


def _is_array(value: ir.Value) -> bool:
  """A value of rank one or more, or a tuple (of buffers): a buffer. Scalars (a combiner's, a
  loop counter) live in registers."""
  t = value.type
  return isinstance(t, ir.TupleType) or (isinstance(t, ir.ShapedType) and t.has_rank
                                          and t.rank > 0)


def _only_block(region: ir.Region) -> ir.Block:
  return next(iter(region.blocks))


def _terminator(block: ir.Block) -> ir.Operation:
  ops = block.operations
  return ops[len(ops) - 1].operation


def _symbol(op: ir.Operation, attr: str) -> str:
  return ir.FlatSymbolRefAttr(op.attributes[attr]).value


# The inclusive range of values an integer type holds: (lowest, highest).
_Range = tuple[int, int]


def _int_range(value_type: ir.Type) -> _Range | None:
  """The values of an integer (element) type: signless and signed ones are two's complement,
  unsigned ones and i1 (a boolean) from 0. None for any other type."""
  element = value_type.element_type if isinstance(value_type, ir.ShapedType) else value_type
  if not isinstance(element, ir.IntegerType):
    return None
  width = element.width
  if element.is_unsigned or width == 1:
    return (0, (1 << width) - 1)
  return (-(1 << (width - 1)), (1 << (width - 1)) - 1)


# Float element types by their MLIR names (what a convert between them can keep).
_FLOATS: Final = {"f64": np.float64, "f32": np.float32, "f16": np.float16,
                  "bf16": ml_dtypes.bfloat16, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
                  "f8E5M2": ml_dtypes.float8_e5m2}


def _float_info(value_type: ir.Type):
  element = value_type.element_type if isinstance(value_type, ir.ShapedType) else value_type
  dtype = _FLOATS.get(str(element))
  return None if dtype is None else ml_dtypes.finfo(dtype)


def _exact_float_widening(op: ir.Operation) -> bool:
  """Whether a convert takes floats to a type that holds every value of theirs (bfloat16 or
  float16 to float32, float32 to float64): as many mantissa bits or more, and an exponent
  range, subnormals included, that covers the source's."""
  source, target = _float_info(op.operands[0].type), _float_info(op.results[0].type)
  return (source is not None and target is not None and target.nmant >= source.nmant
          and target.maxexp >= source.maxexp
          and target.minexp - target.nmant <= source.minexp - source.nmant)


def _wrap(value: int, bounds: _Range) -> int:
  """`value` reduced into an integer type's range, as integer arithmetic and converts do."""
  low, high = bounds
  return (value - low) % (high - low + 1) + low


def _preserves(op: ir.Operation) -> bool:
  """Whether a `convert` passes every value of its operand on unchanged: an integer widening
  that keeps the sign (or a conversion to the same type). A narrowing one wraps around."""
  if op.operands[0].type == op.results[0].type:
    return True
  source, target = _int_range(op.operands[0].type), _int_range(op.results[0].type)
  return (source is not None and target is not None
          and target[0] <= source[0] and source[1] <= target[1])


def _through(value: ir.Value) -> ir.Value:
  """The value under ops that pass its value on (sharding constraints, scalar reshapes and
  broadcasts, integer converts that keep every value)."""
  while isinstance(value, ir.OpResult):
    op = value.owner.operation
    if (op.name in _IDENTITIES or _custom_target(op) == "Sharding"
        or (op.name == "stablehlo.convert" and _preserves(op))):
      value = op.operands[0]
    else:
      break
  return value


def _unchanged(value: ir.Value) -> ir.Value:
  """The value under ops that return their operand exactly (sharding annotations, a reshape
  or convert to the operand's own type): what a loop body yields unchanged."""
  while isinstance(value, ir.OpResult):
    op = value.owner.operation
    if (op.name in ("sdy.sharding_constraint", "sdy.reshard") or _custom_target(op) == "Sharding"
        or (op.name in ("stablehlo.reshape", "stablehlo.convert")
            and op.operands[0].type == op.results[0].type)):
      value = op.operands[0]
    else:
      break
  return value


def _custom_target(op: ir.Operation) -> str | None:
  if op.name != "stablehlo.custom_call":
    return None
  return ir.StringAttr(op.attributes["call_target_name"]).value


# One alias of a custom call's `output_operand_aliases` (#stablehlo.output_operand_alias): the
# result it names (`[]`: the call's only result) and the operand.
_ALIAS: Final = re.compile(r"output_tuple_indices = \[(\d*)[\d, ]*\], operand_index = (\d+)")


# Ops that hand on their operand's buffer, or one XLA fills from it without a kernel of its own
# when the operand is a constant (a broadcast of a splat is a memset): `_Analyzer._prefill`.
_VIEWS: Final = frozenset({"stablehlo.reshape", "stablehlo.bitcast_convert",
                           "stablehlo.broadcast_in_dim", "stablehlo.broadcast"})


def _is_splat(constant: ir.Operation) -> bool:
  value = constant.attributes["value"]
  return isinstance(value, ir.DenseElementsAttr) and value.is_splat


def _aliases(op: ir.Operation) -> dict[int, int]:
  """A custom call's `output_operand_aliases`: result index -> the operand it is aliased to."""
  return {int(i or 0): int(j) for i, j in _ALIAS.findall(_attr_text(op, "output_operand_aliases"))}


def _attr_text(op: ir.Operation, key: str) -> str:
  return str(op.attributes[key]) if key in op.attributes else ""


def _type_text(t: ir.Type) -> str:
  return str(t)[:80]


def _while_of(arg: ir.BlockArgument) -> ir.Operation | None:
  parent = arg.owner.owner
  if parent is None or parent.operation.name != "stablehlo.while":
    return None
  return parent.operation


def _yielded(while_op: ir.Operation, index: int) -> ir.Value:
  """What the loop body carries into the next iteration as carried value `index`."""
  return _through(_terminator(_only_block(while_op.regions[1])).operands[index])


def _linear_iterations(start: int, step: int, bound: int, direction: str) -> int | None:
  """How many times `counter <direction> bound` holds as the counter goes start, start+step, ...
  over the unbounded integers."""
  holds = {"LT": start < bound, "LE": start <= bound, "GT": start > bound, "GE": start >= bound,
           "EQ": start == bound, "NE": start != bound}[direction]
  if not holds:
    return 0
  if direction == "EQ":
    return 1 if step else None
  if direction == "NE":
    distance = bound - start
    return distance // step if step and distance % step == 0 and distance // step > 0 else None
  if direction in ("LT", "LE") and step > 0:
    return -(-(bound - start + (direction == "LE")) // step)
  if direction in ("GT", "GE") and step < 0:
    return -(-(start - bound + (direction == "GE")) // -step)
  return None


def _iterations(start: _Range, step: int, bound: _Range, direction: str, *, counter: _Range,
                view: _Range | None, compared: _Range) -> int | None:
  """The most times the loop condition holds, where the body steps a counter of range
  `counter` by `step` from a start in the interval `start`, and the condition compares it,
  converted into `view` (a narrowing convert, which wraps around; None if there is none), with
  a bound in the interval `bound`, the compare reading both sides in the range `compared` (its
  SIGNED or UNSIGNED compare type).

  Counting up, the longest run starts lowest and stops at the highest bound (counting down,
  the other way round); EQ and NE count only for a fixed start and bound. None where the count
  over the integers would not be the count the hardware runs: the counter overflows its type,
  the view wraps around in between, or a value read by the compare lies outside the range it
  reads them in (a negative value under an UNSIGNED compare).
  """
  fixed = start[0] == start[1] and bound[0] == bound[1]
  if not fixed and direction in ("EQ", "NE"):
    return None
  offset = _wrap(start[0], view) - start[0] if view is not None else 0
  first = (start[0] + offset, start[1] + offset)  # the starts as the compare reads them
  up = direction in ("LT", "LE", "EQ", "NE")
  trips = _linear_iterations(first[0] if up else first[1], step, bound[1] if up else bound[0],
                             direction)
  if trips is None:
    return None
  if fixed:
    last = first[0] + trips * step
    reach = (min(first[0], last), max(first[0], last))
  elif trips and step > 0:  # the last value passes the highest bound by less than a step
    reach = (first[0], max(first[1], bound[1] + step - (direction == "LT")))
  elif trips:
    reach = (min(first[0], bound[0] + step + (direction == "GT")), first[1])
  else:
    reach = first
  low, high = reach[0] - offset, reach[1] - offset  # the counter's own values
  if not counter[0] <= low <= high <= counter[1]:
    return None
  if view is not None and {_wrap(v, view) - v for v in (low, high)} != {offset}:
    return None  # the view wraps somewhere between: the compared values are not linear
  seen = (*reach, *bound)
  return trips if all(compared[0] <= v <= compared[1] for v in seen) else None


def _compared_range(compare: ir.Operation) -> _Range | None:
  """The range in which an integer `stablehlo.compare` reads its operands, or None."""
  natural = _int_range(compare.operands[0].type)
  if natural is None:
    return None
  if "compare_type" not in compare.attributes:
    return natural
  width = ir.IntegerType(compare.operands[0].type.element_type).width
  how = hlo.ComparisonTypeAttr(compare.attributes["compare_type"]).value
  if how == "SIGNED":
    return (-(1 << (width - 1)), (1 << (width - 1)) - 1)
  if how == "UNSIGNED":
    return (0, (1 << width) - 1)
  return None


def _counter_view(value: ir.Value) -> tuple[ir.Value, _Range | None]:
  """What a compare operand reads: a value, under at most one wrapping integer convert (whose
  result range is returned with it; None when there is none). A convert to a boolean tests
  for non-zero, it does not wrap: no view (the compare reads no counter)."""
  value = _through(value)
  if isinstance(value, ir.OpResult) and value.owner.operation.name == "stablehlo.convert":
    op = value.owner.operation
    view = _int_range(op.results[0].type)
    if view not in (None, (0, 1)) and _int_range(op.operands[0].type) is not None:
      return _through(op.operands[0]), view
  return value, None


def _fit(low: int, high: int, bounds: _Range) -> _Range | None:
  """[low, high] as values of a type of range `bounds`: itself when it fits, a single value
  wrapped around as the hardware does, and None when a range of values would wrap."""
  if bounds[0] <= low and high <= bounds[1]:
    return (low, high)
  if low == high:
    return (_wrap(low, bounds),) * 2
  return None


@dataclasses.dataclass(frozen=True, slots=True)
class _Loop:
  """What the interval analysis proved of one `stablehlo.while`."""
  trips: int | None                     # the most times its body runs; None: not provable
  body: tuple[_Range | None, ...]       # each carried value's interval as the body reads it


class _IntegerRanges:
  """Intervals of scalar integers fixed at compile time, by an interval analysis of loops.

  Follows constants, static dimension sizes, identities, integer converts and arithmetic (a
  single value wraps around as the hardware does; a range that would wrap is unknown; a
  convert to a boolean is a test for non-zero, arithmetic on booleans either value), values
  a loop carries unchanged, and induction variables: a carried value the body steps by a
  constant ranges over start + k * step for the k below the loop's proven trip count, so a
  loop starting at an outer loop's counter (`for j in range(i, n)`) is bounded by its longest
  run. Each value and loop is analysed once; expressions deeper than MAX_EXPRESSION_DEPTH are
  unknown.
  """

  def __init__(self, visit: Callable[[], None]):
    self._visit = visit
    self._values: dict[ir.Value, _Range | None] = {}
    self._loops: dict[ir.Operation, _Loop | None] = {}  # None: being analysed
    self._depth = 0

  def constant(self, value: ir.Value) -> int | None:
    interval = self.interval(value)
    return interval[0] if interval is not None and interval[0] == interval[1] else None

  def interval(self, value: ir.Value) -> _Range | None:
    value = _through(value)
    if value in self._values:
      return self._values[value]
    if self._depth >= MAX_EXPRESSION_DEPTH:
      return None
    self._visit()
    self._values[value] = None  # a cycle through this value proves nothing
    self._depth += 1
    try:
      found = self._interval_of(value)
    finally:
      self._depth -= 1
    self._values[value] = found
    return found

  def _interval_of(self, value: ir.Value) -> _Range | None:
    if isinstance(value, ir.BlockArgument):
      loop = _while_of(value)
      if loop is None:
        return None
      index = value.arg_number
      if _yielded(loop, index) == _only_block(loop.regions[1]).arguments[index]:
        return self.interval(loop.operands[index])  # carried unchanged, in cond and body
      facts = self.loop(loop) if value.owner == _only_block(loop.regions[1]) else None
      return facts.body[index] if facts is not None else None
    op = value.owner.operation
    if op.name == "stablehlo.constant":
      attr = op.attributes["value"]
      bounds = _int_range(attr.type)
      if bounds is None or not isinstance(attr, ir.DenseIntElementsAttr) or not attr.is_splat:
        return None
      # IntegerAttr reads every width (attr[0] refuses i2 and i4), a signless one as signed
      # (true is -1): in the type's range, true is 1
      return (_wrap(ir.IntegerAttr(attr.get_splat_value()).value, bounds),) * 2
    if op.name == "stablehlo.get_dimension_size":
      shape = op.operands[0].type
      dim = ir.IntegerAttr(op.attributes["dimension"]).value
      return (shape.shape[dim],) * 2 if not shape.is_dynamic_dim(dim) else None
    bounds = _int_range(op.results[0].type) if len(op.results) == 1 else None
    if bounds is None:
      return None
    boolean = bounds == (0, 1)
    if op.name == "stablehlo.convert":
      source = self.interval(op.operands[0]) if _int_range(op.operands[0].type) else None
      if source is None:
        return None
      if boolean:  # a convert to i1 is `!= 0`, not a wraparound: 2 converts to true
        return (int(not source[0] <= 0 <= source[1]), int(source != (0, 0)))
      return _fit(*source, bounds)
    if op.name in _STATIC_ARITHMETIC:
      lhs, rhs = (self.interval(o) for o in op.operands)
      if lhs is None or rhs is None:
        return None
      if boolean:  # the spec's OR and AND, a 1-bit sum on XLA's CPU: either value
        return bounds
      corners = [_STATIC_ARITHMETIC[op.name](a, b) for a in lhs for b in rhs]
      return _fit(min(corners), max(corners), bounds)
    return None

  def step(self, loop: ir.Operation, index: int) -> int | None:
    """The constant the body adds to carried value `index` each iteration, or None."""
    nxt = _yielded(loop, index)
    if not isinstance(nxt, ir.OpResult):
      return None
    op = nxt.owner.operation
    if op.name not in ("stablehlo.add", "stablehlo.subtract"):
      return None
    body_arg = _only_block(loop.regions[1]).arguments[index]
    lhs, rhs = (_through(o) for o in op.operands)
    if lhs == body_arg:
      step = self.constant(rhs)
      return None if step is None else (step if op.name == "stablehlo.add" else -step)
    if rhs == body_arg and op.name == "stablehlo.add":
      return self.constant(lhs)
    return None

  def loop(self, loop: ir.Operation) -> _Loop | None:
    """The loop's proven trip count and induction intervals (None while being analysed)."""
    if loop not in self._loops:
      self._loops[loop] = None
      trips = self._trip_count(loop)
      self._loops[loop] = _Loop(trips=trips, body=tuple(
          self._induction(loop, i, trips) for i in range(len(loop.operands))))
    return self._loops[loop]

  def _induction(self, loop: ir.Operation, index: int, trips: int | None) -> _Range | None:
    """Carried value `index` as the body reads it: start + k * step for k < trips."""
    start, step = self.interval(loop.operands[index]), self.step(loop, index)
    bounds = _int_range(loop.operands[index].type)
    if trips is None or start is None or step is None or bounds is None:
      return None
    travel = step * max(0, trips - 1)
    low, high = start[0] + min(0, travel), start[1] + max(0, travel)
    return (low, high) if bounds[0] <= low and high <= bounds[1] else None

  def _trip_count(self, loop: ir.Operation) -> int | None:
    """The most trips of a fori_loop/scan-shaped `stablehlo.while`, or None if not provable.

    The condition must compare a counter (a carried integer the body steps by a constant,
    from a start of known interval) with a bound of known interval, over integers, and the
    count must hold under the wraparound of the counter's type and of any narrowing convert
    on the way.
    """
    cond = _only_block(loop.regions[0])
    predicate = _through(_terminator(cond).operands[0])
    if not isinstance(predicate, ir.OpResult):
      return None
    compare = predicate.owner.operation
    if compare.name != "stablehlo.compare":
      return None
    direction = hlo.ComparisonDirectionAttr(compare.attributes["comparison_direction"]).value
    compared = _compared_range(compare)
    if compared is None:
      return None
    lhs, rhs = compare.operands
    for side, bound, how in ((lhs, rhs, direction), (rhs, lhs, _DIRECTION_FLIP[direction])):
      counter, view = _counter_view(side)
      if not isinstance(counter, ir.BlockArgument) or counter.owner != cond:
        continue
      index = counter.arg_number
      counter_range = _int_range(loop.operands[index].type)
      start, step, limit = (self.interval(loop.operands[index]), self.step(loop, index),
                            self.interval(bound))
      if counter_range is not None and None not in (start, step, limit):
        return _iterations(start, step, limit, how, counter=counter_range, view=view,
                           compared=compared)
    return None


def _backend_fields(op: ir.Operation):
  """A kernel call's `mhlo.backend_config` dictionary (empty where it has none)."""
  config = op.attributes["mhlo.backend_config"] if "mhlo.backend_config" in op.attributes else None
  return config if isinstance(config, ir.DictAttr) else {}


def _string_bytes(fields, key: str) -> bytes | None:
  """The bytes of a backend config's string field, None where it has none or another kind."""
  if key not in fields:
    return None
  try:
    return ir.StringAttr(fields[key]).value_bytes
  except ValueError:
    return None


# What reading a kernel's module found: its fingerprint, its state, the buffers it may read.
_KernelRead = tuple[str | None, tuple[str, ...], frozenset[int] | None, frozenset[int] | None]


class _KernelModules:
  """Each kernel call's module, read once per analysis (its payload memoized): its fingerprint
  (fingerprint.py) and the state it declares (kernel_state.py)."""

  def __init__(self, limits: AnalysisLimits):
    self._limits = limits
    self._read: dict[tuple[str, bytes], _KernelRead] = {}

  def read(self, op: ir.Operation, target: str) -> _KernelRead:
    """(fingerprint or None where its module is missing or does not parse, state findings, the
    buffers it may read, the buffers it may write: indices into the call's operands then
    results, None for any). A Triton or Mosaic GPU module that cannot be read is a finding
    itself: what it declares cannot be checked. A Mosaic TPU module is fingerprinted only
    (kernel_state.py says why); only a Triton module's reads and writes are traced
    (kernel_state.read_buffers, written_buffers)."""
    fields = _backend_fields(op)
    backend = KERNEL_TARGETS[target]
    kernel = ir.StringAttr(fields["name"]).value if "name" in fields else target
    field = {"triton": "ir", "mosaic_gpu": "module"}.get(backend)
    if field is None:
      payload = (ir.StringAttr(op.attributes["backend_config"]).value.encode()
                 if "backend_config" in op.attributes else None)
    else:
      payload = ir.StringAttr(fields[field]).value_bytes if field in fields else None
    # The buffers XLA hands a Mosaic GPU host function: one per operand and result.
    buffers = len(op.operands) + len(op.results)
    # jaxlib keeps a judge process' compiled Mosaic GPU kernels under their kernel_hash alone:
    # one that is not its module's sha256 may run a kernel compiled before, not this module.
    mismatch = backend == "mosaic_gpu" and payload is not None and (
        _string_bytes(fields, "kernel_hash") != hashlib.sha256(payload).digest())
    key = (f"{target}\0{kernel}\0{buffers}\0{mismatch}", payload or b"")
    if key not in self._read:
      digest, state, reads, writes = self._parse(backend, kernel, payload, buffers)
      if mismatch:
        state = (*state, "a kernel_hash that is not its module's sha256 (the kernel run need "
                         f"not be the module read) in Mosaic GPU kernel module {kernel}")
      self._read[key] = digest, state, reads, writes
    return self._read[key]

  def _parse(self, backend: str, kernel: str, payload: bytes | None, buffers: int
             ) -> _KernelRead:
    label = kernel_state.LABELS.get(backend, "Mosaic TPU")
    if payload is None:
      return None, (() if backend == "mosaic_tpu"
                    else kernel_state.unreadable(backend, kernel, "no module")), None, None
    try:
      if backend == "triton":
        module = fingerprint.parse_triton(payload)
      elif backend == "mosaic_gpu":
        module = fingerprint.parse_mosaic_gpu(payload)
      else:
        module = fingerprint.parse_mosaic_tpu(payload.decode())
    except (ir.MLIRError, ValueError, KeyError, TypeError) as e:  # JSON and base64 errors too
      logger.debug("a %s kernel's module does not parse: %s", label, e)
      return None, (() if backend == "mosaic_tpu"
                    else kernel_state.unreadable(backend, kernel, "it does not parse")), None, None
    digest = fingerprint.structural_digest(module)
    if backend == "mosaic_tpu":
      return digest, (), None, None
    try:
      if backend == "mosaic_gpu" and "sym_name" in module.operation.attributes:
        kernel = ir.StringAttr(module.operation.attributes["sym_name"]).value
      traced = backend == "triton"
      reads, writes = ((kernel_state.read_buffers(module, max_ops=self._limits.op_visits),
                        kernel_state.written_buffers(module, max_ops=self._limits.op_visits))
                       if traced else (None, None))
      return digest, kernel_state.module_state(module, backend, kernel,
                                               max_ops=self._limits.op_visits,
                                               buffers=buffers), reads, writes
    except (ValueError, TypeError, KeyError) as e:  # an attribute not of the type it must be
      return digest, kernel_state.unreadable(backend, kernel,
                                             f"its ops cannot be read: {e}"), None, None


def _kernel_key(op: ir.Operation, target: str, modules: _KernelModules) -> _KernelKey:
  """What the call's backend_config says of the kernel; Mosaic GPU's records no name or grid."""
  fields = _backend_fields(op)

  def number(key: str) -> int | None:
    return ir.IntegerAttr(fields[key]).value if key in fields else None

  name = ir.StringAttr(fields["name"]).value if "name" in fields else target
  grid = tuple(number(k) for k in ("grid_x", "grid_y", "grid_z") if k in fields)
  return (name, KERNEL_TARGETS[target], grid, number("num_warps"), number("num_stages"),
          modules.read(op, target)[0])


def _contraction_flops(op: ir.Operation) -> int:
  """An honest FLOP estimate for contractions and dense linear algebra."""
  out = _out_elements(op)
  operand_types = [o.type for o in op.operands]
  if op.name == "stablehlo.dot_general":
    dims = hlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lhs = operand_types[0].shape
    return 2 * out * math.prod(lhs[d] for d in dims.lhs_contracting_dimensions)
  if op.name == "stablehlo.dot":
    return 2 * out * operand_types[0].shape[-1]
  if op.name == "stablehlo.convolution":
    dims = hlo.ConvDimensionNumbers(op.attributes["dimension_numbers"])
    kernel = operand_types[1].shape
    return 2 * out * math.prod(kernel) // max(1, kernel[dims.kernel_output_feature_dimension])
  if op.name == "stablehlo.triangular_solve":
    return out * operand_types[0].shape[-1]
  if op.name == "stablehlo.cholesky":
    return out * operand_types[0].shape[-1]
  if op.name == "stablehlo.fft":
    length = math.prod(ir.DenseI64ArrayAttr(op.attributes["fft_length"]))
    return 5 * out * max(1, math.ceil(math.log2(max(length, 2))))
  raise AssertionError(op.name)


class _Analyzer:
  """Walks functions from @main, costing each op and tracking which values derive from data.

  Each function is analysed once per pattern of data-derived arguments, in two passes that are
  linear in its size: a sparse fixpoint marks which values derive from data (a value turns
  data-derived at most once, and only the users of a value that turned are revisited), then
  one walk costs every op, a loop body once, multiplied by its trip count. Every op visited
  counts against the limits' budget, and calls and regions nested deeper than their depth
  limit are refused: whatever the module, the analysis ends within a bounded time.
  """

  def __init__(self, module: ir.Module, allowed: frozenset[str], limits: AnalysisLimits,
               kernel_modules: _KernelModules):
    self._module = module  # owns the operations below: they dangle once it is collected
    self._functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                       for op in module.body.operations if op.operation.name == "func.func"}
    self._allowed = allowed
    self._limits = limits
    self._kernel_modules = kernel_modules
    self._visits = 0
    self._depth = 0  # calls and regions entered, along the current chain of calls
    self._data: dict[ir.Value, bool] = {}
    self._stored: dict[ir.Value, bool] = {}
    self._memo: dict[tuple[str, tuple[bool, ...]], tuple[_Tally, tuple[bool, ...]]] = {}
    self._active: set[str] = set()
    self._ranges = _IntegerRanges(self._visit)
    self.kept_operands: set[str] = set()  # _kept_operands, _dropped_results of every kernel
    self._calls: dict[str, list[ir.Operation]] | None = None  # func.calls by callee, when asked
    self._rules: dict[str, Callable[[ir.Operation, _Tally], None]] = {
        "func.call": self._call, "stablehlo.custom_call": self._custom_call,
        "stablehlo.while": self._while,
        "stablehlo.case": self._branches, "stablehlo.if": self._branches,
        "stablehlo.reduce": self._reduce, "stablehlo.reduce_window": self._reduce_window,
        "stablehlo.sort": self._sort, "stablehlo.map": self._map,
        "stablehlo.scatter": self._scatter, "stablehlo.gather": self._gather,
        "stablehlo.dynamic_slice": self._dynamic_slice,
        "stablehlo.dynamic_update_slice": self._dynamic_update_slice,
        "stablehlo.select": self._select, "stablehlo.convert": self._convert,
    }

  def _visit(self, count: int = 1) -> None:
    self._visits += count
    if self._visits > self._limits.op_visits:
      raise ModuleAnalysisError(
          f"the analysis ran out of its budget of {self._limits.op_visits} op visits: the "
          "module is too large or too convoluted to be costed")

  def main(self) -> _Tally:
    fn = self._functions.get("main")
    if fn is None:
      raise ModuleAnalysisError("the module has no @main function")
    tally, _ = self.function("main", (True,) * len(_only_block(fn.regions[0]).arguments))
    return tally

  def function(self, name: str, data_args: tuple[bool, ...]) -> tuple[_Tally, tuple[bool, ...]]:
    """A function's cost and which results derive from data, given which arguments do."""
    key = (name, data_args)
    if key not in self._memo:
      if name not in self._functions:
        raise ModuleAnalysisError(f"call to @{name}, which the module does not define")
      if name in self._active:
        raise ModuleAnalysisError(f"@{name} is recursive: its cost is unbounded")
      block = _only_block(self._functions[name].regions[0])
      if len(data_args) != len(block.arguments):
        raise ModuleAnalysisError(f"@{name} is called with {len(data_args)} arguments, not "
                                  f"{len(block.arguments)}")
      self._active.add(name)
      self._enter()
      for arg, is_data in zip(block.arguments, data_args, strict=True):
        self._data[arg] = is_data
      self._flow(block)
      self._memo[key] = (self._block(block), self._yield_data(block))
      self._depth -= 1
      self._active.discard(name)
    return self._memo[key]

  def _enter(self) -> None:
    self._depth += 1
    if self._depth > self._limits.nesting:
      raise ModuleAnalysisError(f"calls and regions nested deeper than {self._limits.nesting}")

  # -- which values derive from data ------------------------------------------------------------

  def _ops(self, block: ir.Block) -> list[ir.Operation]:
    """The block's ops and those of their regions, in program order; depth-limited."""
    found: list[ir.Operation] = []
    stack = [(iter(block.operations), self._depth)]
    while stack:
      ops, depth = stack[-1]
      op = next(ops, None)
      if op is None:
        stack.pop()
        continue
      op = op.operation
      self._visit()
      found.append(op)
      if op.regions:
        if depth + 1 > self._limits.nesting:
          raise ModuleAnalysisError(f"calls and regions nested deeper than {self._limits.nesting}")
        stack.extend((iter(b.operations), depth + 1) for r in reversed(op.regions)
                     for b in reversed(list(r.blocks)))
    return found

  def _flow(self, block: ir.Block) -> None:
    """Marks the values of a function's body that derive from data, by a sparse fixpoint
    from none of them (another pattern of arguments may have marked them before)."""
    order = self._ops(block)
    for op in order:
      for value in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.arguments)):
        self._data[value] = False
    pending = collections.deque(order)
    queued = set(order)
    while pending:
      op = pending.popleft()
      queued.discard(op)
      self._visit(1 + len(op.operands))
      for user in self._transfer(op):
        if user not in queued:
          queued.add(user)
          pending.append(user)

  def _set(self, values: Iterable[ir.Value], flags: Iterable[bool]) -> list[ir.Operation]:
    """Raises the flags of `values`; the ops that use a value that turned data-derived."""
    users = []
    for value, flag in zip(values, flags, strict=True):
      if flag and not self._data.get(value, False):
        users.extend(use.owner.operation for use in value.uses)
      self._data[value] = self._data.get(value, False) or flag
    return users

  def _transfer(self, op: ir.Operation) -> list[ir.Operation]:
    """Which of the op's results (and region arguments) derive from data, from its operands."""
    name = op.name
    if name in ("stablehlo.return", "func.return"):
      parent = op.parent
      return [parent.operation] if parent is not None and name == "stablehlo.return" else []
    operands = self._any_data(op.operands)
    if name == "stablehlo.while":
      cond, body = (_only_block(r) for r in op.regions)
      carried = [a or b for a, b in zip((self._is_data(o) for o in op.operands),
                                        self._yield_flags(body), strict=True)]
      users = self._set(cond.arguments, carried) + self._set(body.arguments, carried)
      # A loop that stops on data (or after a count not fixed at compile time) leaves its
      # counters holding data-derived values.
      stops = self._yield_flags(cond)[0] or self._ranges.loop(op).trips is None
      return users + self._set(op.results, [c or stops for c in carried])
    if name in ("stablehlo.case", "stablehlo.if"):
      flags = [self._is_data(op.operands[0])] * len(op.results)
      for region in op.regions:
        flags = [a or b for a, b in zip(flags, self._yield_flags(_only_block(region)), strict=True)]
      return self._set(op.results, flags)
    if name == "func.call":
      if "callee" not in op.attributes:
        return self._set(op.results, [True] * len(op.results))
      _, results = self.function(_symbol(op, "callee"), tuple(self._is_data(o) for o in op.operands))
      return self._set(op.results, results)
    if name == "stablehlo.custom_call":
      target = _custom_target(op)
      plumbing = target in PLUMBING_CUSTOM_CALLS or target in self._allowed
      return self._set(op.results, [operands if plumbing else True] * len(op.results))
    if name == "stablehlo.composite":  # refused: what XLA runs for it is not its decomposition
      return self._set(op.results, [True] * len(op.results))
    users = []
    for region in op.regions:  # combiners, comparators, bodies of unknown ops
      for block in region.blocks:
        users += self._set(block.arguments, [operands] * len(block.arguments))
        operands = operands or any(self._yield_flags(block))
    # A static dimension size is a shape, not data, even of a data operand.
    return users + self._set(op.results, [operands and name != "stablehlo.get_dimension_size"]
                             * len(op.results))

  def _yield_flags(self, block: ir.Block) -> list[bool]:
    return [self._data.get(v, False) for v in _terminator(block).operands]

  def _yield_data(self, block: ir.Block) -> tuple[bool, ...]:
    return tuple(self._is_data(v) for v in _terminator(block).operands)

  def _is_data(self, value: ir.Value) -> bool:
    return self._data.get(value, True)

  def _any_data(self, values: Iterable[ir.Value]) -> bool:
    return any(self._is_data(v) for v in values)

  # -- what the ops cost --------------------------------------------------------------------------

  def _block(self, block: ir.Block) -> _Tally:
    self._mark_stored(block)
    tally = _Tally()
    for op in block.operations:
      self._visit()
      self._op(op.operation, tally)
    return tally

  # -- which values XLA stores --------------------------------------------------------------------

  def _mark_stored(self, block: ir.Block) -> None:
    """Marks the block's array values that XLA must write to memory: those with a user other
    than a fusing op (_FUSING) in this block, or a view of them that is stored. Last op first,
    so a view's result is marked before its operand."""
    ops = [op.operation for op in block.operations]
    here = set(ops)
    for op in reversed(ops):
      for result in op.results:
        self._stored[result] = _is_array(result) and self._needs_memory(result, here)

  def _needs_memory(self, value: ir.Value, here: set[ir.Operation]) -> bool:
    for use in value.uses:
      self._visit()
      user = use.owner.operation
      if user not in here or user.name not in _FUSING_OR_VIEW:
        return True
      if user.name in _VIEWS and any(self._stored.get(r, True) for r in user.results):
        return True
    return False

  def _written(self, op: ir.Operation) -> int:
    """The bytes an op outside the kernels writes per run: its stored results (a constant,
    broadcast, iota or barrier included), only the updates of an in-place update; nothing for
    plumbing, views and control flow (their regions' ops are charged) or for a kernel (its
    results are the kernel's own)."""
    name = op.name
    if name in _NO_BUFFER or name.startswith("sdy.") or _custom_target(op) in KERNEL_TARGETS:
      return 0
    if name == "stablehlo.dynamic_update_slice":
      return _bytes(op.operands[1].type)
    if name == "stablehlo.scatter":
      return sum(_bytes(u.type) for u in op.operands[(len(op.operands) - 1) // 2 + 1:])
    return sum(_bytes(r.type) for r in op.results if self._stored.get(r, True))

  def _op(self, op: ir.Operation, tally: _Tally) -> None:
    name = op.name
    tally.charge(name, written=self._written(op))
    rule = self._rules.get(name)
    if rule is not None:
      rule(op, tally)
      return
    if name.startswith("sdy.") and not op.regions:
      return
    if name in _FREE:
      return
    out = _out_elements(op)
    if name in STATEFUL_OPS:  # refused as stateful_ops; their outputs are their work
      tally.charge(name, flops=out)
    elif name in _ELEMENTWISE:
      tally.charge(name, flops=out)
    elif name in _TRANSCENDENTAL:
      tally.charge(name, flops=out, transcendentals=out)
    elif name in _CONTRACTIONS:
      flops = _contraction_flops(op)
      tally.charge(name, flops=flops, contraction=flops)
    else:
      self._unknown(op, tally)

  def _unknown(self, op: ir.Operation, tally: _Tally) -> None:
    """No cost model: refused; costed at its output elements, times the work of its regions
    as if run once per element. A composite is named with its name: XLA may run a native op
    of that name instead of its decomposition, so the decomposition is not costed."""
    label = (f'{op.name} "{ir.StringAttr(op.attributes["name"]).value}"'
             if op.name == "stablehlo.composite" and "name" in op.attributes else op.name)
    tally.unknown.add(label)
    per_element = self._regions_work(op)
    tally.add(per_element, _out_elements(op), label=label)
    if not per_element.work:
      tally.charge(label, flops=_out_elements(op))

  def _regions_work(self, op: ir.Operation) -> _Tally:
    """The summed tally of an op's regions."""
    total = _Tally()
    for region in op.regions:
      for block in region.blocks:
        total.add(self._region(block))
    return total

  def _region(self, block: ir.Block) -> _Tally:
    self._enter()
    tally = self._block(block)
    self._depth -= 1
    return tally

  def _applied(self, op: ir.Operation, tally: _Tally, applications: int) -> None:
    """A region (combiner, comparator) run `applications` times; one op each at the least."""
    body = self._regions_work(op)
    tally.add(body, applications, label=op.name)
    if not body.work:
      tally.charge(op.name, flops=applications)

  def _convert(self, op: ir.Operation, tally: _Tally) -> None:
    """A float convert that keeps every value (bfloat16 to float32) computes nothing, and nor
    does the rounding of a float result that only becomes what @main returns (a float32
    kernel's answer stored as the task's bfloat16): they cost their bytes alone. Any other
    convert is an element-wise op (a float to integer one computes: adv_astype)."""
    if not (_exact_float_widening(op) or self._rounds_the_answer(op)):
      tally.charge(op.name, flops=_out_elements(op))

  def _rounds_the_answer(self, op: ir.Operation) -> bool:
    """Whether `op` converts floats to floats and its result reaches nothing but @main's
    return: directly, through ops that only move elements (_MOVES: a reshape, a static slice,
    a transpose) and from a private function's return to its calls' results (a jitted
    helper). Any other use computes with the rounded values. Each step counts against the
    analysis' budget."""
    if _float_info(op.operands[0].type) is None or _float_info(op.results[0].type) is None:
      return False
    returned, queue = False, collections.deque([op.results[0]])
    while queue:
      for use in queue.popleft().uses:
        self._visit()
        owner, k = use.owner.operation, use.operand_number
        if owner.name == "func.return":
          name = ir.StringAttr(owner.parent.operation.attributes["sym_name"]).value
          returned = returned or name == "main"
          queue.extend(call.results[k] for call in self._calls_of(name) if name != "main")
        elif owner.name in _MOVES and k == 0:
          queue.append(owner.results[0])
        else:
          return False
    return returned

  def _reduce(self, op: ir.Operation, tally: _Tally) -> None:
    self._applied(op, tally, _elements(op.operands[0].type))

  def _reduce_window(self, op: ir.Operation, tally: _Tally) -> None:
    window = math.prod(ir.DenseI64ArrayAttr(op.attributes["window_dimensions"]))
    self._applied(op, tally, _elements(op.results[0].type) * window)

  def _sort(self, op: ir.Operation, tally: _Tally) -> None:
    """n log n comparisons along the sorted dimension."""
    shape = op.operands[0].type.shape
    length = shape[ir.IntegerAttr(op.attributes["dimension"]).value] if shape else 1
    passes = max(1, math.ceil(math.log2(max(length, 2))))
    self._applied(op, tally, _elements(op.operands[0].type) * passes)

  def _map(self, op: ir.Operation, tally: _Tally) -> None:
    self._applied(op, tally, _elements(op.results[0].type))

  def _scatter(self, op: ir.Operation, tally: _Tally) -> None:
    """Updates placed by data-derived indices are moves; the combiner runs once per update."""
    n = (len(op.operands) - 1) // 2
    indices, updates = op.operands[n], op.operands[n + 1:]
    tally.prefilled += sum(self._prefill(v) for v in op.operands[:n])
    written = sum(_elements(u.type) for u in updates)
    if self._is_data(indices):
      tally.charge(op.name, moves=written)
    tally.add(self._regions_work(op), written // max(1, n), label=op.name)

  def _gather(self, op: ir.Operation, tally: _Tally) -> None:
    if self._is_data(op.operands[1]):
      tally.charge(op.name, moves=_out_elements(op))

  def _dynamic_slice(self, op: ir.Operation, tally: _Tally) -> None:
    if self._any_data(op.operands[1:]):
      tally.charge(op.name, moves=_out_elements(op))

  def _dynamic_update_slice(self, op: ir.Operation, tally: _Tally) -> None:
    """Counts the update's elements: the rest of the result is the operand passed through."""
    tally.prefilled += self._prefill(op.operands[0])
    if self._any_data(op.operands[2:]):
      tally.charge(op.name, moves=_elements(op.operands[1].type))

  def _select(self, op: ir.Operation, tally: _Tally) -> None:
    if self._is_data(op.operands[0]):
      tally.charge(op.name, moves=_out_elements(op))
    else:
      tally.charge(op.name, flops=_out_elements(op))

  def _call(self, op: ir.Operation, tally: _Tally) -> None:
    if "callee" not in op.attributes:
      self._unknown(op, tally)
      return
    callee, _ = self.function(_symbol(op, "callee"), tuple(self._is_data(o) for o in op.operands))
    tally.add(callee)

  def _custom_call(self, op: ir.Operation, tally: _Tally) -> None:
    target = _custom_target(op)
    if target in KERNEL_TARGETS:
      key = _kernel_key(op, target, self._kernel_modules)
      tally.kernels[key] += 1
      tally.kernel_bytes += _results_bytes(op)
      tally.prefilled += sum(self._prefill(op.operands[j]) for j in set(_aliases(op).values()))
      _, _, reads, writes = self._kernel_modules.read(op, target)
      self.kept_operands.update(self._kept_operands(op, key[0], writes))
      if KERNEL_TARGETS[target] != "mosaic_tpu":  # no judge runs one (kernel_state.py)
        self.kept_operands.update(self._dropped_results(op, key[0], reads))
    elif target not in PLUMBING_CUSTOM_CALLS and target not in self._allowed:
      tally.disallowed.add(target)
      tally.charge(f"custom_call @{target}", flops=_out_elements(op))

  def _kept_operands(self, op: ir.Operation, kernel: str, writes: frozenset[int] | None
                     ) -> list[str]:
    """The kernel call's operands that the kernel may write (`writes`: buffer indices, operands
    then results; None for any) and that are not aliased to a result: a buffer XLA hands the
    call is its own (an input of @main, a constant or what XLA folds into one, kept across
    calls), and a store through the kernel's raw pointer to it is state, or a write to an input.
    XLA copies an aliased operand into the result's buffer first, so only unaliased ones are
    listed. One a Triton kernel only loads from (a constant mask) is no state. Where the writes
    are not traced (Mosaic GPU, inline PTX), every operand that derives from no input is listed,
    as before the tracing; an input the kernel writes is the correctness runs' to catch."""
    aliased = set(_aliases(op).values())
    return [f"operand {i} of kernel {kernel} ({_type_text(v.type)}) "
            + ("derives from no input (a buffer XLA keeps across calls, which the kernel can "
               "write)" if not self._is_data(v) else
               "is written by the kernel and aliased to no result (a buffer XLA keeps across "
               "calls, or one of @main's inputs)")
            for i, v in enumerate(op.operands)
            if i not in aliased and (i in writes if writes is not None else not self._is_data(v))]

  def _dropped_results(self, op: ir.Operation, kernel: str, reads: frozenset[int] | None
                       ) -> list[str]:
    """The kernel call's results that nothing the program returns reads and that the kernel may
    read (`reads`: buffer indices, operands then results; None for any). XLA cannot drop one
    result of a custom call, so it gives each a buffer in the executable's temporary
    allocation, which it never initialises: a kernel reading it reads what the last call left,
    state with no op to show it. A result aliased to an operand XLA computes afresh in this
    call (Pallas' own GMEM scratch: zeros aliased to a dropped result) holds that operand, so
    it is no state; aliased to another kernel's result, it is that result's buffer, which the
    other kernel need not write. One a Triton kernel only stores to (statistics a wrapper does
    not need) is no state."""
    aliases = _aliases(op)
    found = []
    for i, r in enumerate(op.results):
      j = aliases.get(i)
      buffers = {len(op.operands) + i} | ({j} if j is not None else set())
      if ((j is not None and self._fresh(op.operands[j]))
          or (reads is not None and not buffers & reads) or self._reaches_out(r)):
        continue
      found.append(f"result {i} of kernel {kernel} ({_type_text(r.type)}) reaches nothing the "
                   "call returns and the kernel reads it (a buffer XLA never initialises: what "
                   "the last call left there)")
    return found

  def _fresh(self, value: ir.Value) -> bool:
    """Whether XLA computes `value` afresh in each call from @main's inputs and constants alone:
    no kernel, call, op with regions or another function's argument among what it derives from."""
    seen, queue = {value}, collections.deque([value])
    while queue:
      v = queue.popleft()
      self._visit()
      if isinstance(v, ir.BlockArgument):
        function = v.owner.owner
        if (function is None or function.operation.name != "func.func"
            or ir.StringAttr(function.attributes["sym_name"]).value != "main"):
          return False
        continue
      owner = v.owner.operation
      if owner.regions or owner.name in ("stablehlo.custom_call", "func.call"):
        return False
      for operand in owner.operands:
        if operand not in seen:
          seen.add(operand)
          queue.append(operand)
    return True

  def _prefill(self, value: ir.Value) -> int:
    """The bytes XLA moves to fill the buffer of `value` before an op updates it in place (a
    kernel's operand aliased to a result, a dynamic_update_slice's or a scatter's operand),
    where no kernel of the call computes it: the value is, through views (reshape,
    bitcast_convert, broadcasts, an optimization barrier, a call's result, a loop's carry from
    its start), a constant or a function's argument, a buffer XLA must keep, so it copies it
    into the op's result first (read and written: twice its bytes), or a splat, which it sets
    (its bytes); inside a loop, in each trip (a carry the body changes is copied once: charged
    in each trip all the same, more than it cost, never less). Device copies
    and memsets are no kernel launch: the CUPTI timer never sees them (red team round 13's
    adv_memcpy_init_one_hot), so the judge charges these bytes at the measured copy rate.
    Computed values (a fusion, a kernel's result) are written by a timed kernel: 0."""
    size, v = _bytes(value.type), value
    while True:
      self._visit()
      if isinstance(v, ir.BlockArgument):
        loop = _while_of(v)
        if loop is not None:  # a loop's carry starts as its operand (counted in every trip)
          v = loop.operands[v.arg_number]
          continue
        owner = v.owner.owner
        return 2 * size if owner is not None and owner.operation.name == "func.func" else 0
      owner = v.owner.operation
      if owner.name == "stablehlo.constant":
        return size if _is_splat(owner) else 2 * size
      if owner.name in _VIEWS:
        v = owner.operands[0]
      elif owner.name == "stablehlo.optimization_barrier":
        v = owner.operands[v.result_number]
      elif (owner.name == "func.call" and "callee" in owner.attributes
            and _symbol(owner, "callee") in self._functions):
        callee = self._functions[_symbol(owner, "callee")]
        v = _terminator(_only_block(callee.regions[0])).operands[v.result_number]
      else:
        return 0

  def _reaches_out(self, value: ir.Value) -> bool:
    """Whether `value` may reach what the program returns, followed forward breadth first, each
    value once and every step counted against the analysis' budget: through any op's results;
    a kernel's only where it reads the value (`_KernelModules.read`; else through the result
    it is aliased to, if any); from a function's return to its calls' results and from a call
    into its callee's argument; through a while loop carrying it in its slot alone (its
    condition decides, it carries nothing) and through a region's return to its op's result."""
    seen, queue = {value}, collections.deque([value])

    def reach(values: Iterable[ir.Value]) -> None:
      for v in values:
        if v not in seen:
          seen.add(v)
          queue.append(v)

    while queue:
      for use in queue.popleft().uses:
        self._visit()
        owner, k = use.owner.operation, use.operand_number
        parent = owner.parent.operation if owner.parent is not None else None
        if owner.name == "func.return":
          name = ir.StringAttr(parent.attributes["sym_name"]).value
          if name == "main":
            return True
          reach(call.results[k] for call in self._calls_of(name))
        elif owner.name == "func.call":
          callee = (self._functions.get(_symbol(owner, "callee"))
                    if "callee" in owner.attributes else None)
          if callee is None:
            return True  # the cost analysis refuses a call to nothing
          reach([_only_block(callee.regions[0]).arguments[k]])
        elif owner.name == "stablehlo.custom_call" and _custom_target(owner) in KERNEL_TARGETS:
          reads = self._kernel_modules.read(owner, _custom_target(owner))[2]
          if reads is None or k in reads:
            reach(owner.results)
          else:
            reach(owner.results[i] for i, j in _aliases(owner).items() if j == k)
        elif owner.name == "stablehlo.while":
          reach([owner.results[k], *(_only_block(r).arguments[k] for r in owner.regions)])
        elif owner.name == "stablehlo.return" and parent.name == "stablehlo.while":
          if owner.block != _only_block(parent.regions[0]):  # the body's, not the condition's
            reach([parent.results[k], *(_only_block(r).arguments[k] for r in parent.regions)])
        elif owner.name == "stablehlo.return" and parent.name in ("stablehlo.case", "stablehlo.if"):
          reach([parent.results[k]])
        elif owner.name == "stablehlo.return":
          reach(parent.results)  # reduce, sort, map, scatter: results made from it
        else:
          reach(owner.results)
    return False

  def _calls_of(self, name: str) -> list[ir.Operation]:
    if self._calls is None:
      self._calls = collections.defaultdict(list)

      def visit(op: ir.Operation) -> ir.WalkResult:
        if op.operation.name == "func.call" and "callee" in op.operation.attributes:
          self._calls[_symbol(op.operation, "callee")].append(op.operation)
        return ir.WalkResult.ADVANCE
      self._module.operation.walk(visit)
    return self._calls.get(name, [])

  def _while(self, op: ir.Operation, tally: _Tally) -> None:
    """Body x trip count (the most trips, from the interval analysis of its counters).

    A loop whose trip count cannot be proven is unbounded as soon as it changes a carried value
    (its body may be all free ops: rotating a vector of offsets and slicing at its head until
    the head matches the data moves the table by its content), or its body costs work.
    """
    cond_block, body_block = (_only_block(r) for r in op.regions)
    body, cond = self._region(body_block), self._region(cond_block)
    trips = self._ranges.loop(op).trips
    if trips is None:
      changes = any(_unchanged(v) != arg for v, arg in
                    zip(_terminator(body_block).operands, body_block.arguments, strict=True))
      tally.add(body)
      tally.add(cond)
      tally.unbounded += 1 if changes or body.work else 0
    else:
      tally.add(body, trips)
      tally.add(cond, trips + 1)

  def _branches(self, op: ir.Operation, tally: _Tally) -> None:
    """Each cost the most any branch has of it (FLOPs, contractions, transcendentals, moves,
    each op's share), whichever branch runs; kernels and findings of every branch.

    A branch index (or predicate) derived from data picks the results by the data's content,
    as a select does: their elements are data-dependent moves, whatever the branches cost.
    """
    if self._is_data(op.operands[0]):
      tally.charge(op.name, moves=sum(_elements(r.type) for r in op.results))
    tally.add(_Tally.most([self._region(_only_block(r)) for r in op.regions]))


# The attributes jax's lowering gives a Triton or Mosaic GPU kernel call (every shipped kernel's,
# at both precisions), each with the form its value must have. XLA compiles the op's own
# `backend_config` (a string, or a dictionary under api_version 4) wherever it is not empty,
# and `mhlo.backend_config`, the one the judge reads, only then: a kernel call carries no
# attribute but these, and no `backend_config` but the empty one (red team round 10).
_KERNEL_CALL_ATTRIBUTES: Final = {
    **{name: kernel_state.ANY_VALUE for name in (
        "call_target_name", "mhlo.backend_config", "operand_layouts", "result_layouts",
        "output_operand_aliases", "mhlo.frontend_attributes", "mhlo.sharding")},
    "backend_config": re.compile(r'""')}


def _call_attributes(op: ir.Operation, target: str) -> set[str]:
  """The attributes of a Triton or Mosaic GPU kernel call its lowering does not give it, each a
  finding; Mosaic TPU calls (their config is the op's own backend_config) are not read here."""
  if KERNEL_TARGETS[target] == "mosaic_tpu":
    return set()
  found = kernel_state.attribute_findings(op, _KERNEL_CALL_ATTRIBUTES, f"kernel call {target}")
  if not isinstance(_backend_fields(op), ir.DictAttr):
    found.add(f"the {target} call's mhlo.backend_config is not a dictionary")
  return found


def _stateful_ops(module: ir.Module, kernel_modules: _KernelModules) -> tuple[str, ...]:
  """Ops with hidden state or side effects anywhere in the module, reachable or not: the
  STATEFUL_OPS, custom calls marked has_side_effect other than the kernels, and the state the
  kernels' own modules declare (kernel_state.py), each named with its kernel module."""
  found: set[str] = set()

  def visit(op: ir.Operation) -> ir.WalkResult:
    op = op.operation
    target = _custom_target(op)
    if op.name in STATEFUL_OPS:
      found.add(op.name)
    elif target in KERNEL_TARGETS:
      found.update(kernel_modules.read(op, target)[1])
      found.update(_call_attributes(op, target))
    elif (target is not None and "has_side_effect" in op.attributes
          and ir.BoolAttr(op.attributes["has_side_effect"]).value):
      found.add(f"custom_call @{target}")
    return ir.WalkResult.ADVANCE

  module.operation.walk(visit)
  return tuple(sorted(found))


# The tokens of MLIR text that open and close a nesting: brackets, outside string literals
# (each skipped whole, in memory of its own size: fingerprint.QUOTED_STRING).
_NESTING_TOKENS: Final = re.compile(rf'{fingerprint.QUOTED_STRING}|->|[{{}}()\[\]<>]')


def _check_nesting(mlir_text: str, limit: int) -> None:
  """Refuses text nested deeper than `limit` brackets, before MLIR's recursive parser would
  overflow its stack on it (a cheap scan: one regular expression over the text)."""
  depth = 0
  for token in _NESTING_TOKENS.finditer(mlir_text):
    bracket = token.group()
    if bracket in "{([<":
      depth += 1
      if depth > limit:
        raise ModuleAnalysisError(f"the module's text is nested deeper than {limit} brackets "
                                  "(regions, types or attributes inside one another)")
    elif bracket in "})]>":
      depth -= 1


def _parse(mlir_text: str, limits: AnalysisLimits) -> ir.Module:
  _check_nesting(mlir_text, limits.brackets)
  try:
    return ir.Module.parse(mlir_text, context=mlir_context.make_context())
  except ir.MLIRError as e:
    raise ModuleAnalysisError(f"the module does not parse: {e}") from None


def analyze_module(mlir_text: str, *, allowed_custom_calls: frozenset[str] = frozenset(),
                   limits: AnalysisLimits = AnalysisLimits()) -> ModuleReport:
  """Kernels and outside work of an exported module's text (`Exported.mlir_module()`).

  `allowed_custom_calls` names extra targets the judge trusts as plumbing: they are free, so
  list only targets that compute nothing. Raises ModuleAnalysisError when the module cannot
  be costed soundly or within `limits`; the judge rejects those.
  """
  module = _parse(mlir_text, limits)
  kernel_modules = _KernelModules(limits)
  analyzer = _Analyzer(module, allowed_custom_calls, limits, kernel_modules)
  try:
    tally = analyzer.main()
  except RecursionError:  # a safety net under the depth limits
    raise ModuleAnalysisError("the module is nested too deeply to be analysed") from None
  kernels = tuple(
      KernelCall(name=name, backend=backend, grid=grid, num_warps=warps, num_stages=stages,
                 launches=launches, fingerprint=digest)
      for (name, backend, grid, warps, stages, digest), launches in tally.kernels.items()
      if launches)  # a kernel in a loop that never runs is no kernel
  return ModuleReport(
      kernels=kernels, outside_flops=tally.flops, outside_contraction_flops=tally.contraction,
      outside_transcendentals=tally.transcendentals, data_dependent_moves=tally.moves,
      outside_bytes=tally.bytes, kernel_bytes=tally.kernel_bytes, prefilled_bytes=tally.prefilled,
      unknown_ops=tuple(sorted(tally.unknown)), unbounded_loops=tally.unbounded,
      disallowed_custom_calls=tuple(sorted(tally.disallowed)),
      stateful_ops=tuple(sorted({*_stateful_ops(module, kernel_modules),
                                 *analyzer.kept_operands})),
      top_ops=tuple((name, cost) for name, cost in tally.op_costs.most_common(TOP_OPS) if cost),
      top_byte_ops=tuple((name, n) for name, n in tally.op_bytes.most_common(TOP_OPS) if n))


def _percent(part: int, whole: int) -> str:
  return f"{100 * part / whole:.1f}%"


def bytes_limit(task_bytes: int, factor: float = OUTSIDE_BYTES_LIMIT) -> int:
  """The most bytes per call, `factor` times a task's `task_bytes` own bytes or the floor."""
  return max(int(factor * task_bytes), BYTES_FLOOR)


def module_reasons(report: ModuleReport, *, task_flops: int, output_elements: int,
                   task_bytes: int) -> list[str]:
  """Why the module is not an honest Pallas kernel for the task; empty when it is.

  The work limit is relative to W = max(task FLOPs, output elements), so tasks with no
  arithmetic (gathers, one-hot) still allow a small wrapper. Bytes cost like FLOPs: what plain
  XLA ops write per call (broadcasts, constants, barriers, copies, pads included) is limited
  relative to the task's own bytes `task_bytes` (its inputs and output), and so are the buffers
  the kernels return: memory that costs no arithmetic is still the judge's to provide.
  """
  reasons = []
  work = max(task_flops, output_elements, 1)
  if not report.kernels:
    reasons.append(NO_KERNEL_REASON)
  if report.disallowed_custom_calls:
    reasons.append("custom calls that are neither Pallas kernels nor allowed: "
                   + ", ".join(report.disallowed_custom_calls))
  if report.unknown_ops:
    reasons.append("ops the judge has no cost model for: " + ", ".join(report.unknown_ops)
                   + " (what XLA runs for them, a composite's native op included, cannot be "
                   "bounded)")
  if report.stateful_ops:
    reasons.append(f"stateful op {', '.join(report.stateful_ops)}: an exported kernel must be a "
                   "pure function of its inputs (hidden state lets an artifact tell its calls "
                   "apart)")
  contraction = report.outside_contraction_flops
  if contraction > OUTSIDE_CONTRACTION_LIMIT * max(task_flops, 1):
    reasons.append(
        f"contractions outside the kernel: {contraction} FLOPs of dot/convolution/linear "
        f"algebra, {_percent(contraction, max(task_flops, 1))} of the task's (limit "
        f"{OUTSIDE_CONTRACTION_LIMIT:.0%})")
  outside = report.outside_flops + report.data_dependent_moves
  if outside > OUTSIDE_WORK_LIMIT * work:
    top = ", ".join(f"{name} {cost}" for name, cost in report.top_ops)
    reasons.append(f"the real work is done outside the kernel: plain XLA ops do "
                   f"{_percent(outside, work)} of the task's work (top ops: {top}; limit "
                   f"{OUTSIDE_WORK_LIMIT:.0%})")
  for what, written, top, factor in (
      ("plain XLA ops outside the kernel write", report.outside_bytes, report.top_byte_ops,
       OUTSIDE_BYTES_LIMIT),
      ("the kernels return buffers of", report.kernel_bytes, (), KERNEL_BYTES_LIMIT)):
    limit = bytes_limit(task_bytes, factor)
    if written > limit:
      ops = f"; top ops: {', '.join(f'{name} {n}' for name, n in top)}" if top else ""
      reasons.append(f"memory beyond the task's: {what} {written} bytes per call, "
                     f"{written / max(task_bytes, 1):.1f}x the task's own {task_bytes} bytes of "
                     f"inputs and output (limit {limit} bytes{ops})")
  if report.unbounded_loops:
    reasons.append(f"{report.unbounded_loops} while loop(s) outside the kernels run with a "
                   "trip count that cannot be proven (data-dependent loop?)")
  return reasons
