"""Reading a kernel's jaxpr: its pallas_calls (grid, blocks, warps) and the work done outside them.

The evaluator rejects kernels whose heavy work happens in plain XLA ops around a trivial
pallas_call; this module measures that work from the jaxpr, not from the source text.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterator
from typing import Final

import jax.extend.core as jex_core

from pallasbench_dataset.schema import PallasCallInfo

# Primitives that only move or reshape data: free outside a kernel.
_DATA_MOVEMENT: Final = frozenset({
    "reshape", "broadcast_in_dim", "transpose", "squeeze", "expand_dims", "convert_element_type",
    "slice", "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "rev", "iota",
    "copy", "copy_p", "device_put", "select_n", "split", "bitcast_convert_type",
    "pjit", "jit", "closed_call", "custom_jvp_call", "custom_vjp_call", "remat", "checkpoint",
    "pallas_call", "stop_gradient", "optimization_barrier", "sharding_constraint",
})
_CONTRACTIONS: Final = frozenset({"dot_general", "conv_general_dilated", "ragged_dot_general"})
_TRANSCENDENTAL: Final = frozenset({
    "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "erf", "erfc", "erf_inv", "sin",
    "cos", "tan", "rsqrt", "sqrt", "cbrt", "pow", "atan2", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "lgamma", "digamma",
})
_REDUCTIONS: Final = frozenset({
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
    "argmax", "argmin", "cumsum", "cumprod", "cummax", "cumlogsumexp", "reduce_precision",
    "sort", "top_k",
})
_REF_WRITES: Final = frozenset({"swap", "masked_swap", "addupdate", "atomic_rmw", "atomic_cas"})
_HOST_CALLBACKS: Final = frozenset({"pure_callback", "io_callback", "callback", "debug_callback"})
TRITON_MAX_TENSOR_ELEMENTS: Final = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OutsideWork:
  """Arithmetic done by plain XLA ops outside every pallas_call."""
  flops: int                  # elementwise ops count one per output element
  contraction_flops: int      # dot_general / conv: 2 * output elements * contracted size
  transcendental_elements: int
  host_callbacks: tuple[str, ...]
  primitives: tuple[str, ...]  # the arithmetic primitives seen outside, most frequent first


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JaxprReport:
  pallas_calls: tuple[PallasCallInfo, ...]
  outside: OutsideWork
  input_writes: tuple[str, ...]  # "<pallas_call name>: input <i>" for kernels writing an input ref
  text: str


def _subjaxprs(eqn) -> Iterator[jex_core.Jaxpr]:
  for value in eqn.params.values():
    for item in value if isinstance(value, (tuple, list)) else (value,):
      if isinstance(item, jex_core.ClosedJaxpr):
        yield item.jaxpr
      elif isinstance(item, jex_core.Jaxpr):
        yield item


def _size(aval) -> int:
  return math.prod(getattr(aval, "shape", ())) if hasattr(aval, "shape") else 1


def _max_tensor_elements(jaxpr) -> int:
  """The largest value (not Ref) any equation of a kernel body produces, nested bodies included."""
  best = 0
  for eqn in jaxpr.eqns:
    for v in eqn.outvars:
      if type(v.aval).__name__ == "ShapedArray":
        best = max(best, _size(v.aval))
    for sub in _subjaxprs(eqn):
      best = max(best, _max_tensor_elements(sub))
  return best


def _block_shape_text(block_mapping) -> str:
  dims = []
  for d in block_mapping.block_shape:
    size = getattr(d, "block_size", d)
    dims.append("None" if size is None or type(d).__name__ == "Squeezed" else str(size))
  return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _pallas_call_info(eqn) -> PallasCallInfo:
  params = eqn.params
  grid_mapping = params["grid_mapping"]
  compiler_params = params.get("compiler_params")
  return PallasCallInfo(
      name=str(params.get("name") or params["jaxpr"].debug_info.func_name),
      grid=tuple(int(g) for g in grid_mapping.grid),
      block_shapes=tuple(_block_shape_text(bm) for bm in grid_mapping.block_mappings),
      num_warps=getattr(compiler_params, "num_warps", None),
      num_stages=getattr(compiler_params, "num_stages", None),
      max_tensor_elements=_max_tensor_elements(params["jaxpr"]),
      interpret=bool(params.get("interpret")),
  )


def _aligned(eqn, sub) -> list:
  """The outer operands that a sub-jaxpr's invars stand for (while, cond and 1:1 bodies)."""
  ops = list(eqn.invars)
  name = eqn.primitive.name
  if name == "while":
    if sub is getattr(eqn.params.get("cond_jaxpr"), "jaxpr", None):
      ops = ops[:eqn.params["cond_nconsts"]] + ops[eqn.params["cond_nconsts"] + eqn.params["body_nconsts"]:]
    else:
      ops = ops[eqn.params["cond_nconsts"]:]
  elif name == "cond":
    ops = ops[1:]
  return ops if len(ops) == len(sub.invars) else [None] * len(sub.invars)


