"""Reading a kernel's jaxpr: its pallas_calls (grid, blocks, warps, largest value) and writes
to input refs.

The exporter reports these about the candidate it traced (information for the record, and
rejections it can only add); the judge's own verdict on the kernel's structure reads the
exported module (evaluation/module_analysis.py). The tests use it on the shipped trees.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Final

import jax.extend.core as jex_core

from pallasbench_dataset.schema import PallasCallInfo

_REF_WRITES: Final = frozenset({"swap", "masked_swap", "addupdate", "atomic_rmw", "atomic_cas"})
TRITON_MAX_TENSOR_ELEMENTS: Final = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JaxprReport:
  pallas_calls: tuple[PallasCallInfo, ...]
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


def analyze(jaxpr) -> JaxprReport:
  """Finds every pallas_call of a (closed) jaxpr, nested ones included."""
  calls: list[PallasCallInfo] = []
  writes: list[str] = []

  def visit(jaxpr) -> None:
    for eqn in jaxpr.eqns:
      if eqn.primitive.name == "pallas_call":
        calls.append(_pallas_call_info(eqn))
        writes.extend(_input_writes(eqn, calls[-1].name))
        continue
      for sub in _subjaxprs(eqn):
        visit(sub)

  visit(jaxpr.jaxpr if isinstance(jaxpr, jex_core.ClosedJaxpr) else jaxpr)
  return JaxprReport(pallas_calls=tuple(calls), input_writes=tuple(writes), text=str(jaxpr))
