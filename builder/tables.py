"""Markdown tables for the card: a DataFrame as a GitHub table (`md_table`), and the tables of
several precisions joined into one with a `precision` column (`joined`).

A table of one precision's records has no precision column; where both were measured, the
tables of each are joined with a `precision` column."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from pallasbench_dataset.evaluation.errors import readable
from pallasbench_dataset.precision import PRECISIONS
from pallasbench_dataset.schema import EvalRecord

_CELL_CHARS: Final = 160


# What a text may not hold raw in the card's Markdown (GitHub's and the Hub's renderers): a
# cell's bar, a code span's backtick, the `<` that opens HTML (a raw `<!--` hid the rest of the
# card; a `>` alone opens nothing inside a line), the brackets and bang of links and images (a
# candidate's id drew a third party's image in the card, red team round 21) and the ampersand
# of character references (`&#8238;` writes a right-to-left override), and the backslash
# itself, which would otherwise escape an escape (round 22: `\[x\](url)` was a live link).
_INLINE_ESCAPES: Final = str.maketrans({"|": "\\|", "`": "\\`", "<": "&lt;", "[": "\\[",
                                        "]": "\\]", "!": "\\!", "&": "\\&", "\\": "\\\\"})
# The starts of the autolinks GFM makes of bare text (`https://...`, `www.`), broken by an
# escape that renders as nothing.
_AUTOLINK: Final = re.compile(r"(?<=[A-Za-z0-9])(?=://)|(?i:(?<=www)(?<![A-Za-z0-9]www)(?=\.))")
_BACKTICK_RUN: Final = re.compile(r"`+")


def _one_line(text: str) -> str:
  """`text` with every run of whitespace, newlines included, one space."""
  return " ".join(text.split())


def md_inline(text: str) -> str:
  """`text` inert in a line of the card: its whitespace (newlines included) collapsed, so it
  cannot start a heading or a block, and what opens HTML, a link, an image, an autolink or a
  character reference escaped (bars and backticks too). Every
  text that does not come from the builder itself (a record's error, a candidate's id) reaches
  the card through this or `md_code` (red team round 16)."""
  return _AUTOLINK.sub("\\\\", _one_line(text).translate(_INLINE_ESCAPES))


def md_code(text: str) -> str:
  """`text` as one inert code span: whitespace collapsed, delimited by a backtick run longer
  than any inside it (a code span shows its content literally, HTML included)."""
  text = _one_line(text)
  fence = "`" * (1 + max((len(m) for m in _BACKTICK_RUN.findall(text)), default=0))
  pad = " " if text.startswith("`") or text.endswith("`") else ""
  return f"{fence}{pad}{text}{pad}{fence}"


def _cell(value: Any, fmt: str | None = None) -> str:
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return "–"
  if isinstance(value, bool):
    return "yes" if value else "no"
  if fmt is not None and isinstance(value, (int, float)):
    return format(value, fmt)
  if isinstance(value, float):
    return f"{value:.3g}"
  text = md_inline(readable(str(value)))
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
