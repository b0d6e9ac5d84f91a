"""JSON Lines as every file of the project reads them: one JSON value a line, the lines split at
"\n" alone.

`str.splitlines` also ends a line at U+0085, U+2028, U+2029, \\v, \\f and \\x1c-\\x1e, which a
JSON string may hold unescaped (only the characters below U+0020 must be escaped): one such
character in one candidate's source, written raw by another tool, cut its line into fragments
that are not JSON, and the whole population run became unreadable (red team round 16). The
project's own writers keep JSON's default escapes (`json.dumps` with `ensure_ascii`), so its
files are ASCII; `lines` reads any writer's.
"""

from __future__ import annotations


def lines(text: str) -> list[str]:
  """The lines of a JSON Lines text, split at "\\n" alone; a "\\r" before it (a file saved with
  Windows line ends) is dropped, and so is the empty string after a last "\\n"."""
  parts = text.split("\n")
  if parts and parts[-1] == "":
    parts.pop()
  return [p.removesuffix("\r") for p in parts]
