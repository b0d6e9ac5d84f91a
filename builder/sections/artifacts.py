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
  the records whose kernel compiled on a GPU without PTX (a capture defect), counted by
  Pallas backend, and their kernels (`task/variant`, and the precision where both were
  measured)."""
  views = {p: _coverage(merged.at_precision(p)) for p in merged.precisions()}
  several = len(views) > 1
  return {"table": joined({p: v["table"] for p, v in views.items()}, "run"),
          "no_ptx": sum(v["no_ptx"] for v in views.values()),
          "gpu_compiled": sum(v["gpu_compiled"] for v in views.values()),
          "ptx_by_backend": joined({p: v["ptx_by_backend"] for p, v in views.items()}, "backend"),
          "no_ptx_kernels": [f"{k} ({p})" if several else k
                             for p, v in views.items() for k in v["no_ptx_kernels"]]}


def _coverage(merged: Merged) -> dict[str, Any]:
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
    no_ptx += [r for r, a in gpu_compiled if not a.ptx]
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
  missing = collections.Counter(backend(r) for r in no_ptx)
  backend_rows = [{"backend": b, "compiled on a GPU": n, "with PTX": n - missing[b],
                   "without PTX": missing[b]} for b, n in sorted(by_backend.items())]
  kernels = sorted({f"{r.task}/{r.variant}" for r in no_ptx},
                   key=lambda k: (TASKS[k.split("/")[0]].task_id, k))
  return {"table": pd.DataFrame(rows), "no_ptx": len(no_ptx), "gpu_compiled": len(compiled),
          "ptx_by_backend": pd.DataFrame(backend_rows), "no_ptx_kernels": kernels}


def _ptx_facts(coverage: dict) -> dict:
  """The card's words on missing PTX: how many compiled records lack it, by backend, and
  their kernels."""
  return {"no_ptx": coverage["no_ptx"], "gpu_compiled": coverage["gpu_compiled"],
          "by_backend": md_table(coverage["ptx_by_backend"]),
          "kernels": ", ".join(f"`{k}`" for k in coverage["no_ptx_kernels"])}


def context(card: CardInputs) -> Mapping[str, Any]:
  """The coverage table and the words on missing PTX."""
  coverage = artifact_coverage(card.merged)
  return {"artifacts_table": md_table(coverage["table"]), "ptx": _ptx_facts(coverage)}