def _written_refs(jaxpr, watched: dict) -> set:
  """Which watched ref vars (var -> label) the jaxpr writes, following refs into sub-jaxprs."""
  written = set()
  for eqn in jaxpr.eqns:
    if eqn.primitive.name in _REF_WRITES and eqn.invars and eqn.invars[0] in watched:
      written.add(watched[eqn.invars[0]])
    for sub in _subjaxprs(eqn):
      inner = {v: watched[o] for v, o in zip(sub.invars, _aligned(eqn, sub))
               if o is not None and not isinstance(o, jex_core.Literal) and o in watched}
      if inner:
        written |= _written_refs(sub, inner)
  return written


def _input_writes(eqn, name: str) -> list[str]:
  kernel = eqn.params["jaxpr"]
  n_in = eqn.params["grid_mapping"].num_inputs
  aliased = {i for i, _ in eqn.params.get("input_output_aliases", ())}
  watched = {v: i for i, v in enumerate(kernel.invars[:n_in]) if i not in aliased}
  return [f"{name}: input {i}" for i in sorted(_written_refs(kernel, watched))]


def _eqn_flops(eqn) -> tuple[int, int, int]:
  """(flops, contraction flops, transcendental elements) of one equation outside kernels."""
  name = eqn.primitive.name
  out = sum(_size(v.aval) for v in eqn.outvars)
  if name in _CONTRACTIONS:
    lhs = eqn.invars[0].aval
    if name == "dot_general":
      (lhs_contract, _), _ = eqn.params["dimension_numbers"]
      contracted = math.prod(lhs.shape[a] for a in lhs_contract)
    else:
      contracted = math.prod(eqn.invars[1].aval.shape[1:])
    flops = 2 * out * contracted
    return flops, flops, 0
  if name in _REDUCTIONS:
    return sum(_size(v.aval) for v in eqn.invars if hasattr(v, "aval")), 0, 0
  return out, 0, out if name in _TRANSCENDENTAL else 0


def analyze(jaxpr) -> JaxprReport:
  """Finds every pallas_call of a (closed) jaxpr and totals the arithmetic outside them."""
  calls: list[PallasCallInfo] = []
  writes: list[str] = []
  counts: collections.Counter[str] = collections.Counter()
  flops = contraction = transcendental = 0
  callbacks: list[str] = []

  def visit(jaxpr) -> None:
    nonlocal flops, contraction, transcendental
    for eqn in jaxpr.eqns:
      name = eqn.primitive.name
      if name == "pallas_call":
        calls.append(_pallas_call_info(eqn))
        writes.extend(_input_writes(eqn, calls[-1].name))
        continue
      if name in _HOST_CALLBACKS:
        callbacks.append(name)
      elif name not in _DATA_MOVEMENT:
        f, c, t = _eqn_flops(eqn)
        flops, contraction, transcendental = flops + f, contraction + c, transcendental + t
        counts[name] += 1
      for sub in _subjaxprs(eqn):
        visit(sub)

  visit(jaxpr.jaxpr if isinstance(jaxpr, jex_core.ClosedJaxpr) else jaxpr)
  outside = OutsideWork(flops=flops, contraction_flops=contraction,
                        transcendental_elements=transcendental, host_callbacks=tuple(callbacks),
                        primitives=tuple(name for name, _ in counts.most_common()))
  return JaxprReport(pallas_calls=tuple(calls), outside=outside, input_writes=tuple(writes),
                     text=str(jaxpr))
