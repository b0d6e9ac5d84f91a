"""A population's candidates, read from what a user hands in, checked before anything runs.

Two forms:

- a JSON Lines file, one candidate a line:
  `{"task": "relu", "source": "...", "id": "relu/fast", "parent": "...", "kind": "tuning"}`;
  `task` and `source` are required, the rest optional (`id` defaults to `<task>/line-<n>`);
- a folder of `<task>/<name>.py` files: the folder names the task, the candidate's id is
  `<task>/<name>`; parent and kind are unknown.

Every error names the file (and line) at fault and what to do; nothing is evaluated until the
whole population reads. Candidate code is only read here, as text.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Iterable
from typing import Any, Final

from pallasbench_dataset import jsonlines
from pallasbench_dataset.kernels import KernelLoadError, read_source, sha256
from pallasbench_dataset.tasks import TASKS

# The population as the run folder keeps it (a JSON Lines file of the form above, every field
# filled): the builder reads each candidate's source, parent and kind from it.
CANDIDATES: Final = "candidates.jsonl"
KINDS: Final = ("tuning", "broken", "cheat")  # what the generator says; others are accepted
# Kinds of candidate that may never pass: one that does is a hole in the judge.
MUST_FAIL: Final = ("broken", "cheat")
_FIELDS: Final = ("id", "task", "source", "parent", "kind")


class PopulationError(ValueError):
  """The population cannot be read; the message names the place and the fix."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
  id: str
  task: str
  source: str
  parent: str | None = None  # what it was made from, as the population says
  kind: str | None = None    # e.g. tuning, broken, cheat

  @property
  def sha256(self) -> str:
    return sha256(self.source)

  @property
  def filename(self) -> str:
    """The name its code runs under (in tracebacks and compiler messages)."""
    return f"{self.id}.py"

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self))  # escaped: ASCII lines (jsonlines.py)


def read_candidates(path: pathlib.Path) -> list[Candidate]:
  """The candidates of a JSON Lines file or a `<task>/<name>.py` folder, in file order
  (folder: sorted by path)."""
  path = pathlib.Path(path)
  if path.is_dir():
    candidates = _read_folder(path)
  elif path.is_file():
    candidates = _read_jsonl(path)
  else:
    raise PopulationError(f"{path} does not exist: pass a JSON Lines file of candidates or a "
                          "folder of <task>/<name>.py files")
  if not candidates:
    raise PopulationError(f"{path} holds no candidates")
  return candidates


def to_jsonl(candidates: Iterable[Candidate]) -> str:
  return "".join(c.to_json() + "\n" for c in candidates)


def _check_task(task: Any, where: str) -> str:
  if not isinstance(task, str) or task not in TASKS:
    raise PopulationError(f"{where}: unknown task {task!r}; tasks: {', '.join(TASKS)}")
  return task


def _text(data: dict, name: str, where: str, *, required: bool) -> str | None:
  value = data.get(name)
  if value is None and not required:
    return None
  if not isinstance(value, str) or not value.strip():
    need = "a non-empty string" + ("" if required else " or null")
    raise PopulationError(f"{where}: {name!r} must be {need}, not {value!r}")
  return _checked(value, name, where)


def _checked(value: str, name: str, where: str) -> str:
  """`value` if it is text: UTF-8 encodes (no lone surrogate, which JSON escapes and file names
  carry) and, but for the source, is one line of printable characters (an id, a kind and a
  parent are shown in keys, tables, plots and terminals)."""
  try:
    value.encode("utf-8")
  except UnicodeEncodeError as e:
    raise PopulationError(f"{where}: {name!r} is not text (a lone surrogate, "
                          f"{value[e.start]!r}, at character {e.start}); write it as UTF-8"
                          ) from None
  if name != "source" and not value.isprintable():
    bad = next(c for c in value if not c.isprintable())
    raise PopulationError(f"{where}: {name!r} holds the control or format character {bad!r}; "
                          f"it must be one line of printable text, not {value!r}")
  return value


def _text_of(path: pathlib.Path) -> str:
  try:
    return path.read_text(encoding="utf-8")
  except UnicodeDecodeError as e:
    raise PopulationError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None


def _read_jsonl(path: pathlib.Path) -> list[Candidate]:
  candidates, lines = [], {}
  for n, line in enumerate(jsonlines.lines(_text_of(path)), start=1):
    if not line.strip():
      continue
    where = f"{path}:{n}"
    try:
      data = json.loads(line)
    except json.JSONDecodeError as e:
      raise PopulationError(f"{where}: not valid JSON ({e.msg} at column {e.colno}); each line "
                            "must be one object such as {\"task\": \"relu\", \"source\": \"...\"}"
                            ) from None
    if not isinstance(data, dict):
      raise PopulationError(f"{where}: a line must hold one JSON object, not "
                            f"{type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
      raise PopulationError(f"{where}: unknown keys {unknown}; a candidate has {list(_FIELDS)}")
    task = _check_task(data.get("task"), where)
    candidate = Candidate(
        id=_text(data, "id", where, required=False) or f"{task}/line-{n}", task=task,
        source=_text(data, "source", where, required=True),
        parent=_text(data, "parent", where, required=False),
        kind=_text(data, "kind", where, required=False))
    if candidate.id in lines:
      raise PopulationError(f"{where}: id {candidate.id!r} is also on line {lines[candidate.id]};"
                            " ids must be unique")
    lines[candidate.id] = n
    candidates.append(candidate)
  return candidates


def _kernel_text(path: pathlib.Path) -> str:
  """A candidate file's text as the judge reads it (`kernels.read_source`: UTF-8, no byte
  order mark)."""
  try:
    return read_source(path)[0]
  except KernelLoadError as e:
    raise PopulationError(str(e)) from None


def _read_folder(folder: pathlib.Path) -> list[Candidate]:
  candidates = []
  for path in sorted(folder.rglob("*.py")):
    parts = path.relative_to(folder).parts
    if "__pycache__" in parts or any(p.startswith(".") for p in parts):
      continue
    if len(parts) != 2:
      raise PopulationError(f"{path}: a candidate folder holds <task>/<name>.py files, one "
                            "folder per task; move it into its task's folder")
    task = _check_task(parts[0], f"{path} (its folder names the task)")
    name = _checked(path.stem, "id", f"{str(path)!r} (its file name is the candidate's id)")
    candidates.append(Candidate(id=f"{task}/{name}", task=task, source=_kernel_text(path)))
  return candidates
