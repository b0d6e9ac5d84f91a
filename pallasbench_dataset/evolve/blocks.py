"""The one EVOLVE-BLOCK of a scaffold's initial program, decided from the kernel module's AST.

Both frameworks read the same Python markers, each on a line of its own: `# EVOLVE-BLOCK-START`
and `# EVOLVE-BLOCK-END` (OpenEvolve 0.4.1 `openevolve/utils/code_utils.py`, `_EVOLVE_MARKER`;
ShinkaEvolve 0.0.7 `shinka/edit/apply_diff.py`, `EVOLVE_START` / `EVOLVE_END`). Above the block
stay the docstring, the imports and the fixed constants; the block holds everything else
(tuning constants, kernel bodies, helpers, the `kernel` wrapper) in source order, so a search
may change tiling, fusion and launch parameters but not what the task is. Working on the AST
rather than on the layout of today's files keeps this right for any kernel module: comments
travel with the statement below them, and a fixed constant that reads a name the block defines
stays in the block.
"""

from __future__ import annotations

import ast
from typing import Final

START: Final = "# EVOLVE-BLOCK-START"
END: Final = "# EVOLVE-BLOCK-END"

# Top-level names whose values are not the search's to choose: the kernel's metadata (TASK_NAME
# names the pallas_call; FIX_APPLIED and FIX_REASON are dataset columns) and numbers the task
# defines (its reference: the eps of norms and logs, 1024 one-hot classes, 4 nucleotides, the clamp
# bounds, the tanh-gelu constant). Every other top-level name is a tuning choice.
FIXED_NAMES: Final = frozenset({"TASK_NAME", "FIX_APPLIED", "FIX_REASON", "BACKEND", "EPS",
                                "NUM_CLASSES", "NUM_BASES", "LOW", "HIGH", "SQRT_2_OVER_PI"})

# (statements, first line, last line), 1-based and inclusive: a statement owns the comment and
# blank lines above it; statements that share a line form one chunk.
_Chunk = tuple[list[ast.stmt], int, int]


class BlockError(ValueError):
  """The source cannot be given exactly one EVOLVE-BLOCK; the message says why."""


def mark(source: str, filename: str = "<kernel source>") -> str:
  """`source` as an initial program: its fixed part, then one EVOLVE-BLOCK around the rest."""
  if "EVOLVE-BLOCK" in source:
    raise BlockError(f"{filename} already mentions EVOLVE-BLOCK; the scaffold adds the markers")
  if not source.endswith("\n"):
    source += "\n"
  try:
    body = ast.parse(source, filename).body
  except SyntaxError as e:
    raise BlockError(f"{filename} does not parse (line {e.lineno}: {e.msg})") from None
  lines = source.splitlines(keepends=True)
  chunks = _chunks(body)
  evolvable = _evolvable(chunks)
  if not any(evolvable):
    raise BlockError(f"{filename} has nothing to evolve after its imports and fixed constants")

  def text(chunk: _Chunk) -> str:
    return "".join(lines[chunk[1] - 1:chunk[2]])

  head = "".join(text(c) for c, e in zip(chunks, evolvable) if not e)
  block = "".join(text(c) for c, e in zip(chunks, evolvable) if e)
  inside = block.lstrip("\n")  # blank lines that opened the block go above its marker
  tail = "".join(lines[chunks[-1][2]:])
  return (head + block[:len(block) - len(inside)] + START + "\n" + inside + END + "\n" + tail)


def _chunks(body: list[ast.stmt]) -> list[_Chunk]:
  chunks: list[_Chunk] = []
  for node in body:
    if chunks and node.lineno <= chunks[-1][2]:
      nodes, first, _ = chunks[-1]
      chunks[-1] = (nodes + [node], first, node.end_lineno)
    else:
      chunks.append(([node], chunks[-1][2] + 1 if chunks else 1, node.end_lineno))
  return chunks


def _evolvable(chunks: list[_Chunk]) -> list[bool]:
  """Per chunk: True unless every statement in it is fixed and reads nothing the block binds."""
  flags = [not all(_is_fixed(node, first=i == j == 0) for j, node in enumerate(nodes))
           for i, (nodes, _, _) in enumerate(chunks)]
  changed = True
  while changed:  # a chunk that joins the block may bind a name another fixed chunk reads
    bound = {name for (nodes, _, _), flag in zip(chunks, flags) if flag
             for node in nodes for name in _binds(node)}
    changed = False
    for i, (nodes, _, _) in enumerate(chunks):
      if not flags[i] and _reads(nodes) & bound:
        flags[i] = changed = True
  return flags


def _is_fixed(node: ast.stmt, *, first: bool) -> bool:
  if first and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
      and isinstance(node.value.value, str):
    return True  # the module docstring
  if isinstance(node, (ast.Import, ast.ImportFrom)):
    return True
  targets = node.targets if isinstance(node, ast.Assign) else \
      [node.target] if isinstance(node, ast.AnnAssign) else []
  return len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id in FIXED_NAMES


def _binds(node: ast.stmt) -> set[str]:
  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
    return {node.name}
  return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _reads(nodes: list[ast.stmt]) -> set[str]:
  return {n.id for node in nodes for n in ast.walk(node)
          if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
