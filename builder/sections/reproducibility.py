"""The spread between repeated runs, per precision: kernel and baseline time and speedup,
their distribution, the pairs whose speedup crosses 1.0, and every changed verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from pallasbench_dataset import analysis
from pallasbench_dataset.precision import DEFAULT_PRECISION
from pallasbench_dataset.schema import EvalRecord, Status

from builder import repeats
from builder.sections.inputs import CardInputs
from builder.tables import md_table

_REPRO_FORMATS: Final = {"median": ".2%", "p90": ".2%", "max": ".2%", "share": ".0%"}
N_ABOVE: Final = f"n above {repeats.THRESHOLD:.0%}"  # the tables' header of the count above it
_REASON_CHARS: Final = 100  # a rejection's reason in the changed-verdicts table, cut to this


def _with_threshold(table: pd.DataFrame) -> pd.DataFrame:
  """A spread table whose `n_above` column names the threshold it counts above."""
  return table.rename(columns={"n_above": N_ABOVE})


def _short(reasons: Sequence[str]) -> str | None:
  """A record's first reason, its first line cut to _REASON_CHARS; None without reasons."""
  if not reasons:
    return None
  line = (reasons[0].splitlines() or [""])[0]
  return line if len(line) <= _REASON_CHARS else line[:_REASON_CHARS - 1] + "…"


def _changed(changes: pd.DataFrame) -> pd.DataFrame:
  """The changed verdicts as the card shows them: the records' reasons left out, except a
  `rejected` verdict's, shortened (`reason_a`, `reason_b`), so that a rejection at a stage's
  budget shows; a table with no rejection has no such columns."""
  shown = changes.drop(columns=["reasons_a", "reasons_b"])
  if not changes[["status_a", "status_b"]].isin([Status.REJECTED.value]).any(axis=None):
    return shown
  for tag in ("a", "b"):
    shown[f"reason_{tag}"] = [_short(reasons) if status == Status.REJECTED else None
                              for status, reasons in zip(changes[f"status_{tag}"],
                                                         changes[f"reasons_{tag}"])]
  return shown


def _repro(repro: pd.DataFrame | None, changes: pd.DataFrame | None,
           records: Sequence[EvalRecord]) -> dict[str, Any] | None:
  """None without a repeat run; n = 0 when repeats exist but none was timed comparably.

  The spread of kernel time, baseline time and speedup between the runs, the distribution of
  the kernel-time differences (bands, and per variant and size), every evaluation above the
  threshold by name, largest difference first, the pairs whose speedup crosses 1.0, how many
  pairs ran on the same GPU, and every evaluation whose verdict differs between the runs.
  """
  if repro is None:
    return None
  shown = None if changes is None or changes.empty else _changed(changes)
  verdicts = {"n_changed": 0 if changes is None else len(changes),
              "changed": None if shown is None else md_table(shown),
              "reasons": shown is not None and "reason_a" in shown.columns}
  stats = analysis.reproducibility_summary(repro)
  if stats["n"] == 0:
    return {"n": 0, **verdicts}
  above = repro[repro["above_threshold"]].sort_values(["rel_diff", "task"],
                                                      ascending=[False, True])
  pairs = sorted({(a, b) for a, b in zip(repro["run_a"], repro["run_b"])})
  crossing = repeats.crossings(repro)
  return {"n": stats["n"], "median": f"{stats['median']:.2%}", "p90": f"{stats['p90']:.2%}",
          "max": f"{stats['max']:.2%}", "n_above": stats["n_above"],
          "runs": ", ".join(f"`{a}` and `{b}`" for a, b in pairs),
          "spread": md_table(_with_threshold(repeats.spread(repro)), _REPRO_FORMATS),
          "n_crossing": len(crossing),
          "crossing": md_table(crossing, {"speedup_a": ".3f", "speedup_b": ".3f"}),
          "gpus": repeats.same_gpu_counts(repro), "gpu_basis": repeats.gpu_basis(records),
          "bands": md_table(analysis.reproducibility_distribution(repro), _REPRO_FORMATS),
          "groups": md_table(_with_threshold(analysis.reproducibility_by_group(repro)),
                            _REPRO_FORMATS),
          "threshold": f"{repeats.THRESHOLD:.0%}",
          "above": md_table(above[["task", "variant", "size", "run_a", "run_b", "runtime_a_ms",
                                   "runtime_b_ms", "rel_diff"]],
                            {"rel_diff": ".1%", "runtime_a_ms": ".4g", "runtime_b_ms": ".4g"}),
          **verdicts}


def context(card: CardInputs) -> Mapping[str, Any]:
  """The float32 repeats' part (None without such repeats) and, as (precision, part), each
  other precision's that has repeats, each against the published records of its precision."""
  def published(precision: str) -> list[EvalRecord]:
    return [r for _, r in card.merged.at_precision(precision).published]
  others = ((name, _repro(pairs, changes, published(name)))
            for name, (pairs, changes) in card.other_repeats.items())
  return {"repro": _repro(card.repro, card.verdict_changes, published(DEFAULT_PRECISION)),
          "repro_others": [(name, part) for name, part in others if part is not None]}
