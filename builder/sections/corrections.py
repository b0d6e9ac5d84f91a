"""The corrections this project made to the public suite's tasks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pallasbench_dataset.schema import SummaryRow

from builder.sections.inputs import CardInputs


def _corrections(rows: Sequence[SummaryRow]) -> list[str]:
  return [f"**{r.Op_Name}** (task {r.Task_ID}): {r.Corrections}" for r in rows if r.Corrections]


def context(card: CardInputs) -> Mapping[str, Any]:
  """One line per task that names a correction."""
  return {"corrections": _corrections(card.rows)}
