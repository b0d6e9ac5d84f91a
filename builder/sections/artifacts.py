"""The `artifacts` config's IR per run (and precision), and the records compiled on a GPU
without PTX, by Pallas backend."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.schema import Artifacts, EvalRecord
from pallasbench_dataset.tasks import TASKS

from builder.records import Merged
from builder.sections.inputs import CardInputs
from builder.tables import joined, md_table


def is_compiled(r: EvalRecord) -> bool:
  """Whether the record's kernel got through the compile stage."""
  return r.compile is not None and r.compile.compile_s is not None


def artifact_coverage(merged: Merged) -> dict[str, Any]:
  """Per run (and precision, where both were measured): records, and how many carry each IR;
  the records whose kernel compiled on a GPU without PTX, counted by Pallas backend, and their
  kernels (`task/variant`, and the precision where both were measured): those whose program
  another record of the run compiled with PTX (`same_program`), and the rest (a capture
  defect)."""
  copies = same_program(merged)
  views = {p: _coverage(merged.at_precision(p), copies) for p in merged.precisions()}
  several = len(views) > 1

  def named(key: str) -> list[str]:
    return [f"{k} ({p})" if several else k for p, v in views.items() for k in v[key]]
  return {"table": joined({p: v["table"] for p, v in views.items()}, "run"),
          "no_ptx": sum(v["no_ptx"] for v in views.values()),
          "gpu_compiled": sum(v["gpu_compiled"] for v in views.values()),
          "ptx_by_backend": joined({p: v["ptx_by_backend"] for p, v in views.items()}, "backend"),
          "no_ptx_kernels": named("no_ptx_kernels"),
          "same_program": sum(v["same_program"] for v in views.values()),
          "same_program_kernels": named("same_program_kernels"),
          "same_program_of": sorted({p for p in copies.values()})}


def same_program(merged: Merged) -> dict[tuple[str, EvalKey], str]:
  """(run, key) of each record without PTX whose StableHLO is that of a record of the same
  run, kernel and size at another precision that has PTX, to that precision. A kernel that
  takes no floating input is one program at both precisions: one entry of the persistent
  compilation cache, and a compile the cache serves dumps no PTX."""
  with_ptx = {(name, a.task, a.variant, a.size, a.stablehlo): a.precision
              for name, a in merged.published_artifacts if a.ptx and a.stablehlo}
  return {(name, EvalKey.of(a)): with_ptx[(name, a.task, a.variant, a.size, a.stablehlo)]
          for name, a in merged.published_artifacts
          if not a.ptx and (name, a.task, a.variant, a.size, a.stablehlo) in with_ptx}


def _coverage(merged: Merged, copies: Mapping[tuple[str, EvalKey], str]) -> dict[str, Any]:
  """`artifact_coverage` of one precision's records."""
  records = {(name, EvalKey.of(r)): r for name, r in merged.published}
  rows, no_ptx, compiled = [], [], []
  by_run: dict[str, list[tuple[EvalRecord, Artifacts]]] = collections.defaultdict(list)
  for name, a in merged.published_artifacts:
    by_run[name].append((records[(name, EvalKey.of(a))], a))
  for name in dict.fromkeys(n for n, _ in merged.published):
    pairs = by_run.get(name, [])
    gpu_compiled = [(r, a) for r, a in pairs if is_compiled(r) and r.device == "gpu"]
    compiled += gpu_compiled
    no_ptx += [(name, r) for r, a in gpu_compiled if not a.ptx]
    rows.append({"run": name, "records": sum(1 for n, _ in merged.published if n == name),
                 "artifacts lines": len(pairs), "jaxpr": sum(bool(a.jaxpr) for _, a in pairs),
                 "StableHLO": sum(bool(a.stablehlo) for _, a in pairs),
                 "Triton IR": sum(bool(a.triton_ir) for _, a in pairs),
                 "PTX": sum(bool(a.ptx) for _, a in pairs),
                 "compiled on a GPU": len(gpu_compiled),
                 "Mosaic GPU": sum("mosaic_gpu" in r.backends for r, _ in pairs)})
  def backend(r: EvalRecord) -> str:
    return " + ".join(sorted(r.backends)) or "none recorded"
  by_backend = collections.Counter(backend(r) for r, _ in compiled)
  missing = collections.Counter(backend(r) for _, r in no_ptx)
  backend_rows = [{"backend": b, "compiled on a GPU": n, "with PTX": n - missing[b],
                   "without PTX": missing[b]} for b, n in sorted(by_backend.items())]
  copied = [r for name, r in no_ptx if (name, EvalKey.of(r)) in copies]
  defects = [r for name, r in no_ptx if (name, EvalKey.of(r)) not in copies]
  return {"table": pd.DataFrame(rows), "no_ptx": len(no_ptx), "gpu_compiled": len(compiled),
          "ptx_by_backend": pd.DataFrame(backend_rows), "no_ptx_kernels": _kernels(defects),
          "same_program": len(copied), "same_program_kernels": _kernels(copied)}


def _kernels(records) -> list[str]:
  """`task/variant` of each record's kernel, once, in task order."""
  return sorted({f"{r.task}/{r.variant}" for r in records},
                key=lambda k: (TASKS[k.split("/")[0]].task_id, k))


def _ptx_facts(coverage: dict) -> dict:
  """The card's words on missing PTX: how many compiled records lack it, by backend, and
  their kernels, those whose program has PTX in another record apart."""
  return {"no_ptx": coverage["no_ptx"], "gpu_compiled": coverage["gpu_compiled"],
          "by_backend": md_table(coverage["ptx_by_backend"]),
          "kernels": ", ".join(f"`{k}`" for k in coverage["no_ptx_kernels"]),
          "same_program": coverage["same_program"],
          "same_program_kernels": ", ".join(f"`{k}`" for k in coverage["same_program_kernels"]),
          "same_program_of": " or ".join(coverage["same_program_of"])}


def context(card: CardInputs) -> Mapping[str, Any]:
  """The coverage table and the words on missing PTX."""
  coverage = artifact_coverage(card.merged)
  return {"artifacts_table": md_table(coverage["table"]), "ptx": _ptx_facts(coverage)}
