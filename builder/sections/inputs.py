"""What every card section reads: the build's runs, records and the facts the builder worked
out (`CardInputs`), and the few views of them that several sections share."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.schema import CandidateRow, EvalRecord, SummaryRow, to_json_dict

from builder.candidates import PopulationRun
from builder.records import Merged, Run


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CardInputs:
  """A build as the card sees it. `repro` and `verdict_changes` are the float32 repeats',
  `other_repeats` each other precision's, by its name, as (repeats, changed verdicts) (each None
  without such repeats);
  `configs` the rows of each config and split; `source` the shipped source's path and commit
  (None when none is shipped); `fine_tuning` the fine-tuning configs' rows (empty without)."""
  rows: Sequence[SummaryRow]
  merged: Merged
  runs: Sequence[Run]
  headline: str
  repo_id: str
  configs: Mapping[str, Mapping[str, int]]
  rebuild: str
  repro: pd.DataFrame | None = None
  verdict_changes: pd.DataFrame | None = None
  other_repeats: Mapping[str, tuple[pd.DataFrame | None, pd.DataFrame | None]] = (
      dataclasses.field(default_factory=dict))
  missing: Sequence[EvalKey] = ()
  lost_artifacts: Sequence[tuple[str, EvalKey]] = ()
  populations: Sequence[PopulationRun] = ()
  candidates: Sequence[CandidateRow] = ()
  source: Mapping[str, str] | None = None
  fine_tuning: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def hardware(self) -> str:
    """The GPU kinds of the records, comma-separated."""
    return ", ".join(sorted({r.environment.device_kind for r in self.merged.records}))

  @property
  def published(self) -> list[EvalRecord]:
    """The records the tables use, one per evaluation."""
    return [r for _, r in self.merged.published]

  def records_frame(self) -> pd.DataFrame:
    """Every record of every precision, one row each."""
    return pd.DataFrame([to_json_dict(r) for r in self.merged.records])
