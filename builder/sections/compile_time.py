"""The fixed kernels' compile stages, and the conditions each run compiled them under
(overlapping compiles, workers, budget, spread against the first run)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pallasbench_dataset import analysis
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.precision import PRECISIONS

from builder.records import Run
from builder.sections.artifacts import is_compiled, same_program
from builder.sections.inputs import CardInputs
from builder.tables import joined, md_table

def _compile_table(runs_df: pd.DataFrame) -> str:
  """The fixed kernels' compile stages (per precision, where both were measured)."""
  fixed = runs_df[runs_df["variant"] == "gpu"]
  tables = {p: analysis.compile_time_table(fixed[fixed["precision"] == p])
            for p in PRECISIONS if (fixed["precision"] == p).any()}
  table = joined(tables, "size") if tables else analysis.compile_time_table(fixed)
  return md_table(table.drop(columns="variant"), {"trace_s": ".3f", "lower_s": ".3f",
                                                  "compile_s": ".3f", "total_s": ".3f"})


def compile_conditions(runs: Sequence[Run]) -> dict[str, Any]:
  """How each run's compile stage compiled the fixed kernels: the compiles that overlapped
  each one (itself included: any compile that ran at some moment while it did; the records'
  `concurrent_compiles`), the stage's workers and budget (the manifest's); and, for each later
  run, the difference |b - a| / a of a kernel's compile_s against the first run's (a)."""
  per_run, first = [], None
  for run in runs:
    fixed = {EvalKey.of(r): r.compile.compile_s for r in run.records
             if r.variant == "gpu" and is_compiled(r)}
    overlap = [r.compile.concurrent_compiles for r in run.records
               if r.variant == "gpu" and is_compiled(r) and r.compile.concurrent_compiles is not None]
    entry = {"run": run.name, "n": len(fixed), "n_overlap": len(overlap),
             "overlap": (f"median {statistics.median(overlap):g}, max {max(overlap)}"
                         if overlap else None),
             "workers": run.manifest.cpu_workers, "budget_s": run.manifest.compile_budget_s,
             "first": None if first is None else first[0], "n_spread": 0, "spread": None}
    if first is None:
      first = (run.name, fixed)
    else:
      spreads = [abs(b - fixed_a) / fixed_a for key, b in fixed.items()
                 if (fixed_a := first[1].get(key)) and fixed_a > 0]
      entry["n_spread"] = len(spreads)
      entry["spread"] = (f"median {statistics.median(spreads):.0%}, max {max(spreads):.0%}"
                         if spreads else None)
    per_run.append(entry)
  return {"runs": per_run}


def context(card: CardInputs) -> Mapping[str, Any]:
  """Each run's compile conditions, and the compile-time table."""
  first = card.runs[0].name if card.runs else None
  served = sorted({f"{key.task} ({key.precision})" for (name, key) in same_program(card.merged)
                   if name == first and key.variant == "gpu"})
  return {"compile_table": _compile_table(card.records_frame()),
          "compile_conditions": compile_conditions(card.runs), "cache_served": served}
