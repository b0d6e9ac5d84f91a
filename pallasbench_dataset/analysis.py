"""Analysis of the dataset: pure functions from DataFrames to DataFrames or numbers.

They accept either config, as `to_pandas()` or `load(...)[split].to_pandas()` gives it:

- the default config (one row per task): columns `Op_Name`, `Level_ID`, `Correct`, `Status`,
  `Pallas_Speedup`, `Error`;
- the `runs` config (one row per task, variant, size and precision): columns `task`, `level`,
  `correct`, `status`, `speedup`, `error` (and `variant`, `size`, `precision`, `error_type`,
  `reasons` where shown); filter it to one variant, size and precision first
  (`df[(df.variant == "gpu") & (df["size"] == "medium") & (df.precision == "float32")]`)
  unless you mean to pool them. The functions that pair two runs' rows pair them by task,
  variant, size and, where both frames have the column, precision.

A row PASSES when it is correct and, where a status column exists, its status is `pass`
(correct and robust: a kernel the anti-gaming filters rejected does not count, however
close its output). fast_p follows KernelBench: the share of ALL rows that pass AND have a
speedup (baseline / kernel) above p. The baseline is the jitted reference by default
(`Pallas_Speedup` / `speedup`); `baseline="eager"` uses the reference run op by op without
jit (`Pallas_Speedup_Native` / `speedup_eager`), the public archive's "native" speedup.
The builder's card uses these same functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import pandas as pd

_COLUMNS: Final = {  # meaning -> (default-config name, runs-config name)
    "task": ("Op_Name", "task"),
    "task_id": ("Task_ID", "task_id"),
    "level": ("Level_ID", "level"),
    "correct": ("Correct", "correct"),
    "status": ("Status", "status"),
    "speedup": ("Pallas_Speedup", "speedup"),
    "speedup_eager": ("Pallas_Speedup_Native", "speedup_eager"),
    "error": ("Error", "error"),
}
_KEY: Final = ("task", "variant", "size")


def _key(*frames: pd.DataFrame) -> list[str]:
  """What pairs rows of `frames`: task, variant, size, and the precision where every frame
  has it (a `runs` frame without the column is float32 throughout)."""
  return [*_KEY, *(["precision"] if all("precision" in df.columns for df in frames) else [])]


def _col(df: pd.DataFrame, meaning: str, *, required: bool = True) -> str | None:
  for name in _COLUMNS[meaning]:
    if name in df.columns:
      return name
  if required:
    raise KeyError(f"the DataFrame has no {meaning!r} column (expected one of "
                   f"{_COLUMNS[meaning]}); pass a default-config or runs-config DataFrame")
  return None


def passed(df: pd.DataFrame) -> pd.Series:
  """Boolean per row: correct and (where there is a status column) status == 'pass'."""
  ok = df[_col(df, "correct")].fillna(False).astype(bool)
  status = _col(df, "status", required=False)
  if status is not None:
    ok = ok & (df[status] == "pass")
  return ok


_BASELINES: Final = {"jit": "speedup", "eager": "speedup_eager"}


def _speedups(df: pd.DataFrame, baseline: str = "jit") -> pd.Series:
  if baseline not in _BASELINES:
    raise ValueError(f"unknown baseline {baseline!r}; baselines: {', '.join(_BASELINES)}")
  return pd.to_numeric(df[_col(df, _BASELINES[baseline])], errors="coerce").astype(float)


def fast_p(df: pd.DataFrame, p: float, *, baseline: str = "jit") -> float:
  """Share of ALL rows that pass and have speedup > p (NaN for an empty frame)."""
  if len(df) == 0:
    return math.nan
  speedup = _speedups(df, baseline)
  fast = passed(df) & speedup.notna() & (speedup > p)
  return float(fast.sum()) / len(df)


def geomean_speedup(df: pd.DataFrame, *, baseline: str = "jit") -> float:
  """Geometric mean of the speedup over passing rows with a positive finite speedup (else NaN)."""
  speedup = _speedups(df, baseline)[passed(df)]
  speedup = speedup[np.isfinite(speedup) & (speedup > 0)]
  if speedup.empty:
    return math.nan
  return float(np.exp(np.log(speedup.to_numpy()).mean()))


def _level_row(df: pd.DataFrame, level: str, ps: Sequence[float], baseline: str
               ) -> dict[str, Any]:
  row: dict[str, Any] = {"level": level, "tasks": len(df), "passed": int(passed(df).sum())}
  row.update({f"fast_{p:g}": fast_p(df, p, baseline=baseline) for p in ps})
  row["geomean_speedup"] = geomean_speedup(df, baseline=baseline)
  return row


def summary_by_level(df: pd.DataFrame, ps: Sequence[float] = (0, 1, 2), *,
                     baseline: str = "jit") -> pd.DataFrame:
  """One row per level and a final `all` row: tasks, passed, fast_<p> for each p, geomean."""
  level = _col(df, "level")
  rows = [_level_row(df[df[level] == lv], str(lv), ps, baseline)
          for lv in sorted(df[level].unique())]
  rows.append(_level_row(df, "all", ps, baseline))
  columns = ["level", "tasks", "passed", *(f"fast_{p:g}" for p in ps), "geomean_speedup"]
  return pd.DataFrame(rows, columns=columns)


def failures(df: pd.DataFrame) -> pd.DataFrame:
  """The rows that do not pass, with what went wrong, in task order."""
  wanted = [_col(df, "task_id", required=False), _col(df, "task"), _col(df, "level"),
            "variant", "size", _col(df, "status", required=False), "error_type",
            _col(df, "error"), "reasons"]
  columns = [c for c in wanted if c is not None and c in df.columns]
  out = df.loc[~passed(df), columns]
  return out.sort_values([c for c in columns if c in (*_COLUMNS["task_id"], *_KEY)],
                         kind="stable").reset_index(drop=True)


_STAGES: Final = ("trace_s", "lower_s", "compile_s")


def compile_time_table(runs_df: pd.DataFrame) -> pd.DataFrame:
  """Cold compile stages per evaluation, from the runs config (`compile` struct column).

  Columns: task, variant, size, trace_s, lower_s, compile_s, total_s (the sum of the stages
  present), triton_ir_bytes, ptx_bytes. Rows without a compile profile are left out.
  """
  rows = []
  for _, r in runs_df.iterrows():
    profile = r["compile"]
    if not isinstance(profile, dict):
      continue
    stages = {s: profile.get(s) for s in _STAGES}
    present = [v for v in stages.values() if v is not None and not pd.isna(v)]
    rows.append({"task_id": r.get("task_id"), "task": r["task"], "variant": r["variant"],
                 "size": r["size"], **stages, "total_s": sum(present) if present else None,
                 "triton_ir_bytes": profile.get("triton_ir_bytes"),
                 "ptx_bytes": profile.get("ptx_bytes")})
  columns = ["task_id", "task", "variant", "size", *_STAGES, "total_s", "triton_ir_bytes",
             "ptx_bytes"]
  out = pd.DataFrame(rows, columns=columns)
  return out.sort_values(["task_id", "variant", "size"], kind="stable").drop(
      columns="task_id").reset_index(drop=True)


def reproducibility(runs_a: pd.DataFrame, runs_b: pd.DataFrame,
                    threshold: float = 0.05) -> pd.DataFrame:
  """Run-to-run difference of `runtime_ms` for the evaluations two runs share.

  Both frames are runs-config rows (`task`, `variant`, `size`, `runtime_ms`, and optionally
  `timing_comparable`). Only evaluations timed comparably in both runs with a positive
  runtime count. Columns: task, variant, size (precision where both frames have it),
  runtime_a_ms, runtime_b_ms,
  rel_diff = |b - a| / a, above_threshold (rel_diff > threshold); in key order.
  """
  key = _key(runs_a, runs_b)
  a = _timed(runs_a, key).rename(columns={"runtime_ms": "runtime_a_ms"})
  b = _timed(runs_b, key).rename(columns={"runtime_ms": "runtime_b_ms"})
  out = a.merge(b, on=key, how="inner")
  out["rel_diff"] = (out["runtime_b_ms"] - out["runtime_a_ms"]).abs() / out["runtime_a_ms"]
  out["above_threshold"] = out["rel_diff"] > threshold
  return out.sort_values(key, kind="stable").reset_index(drop=True)


def verdict_changes(runs_a: pd.DataFrame, runs_b: pd.DataFrame) -> pd.DataFrame:
  """The evaluations two runs share whose status differs: the verdicts a single run would
  have got by luck. Columns: task, variant, size, status_a, status_b, error_a, error_b,
  reasons_a, reasons_b (an absent error or reasons is None), in key order; precision after
  size where both frames have it."""
  key = _key(runs_a, runs_b)

  def side(df: pd.DataFrame, tag: str) -> pd.DataFrame:
    out = df[[*key, "status"]].rename(columns={"status": f"status_{tag}"})
    for column in ("error", "reasons"):
      out[f"{column}_{tag}"] = df[column] if column in df.columns else None
    return out
  both = side(runs_a, "a").merge(side(runs_b, "b"), on=key, how="inner")
  changed = both[both["status_a"] != both["status_b"]]
  columns = [*key, "status_a", "status_b", "error_a", "error_b", "reasons_a", "reasons_b"]
  return (changed[columns].astype(object).where(changed[columns].notna(), None)
          .sort_values(key, kind="stable").reset_index(drop=True))


def _timed(df: pd.DataFrame, key: Sequence[str]) -> pd.DataFrame:
  runtime = pd.to_numeric(df["runtime_ms"], errors="coerce")
  ok = runtime.notna() & (runtime > 0)
  if "timing_comparable" in df.columns:
    ok = ok & df["timing_comparable"].fillna(False).astype(bool)
  out = df.loc[ok, list(key)].copy()
  out["runtime_ms"] = runtime[ok].astype(float)
  return out


REPRO_BANDS: Final = (0.01, 0.02, 0.05, 0.10)


def reproducibility_distribution(table: pd.DataFrame,
                                 edges: Sequence[float] = REPRO_BANDS) -> pd.DataFrame:
  """How `reproducibility(...)`'s rel_diff is spread: one row per band [0, e1], (e1, e2], ...,
  (e_last, inf) with the number and share of evaluations in it (every band listed)."""
  diffs = table["rel_diff"].to_numpy(dtype=float)
  bounds = [0.0, *edges, math.inf]
  rows = []
  for lo, hi in zip(bounds, bounds[1:]):
    inside = (diffs > lo) & (diffs <= hi) if lo > 0 else diffs <= hi
    label = f"> {lo:.0%}" if math.isinf(hi) else f"{lo:.0%} – {hi:.0%}"
    rows.append({"difference": label, "evaluations": int(inside.sum()),
                 "share": float(inside.sum()) / diffs.size if diffs.size else math.nan})
  return pd.DataFrame(rows, columns=["difference", "evaluations", "share"])


def reproducibility_by_group(table: pd.DataFrame) -> pd.DataFrame:
  """`reproducibility_summary` per variant and size: variant, size, n, median, p90, max,
  n_above, in key order."""
  rows = [{"variant": variant, "size": size, **reproducibility_summary(group)}
          for (variant, size), group in table.groupby(["variant", "size"], sort=True)]
  return pd.DataFrame(rows, columns=["variant", "size", "n", "median", "p90", "max", "n_above"])


def reproducibility_summary(table: pd.DataFrame) -> dict[str, Any]:
  """The distribution of `reproducibility(...)`'s rel_diff: n, median, p90, max, n_above."""
  diffs = table["rel_diff"].to_numpy(dtype=float)
  if diffs.size == 0:
    return {"n": 0, "median": math.nan, "p90": math.nan, "max": math.nan, "n_above": 0}
  return {"n": int(diffs.size), "median": float(np.median(diffs)),
          "p90": float(np.percentile(diffs, 90)), "max": float(diffs.max()),
          "n_above": int(table["above_threshold"].sum())}
