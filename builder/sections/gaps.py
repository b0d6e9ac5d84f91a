"""The evaluations a partial release did not measure, and the records whose IR was lost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pallasbench_dataset.keys import EvalKey

from builder.sections.inputs import CardInputs
from builder.tables import md_table


def _key_columns(key: EvalKey) -> dict[str, str]:
  return {"task": key.task, "variant": key.variant, "size": key.size, "precision": key.precision}


def _missing_table(missing: Sequence[EvalKey]) -> str:
  rows = [_key_columns(key) for key in missing]
  return md_table(pd.DataFrame(rows)) if rows else ""


def _lost_table(lost: Sequence[tuple[str, EvalKey]]) -> str:
  rows = [{"run": run, **_key_columns(key)} for run, key in lost]
  return md_table(pd.DataFrame(rows)) if rows else ""


def context(card: CardInputs) -> Mapping[str, Any]:
  """How many of each, and their tables (empty without any)."""
  return {"n_missing": len(card.missing), "missing_table": _missing_table(card.missing),
          "n_lost": len(card.lost_artifacts), "lost_table": _lost_table(card.lost_artifacts)}
