"""The results per size and precision: the fixed kernels' and the originals' fast_p tables
(against the jitted reference, and the eager one where measured), failures and outcomes."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from pallasbench_dataset import analysis
from pallasbench_dataset.schema import to_json_dict
from pallasbench_dataset.tasks import Size

from builder.records import Merged
from builder.sections.inputs import CardInputs
from builder.tables import md_table

LEVEL_FORMATS: Final = {"fast_0": ".0%", "fast_1": ".0%", "fast_2": ".0%",
                        "geomean_speedup": ".3f"}


def sizes_of(merged: Merged, headline: str) -> list[str]:
  """The sizes the fixed kernels were measured at: the headline first (where measured), then
  in size order."""
  measured = {r.size for r in merged.records if r.variant == "gpu"}
  order = [s.value for s in Size]
  return [headline] * (headline in measured) + sorted(measured - {headline}, key=order.index)


def results(merged: Merged, headline: str) -> list[dict[str, Any]]:
  """`results_by_size` for each precision measured (PRECISIONS order: float32 first), each
  entry naming its precision."""
  out = []
  for precision in merged.precisions():
    view = merged.at_precision(precision)
    runs_df = pd.DataFrame([to_json_dict(r) for r in view.records])
    out += [{"precision": precision, **entry}
            for entry in results_by_size(runs_df, sizes_of(view, headline))]
  return out


def results_by_size(runs_df: pd.DataFrame, sizes: Sequence[str]) -> list[dict[str, Any]]:
  """Per size: the fixed kernels' and the originals' fast_p tables (against the jitted
  reference; the fixed kernels also against the eager one), failures and outcomes."""
  out = []
  for size in sizes:
    at = runs_df[runs_df["size"] == size]
    fixed, original = at[at["variant"] == "gpu"], at[at["variant"] == "tpu"]
    eager = (None if fixed["speedup_eager"].isna().all() else
             md_table(analysis.summary_by_level(fixed, baseline="eager"), LEVEL_FORMATS))
    fails = _with_why(analysis.failures(fixed))[["task", "level", "status", "error"]]
    orig_fails = _with_why(analysis.failures(original)) if not original.empty else original
    status = collections.Counter(original["status"]) if not original.empty else {}
    out.append({
        "size": size, "n_fixed": len(fixed),
        "fixed": md_table(analysis.summary_by_level(fixed), LEVEL_FORMATS),
        "eager": eager,
        "original": (md_table(analysis.summary_by_level(original), LEVEL_FORMATS)
                     if not original.empty else "(the original kernels were not measured)"),
        "failures": md_table(fails),
        "original_status": ", ".join(f"{k}: {v}" for k, v in sorted(status.items())) or "none",
        "original_failures": md_table(orig_fails[[
            c for c in ("task", "status", "error_type", "error") if c in orig_fails]])})
  return out


def _with_why(fails: pd.DataFrame) -> pd.DataFrame:
  """`error` where the record has one, else its reasons (a `rejected` or `fail` verdict has no
  error, only the judge's reasons: a budget run past, a check failed), joined by "; "."""
  why = [e if isinstance(e, str) and e else "; ".join(r) if r is not None and len(r) else None
         for e, r in zip(fails["error"], fails["reasons"])]
  return fails.assign(error=why)


def context(card: CardInputs) -> Mapping[str, Any]:
  """A section per size and precision measured."""
  return {"sizes": results(card.merged, card.headline)}
