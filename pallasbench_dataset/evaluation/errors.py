"""Readable error text: compiler messages without serialised IR, classified by stage."""

from __future__ import annotations

import pathlib
import re
import traceback
from typing import Final

from pallasbench_dataset.kernels import candidate_frame
from pallasbench_dataset.schema import ErrorType

MAX_ERROR_CHARS: Final = 4000
_ESCAPES: Final = re.compile(r"(?:\\x[0-9a-fA-F]{2}|\\[0-7]{3}|\\[nrt'\"]){4,}")
_ESCAPE: Final = re.compile(r"\\(?:x[0-9a-fA-F]{2}|[0-7]{3})")
# The stages whose failure text the exporter writes, and with it the candidate (its exception's
# message): typed by their stage alone.
_EXPORTER_STAGES: Final = {"load": ErrorType.LOAD, "trace": ErrorType.TRACE,
                           "lowering": ErrorType.LOWERING}


def inert(text: str) -> str:
  """`text` as shown to a person (a terminal, a log): every character that is not printable
  but the line feed and the tab (escape sequences, bell, bidi overrides) written as its Python
  escape, so a candidate's printed output or error cannot draw the screen (red team round 21)."""
  return "".join(c if c.isprintable() or c in "\n\t" else c.encode("unicode_escape").decode()
                 for c in text)


def readable(text: str) -> str:
  """Error text without serialised IR: escaped-byte runs become `<bytes>`, and a text that is
  mostly escaped bytes (a dump of MLIR bytecode) becomes one marker."""
  if sum(len(m) for m in _ESCAPE.findall(text)) >= 0.25 * max(len(text), 1):
    return "<serialised IR bytes>"
  return _ESCAPES.sub("<bytes>", text)


def short_error(e: BaseException | str, *, filename: str | None = None,
                source: str | None = None) -> str:
  """A readable digest of a long error: its first line, Triton's `error:` lines, and the tail;
  with the candidate's `filename` (and its `source`), a last line naming the candidate's own
  frame the error came from (see `candidate_frame`).

  XLA and Triton errors run to pages and may embed serialised IR (escaped bytes): those
  runs are cut to `<bytes>`, and the head is kept when the text must be shortened.
  """
  text = e if isinstance(e, str) else f"{type(e).__name__}: {e}{_where(e)}"
  lines = [readable(line).strip() for line in text.strip().splitlines()]
  lines = [line for line in lines if line and line not in ("<bytes>", "<serialised IR bytes>")
           ] or [text.strip()[:MAX_ERROR_CHARS]]
  if len(lines) > 25:
    errors = [line for line in lines[1:] if "error:" in line][:5]
    lines = lines[:1] + errors + ["..."] + lines[-10:]
  frame = None if isinstance(e, str) or filename is None else candidate_frame(e, filename, source)
  digest = "\n".join(dict.fromkeys(lines))
  if frame is None:
    return digest[:MAX_ERROR_CHARS]
  return digest[:MAX_ERROR_CHARS - len(frame) - 1] + "\n" + frame


MAX_HEADLINE_CHARS: Final = 300
# A line cut short: it ends in a colon, or in a word that needs what follows.
_CONTINUED_BY: Final = frozenset({"but", "and", "or", "of", "to", "with", "than", "is", "at",
                                  "in", "for", "from"})


def _cut_short(text: str) -> bool:
  words = text.split()
  return text.endswith(":") or bool(words) and words[-1].lower() in _CONTINUED_BY


def headline(e: BaseException | str) -> str:
  """The one line a record's `reasons` starts with: what failed and where, at most
  MAX_HEADLINE_CHARS. A first line cut short ("MLIRError: Verification failed:", a message
  that ends in "but") is continued with up to two lines after it: the compiler's own
  `error:` line and the op it names."""
  lines = short_error(e).splitlines() or [""]
  text = lines[0].rstrip()
  for line in lines[1:3]:
    if not _cut_short(text) or not line.strip():
      break
    text = f"{text} {line.strip()}"
  return text if len(text) <= MAX_HEADLINE_CHARS else text[:MAX_HEADLINE_CHARS - 1] + "…"


def _where(e: BaseException) -> str:
  """For an exception without a message (a bare `assert` in a lowering rule): where it was
  raised, so the record says more than "AssertionError:"."""
  if str(e).strip():
    return ""
  frames = traceback.extract_tb(e.__traceback__)
  if not frames:
    return ""
  last = frames[-1]
  parts = pathlib.PurePath(last.filename).parts
  anchor = next((i for i, p in enumerate(parts) if p in ("jax", "jaxlib", "pallasbench_dataset")
                 or p.startswith("kernels_")), max(len(parts) - 2, 0))
  where = f"{'/'.join(parts[anchor:])}:{last.lineno} in {last.name}"
  return f"raised at {where}" + (f": {last.line}" if last.line else "")


def classify(failure: BaseException | str, stage: str) -> ErrorType:
  """The error type of a failure at `stage` (load, trace, lowering, compile, run).

  The type is read from what the trusted side observed, never from words a candidate can
  write, since the verdict cache acts on it (`out_of_memory` is kept out of the reward's cache
  as the host's doing; red team round 18 raised those words at import). The exporter's stages
  get their own type whatever their text says: that text is the candidate's, and the
  exporter's memory death arrives apart, observed by the driver. The judge's own calls
  (compile, run) ran out of memory where they raised MemoryError or XLA's status code, opening
  the message, is RESOURCE_EXHAUSTED (but for shared memory: a kernel's own configuration);
  words elsewhere in a message, which can quote the kernel's names, decide nothing."""
  if stage in _EXPORTER_STAGES:
    return _EXPORTER_STAGES[stage]
  text = str(failure).lstrip()
  first = text.split("\n", 1)[0]
  if isinstance(failure, MemoryError) or (
      first.startswith("RESOURCE_EXHAUSTED") and "hared memory" not in first):
    return ErrorType.OUT_OF_MEMORY
  return ErrorType.COMPILE if stage == "compile" else ErrorType.RUNTIME
