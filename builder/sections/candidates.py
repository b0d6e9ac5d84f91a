"""The `candidates` config: the population runs' kernels by kind and verdict, cheats that
passed, the fastest passing ones, and the commands."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from pallasbench_dataset.schema import CandidateRow, Status, to_json_dict

from builder.candidates import PopulationRun
from builder.sections.inputs import CardInputs
from builder.tables import md_code, md_table

_CANDIDATE_FORMATS: Final = {"speedup": ".3f", "runtime_ms": ".4g"}
BEST_CANDIDATES: Final = 10


def _by_kind(df: pd.DataFrame) -> pd.DataFrame:
  """Candidates by kind (rows) and status (columns, in the order of Status), with totals."""
  statuses = [s.value for s in Status if s.value in set(df["status"])]
  kinds = df["kind"].fillna("unknown")
  rows = [{"kind": kind, **{s: int(((kinds == kind) & (df["status"] == s)).sum()) for s in statuses},
           "total": int((kinds == kind).sum())} for kind in sorted(set(kinds))]
  return pd.DataFrame(rows)


def candidates_stats(populations: Sequence[PopulationRun],
                     rows: Sequence[CandidateRow]) -> dict[str, Any] | None:
  """The card's section on the `candidates` config; None without population runs."""
  if not populations:
    return None
  df = pd.DataFrame([to_json_dict(r) for r in rows], columns=[
      f.name for f in dataclasses.fields(CandidateRow)])
  cheats = df[(df["kind"] == "cheat") & (df["status"] == Status.PASS.value)]
  passed = df[df["status"] == Status.PASS.value].sort_values(
      ["speedup", "candidate", "run"], ascending=[False, True, True]).head(BEST_CANDIDATES)
  return {"n": len(rows), "n_runs": len(populations), "n_cached": int(df["cached"].sum()),
          "n_missing": sum(len(run.missing) for run in populations),
          "n_cheats": int((df["kind"] == "cheat").sum()),
          "cheats_passed": ", ".join(md_code(c) for c in cheats["candidate"]) or "none",
          "by_kind": md_table(_by_kind(df)) if rows else "(none)",
          "best": md_table(passed[["candidate", "run", "task", "kind", "speedup", "runtime_ms"]],
                           _CANDIDATE_FORMATS),
          "comparable": bool(df["timing_comparable"].all()) if rows else True,
          "commands": [(md_code(run.name), md_code(run.command)) for run in populations]}


def context(card: CardInputs) -> Mapping[str, Any]:
  """The section's values; None without population runs."""
  return {"candidates": candidates_stats(card.populations, card.candidates)}
