"""Run-to-run spread of the evaluations two runs both timed: kernel time, baseline time and
speedup, the pairs whose speedup lands on either side of 1.0, and whether both ran on one GPU.

A pair is the row's record (the first run that measured it) and a later run's record of the
same task, variant and size, both timed comparably. The kernel-time difference is the
`rel_diff` the card's distribution tables and `BuildSummary.reproducibility` read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from pallasbench_dataset import analysis
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.schema import EvalRecord

from builder.records import Merged, sort_key

THRESHOLD: Final = 0.05
QUANTITIES: Final = (("kernel time", "rel_diff"), ("baseline time", "baseline_diff"),
                     ("speedup", "speedup_diff"))
COLUMNS: Final = ("task", "variant", "size", "run_a", "run_b", "gpu_a", "gpu_b", "same_gpu",
                  "runtime_a_ms", "runtime_b_ms", "rel_diff", "above_threshold",
                  "baseline_a_ms", "baseline_b_ms", "baseline_diff", "speedup_a", "speedup_b",
                  "speedup_diff", "crosses_one")


def _timed(r: EvalRecord) -> bool:
  return (r.timing_comparable and r.runtime_ms is not None and r.runtime_ms > 0
          and r.baseline_ms is not None and r.baseline_ms > 0)


def gpu_of(r: EvalRecord) -> str | None:
  """The GPU a record was measured on: its UUID where the judge recorded one, else its CUDA
  index in the run (`index N`); None when neither is known."""
  if r.environment.gpu is not None and r.environment.gpu.uuid:
    return r.environment.gpu.uuid
  return f"index {r.run.gpu_index}" if r.run is not None and r.run.gpu_index is not None else None


def _diff(a: float, b: float) -> float:
  return abs(b - a) / a


def _pair(a: EvalRecord, b: EvalRecord, run_a: str, run_b: str) -> dict[str, Any]:
  gpu_a, gpu_b = gpu_of(a), gpu_of(b)
  diff = _diff(a.runtime_ms, b.runtime_ms)
  return {"task": a.task, "variant": a.variant, "size": a.size, "run_a": run_a, "run_b": run_b,
          "gpu_a": gpu_a, "gpu_b": gpu_b,
          "same_gpu": gpu_a == gpu_b if gpu_a is not None and gpu_b is not None else None,
          "runtime_a_ms": a.runtime_ms, "runtime_b_ms": b.runtime_ms, "rel_diff": diff,
          "above_threshold": diff > THRESHOLD,
          "baseline_a_ms": a.baseline_ms, "baseline_b_ms": b.baseline_ms,
          "baseline_diff": _diff(a.baseline_ms, b.baseline_ms),
          "speedup_a": a.speedup, "speedup_b": b.speedup,
          "speedup_diff": _diff(a.speedup, b.speedup),
          "crosses_one": (a.speedup > 1.0) != (b.speedup > 1.0)}


def pairs(merged: Merged) -> pd.DataFrame | None:
  """One row per repeated, comparably timed evaluation (COLUMNS); None without a repeat run."""
  if not merged.repeats:
    return None
  rows = {EvalKey.of(r): r for r in merged.records}
  found = [(rows[EvalKey.of(b)], b, name) for name, repeated in merged.repeats for b in repeated]
  found.sort(key=lambda t: (*sort_key(t[1]), t[2]))
  table = [_pair(a, b, merged.source_run[EvalKey.of(a)], name) for a, b, name in found
           if _timed(a) and _timed(b)]
  return pd.DataFrame(table, columns=list(COLUMNS))


def spread(table: pd.DataFrame) -> pd.DataFrame:
  """Per quantity (kernel time, baseline time, speedup): n, median, p90, max and how many
  differ by more than THRESHOLD, of |b - a| / a."""
  rows = []
  for name, column in QUANTITIES:
    stats = analysis.reproducibility_summary(pd.DataFrame(
        {"rel_diff": table[column], "above_threshold": table[column] > THRESHOLD}))
    rows.append({"quantity": name, **stats})
  return pd.DataFrame(rows, columns=["quantity", "n", "median", "p90", "max", "n_above"])


def crossings(table: pd.DataFrame) -> pd.DataFrame:
  """The pairs whose speedup is above 1.0 in one run and not in the other."""
  return table.loc[table["crosses_one"], ["task", "variant", "size", "run_a", "run_b",
                                           "speedup_a", "speedup_b", "same_gpu"]]


def same_gpu_counts(table: pd.DataFrame) -> Mapping[str, int]:
  """How many pairs ran on the same GPU, on different ones, and on GPUs not known."""
  known = table["same_gpu"].dropna().astype(bool)
  return {"same": int(known.sum()), "different": int((~known).sum()),
          "unknown": int(table["same_gpu"].isna().sum()), "n": len(table)}


def gpu_basis(records: Sequence[EvalRecord]) -> str:
  """How `same_gpu` was decided for these records: by UUID, by CUDA index, or both."""
  kinds = {"UUID" if r.environment.gpu is not None and r.environment.gpu.uuid else "CUDA index"
           for r in records if gpu_of(r) is not None}
  return " or ".join(sorted(kinds)) or "not recorded"
