"""Markdown tables for the card: a DataFrame as a GitHub table (`md_table`), and the tables of
several precisions joined into one with a `precision` column (`joined`).

A table of one precision's records has no precision column; where both were measured, the
tables of each are joined with a `precision` column."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from pallasbench_dataset.evaluation.errors import readable
from pallasbench_dataset.precision import PRECISIONS
from pallasbench_dataset.schema import EvalRecord

_CELL_CHARS: Final = 160


def _cell(value: Any, fmt: str | None = None) -> str:
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return "–"
  if isinstance(value, bool):
    return "yes" if value else "no"
  if fmt is not None and isinstance(value, (int, float)):
    return format(value, fmt)
  if isinstance(value, float):
    return f"{value:.3g}"
  text = " ".join(readable(str(value)).split()).replace("|", "\\|")
  return text if len(text) <= _CELL_CHARS else text[:_CELL_CHARS - 1] + "…"


def md_table(df: pd.DataFrame, formats: Mapping[str, str] | None = None) -> str:
  """A GitHub-markdown table of a DataFrame; an empty frame gives '(none)'."""
  if df.empty:
    return "(none)"
  formats = formats or {}
  lines = ["| " + " | ".join(map(str, df.columns)) + " |",
           "|" + "|".join("---" for _ in df.columns) + "|"]
  for row in df.itertuples(index=False):
    lines.append("| " + " | ".join(_cell(v, formats.get(c)) for c, v in zip(df.columns, row))
                 + " |")
  return "\n".join(lines)


def by_precision(records: Sequence[EvalRecord]) -> dict[str, list[EvalRecord]]:
  """The records of each precision among them, in PRECISIONS order (float32 first)."""
  out = {p: [r for r in records if r.precision == p] for p in PRECISIONS}
  return {p: rs for p, rs in out.items() if rs}


def joined(tables: Mapping[str, pd.DataFrame], after: str) -> pd.DataFrame:
  """One precision's table as it is; several joined in the order given, each row naming its
  precision in a column after `after`. Empty tables add no rows; none left: an empty frame."""
  if len(tables) == 1:
    return next(iter(tables.values()))
  frames = []
  for precision, table in tables.items():
    if table.empty:
      continue
    table = table.copy()
    table.insert(table.columns.get_loc(after) + 1, "precision", precision)
    frames.append(table)
  return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
