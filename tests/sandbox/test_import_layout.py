"""The layout: the trusted rooms never import the untrusted one, and imports run one way.

`evaluation/exporter/` is the only code that runs beside candidate code; `judge/` and
`pipeline/` start it as a program and read its answer as bytes (protocol.py). An import of it
from a trusted room (or from the sandbox that holds it) would put code the candidate's process
runs, and may have patched in memory there, on the trusted side's path.

Imports run one way (docs/design.md: data flows one way): no module imports, however indirectly,
one that imports it, and neither does a room (a package with all it holds) at any depth.
"""

import ast
import functools
import pathlib
import re

import pytest

from tests.paths import REPO, TESTS

EVALUATION = REPO / "pallasbench_dataset" / "evaluation"
UNTRUSTED = "pallasbench_dataset.evaluation.exporter"


def _imports(path: pathlib.Path) -> set[str]:
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      found.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      found.add(node.module)
      found.update(f"{node.module}.{alias.name}" for alias in node.names)
  return found


@pytest.mark.parametrize("room", ["judge", "pipeline", "sandbox"])
def test_a_trusted_room_imports_nothing_of_the_exporter(room):
  files = sorted((EVALUATION / room).glob("*.py"))
  assert files
  offending = {f.name: sorted(i for i in _imports(f) if i.startswith(UNTRUSTED))
               for f in files}
  assert {name: found for name, found in offending.items() if found} == {}


def test_the_check_sees_an_import_of_the_exporter(tmp_path):
  path = tmp_path / "bad.py"
  path.write_text("from pallasbench_dataset.evaluation.exporter import program\n")
  assert f"{UNTRUSTED}.program" in _imports(path)


# ---------------------------------------------------------------------------------------------
# One way for the data: no module imports, however indirectly, a module that imports it.

PACKAGES = ("pallasbench_dataset", "builder", "benchmarks")


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
  """Every module of the project's packages under `root`, by dotted name."""
  found = {}
  for package in PACKAGES:
    for path in sorted((root / package).rglob("*.py")):
      parts = path.relative_to(root).with_suffix("").parts
      found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  return found


def _targets(path: pathlib.Path, name: str, modules: dict[str, pathlib.Path]) -> set[str]:
  """The project's modules that `path` (module `name`) imports, anywhere in its text."""
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  wanted = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      wanted.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        base = f"{anchor}.{base}" if base else anchor
      wanted.add(base)
      wanted.update(f"{base}.{alias.name}" for alias in node.names)
  targets = set()
  for dotted in wanted:
    while dotted and dotted not in modules:
      dotted = dotted.rpartition(".")[0]
    if dotted and dotted != name:
      targets.add(dotted)
  return targets


@functools.cache
def _graph(root: pathlib.Path) -> dict[str, set[str]]:
  modules = _modules(root)
  return {name: _targets(path, name, modules) for name, path in modules.items()}


def _rooms(graph: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
  """The graph of the rooms at `depth`: a package `depth` names deep holds every module below
  it (depth 1: the library, builder/, benchmarks/; 2: the library's evaluation/, tasks/, ...,
  each with all it holds, and its top-level modules; 3: evaluation/judge/, ...)."""
  rooms: dict[str, set[str]] = {}
  for module, targets in graph.items():
    room = ".".join(module.split(".")[:depth])
    rooms.setdefault(room, set()).update(
        t for t in (".".join(t.split(".")[:depth]) for t in targets) if t != room)
  return rooms


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected parts of `graph` with more than one node (Tarjan), each sorted."""
  index, low, stack, on_stack, loops = {}, {}, [], set(), []

  def visit(node: str) -> None:
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target in sorted(graph.get(node, ())):
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      part = []
      while not part or part[-1] != node:
        part.append(stack.pop())
        on_stack.discard(part[-1])
      if len(part) > 1:
        loops.append(sorted(part))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return loops


def test_no_module_imports_a_module_that_imports_it():
  assert _loops(_graph(REPO)) == []


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_no_room_imports_a_room_that_imports_it(depth):
  """A back-arrow: a module below a room (kernels.py under evaluation/) importing from inside
  it, or a room importing a module above it (evaluate.py, which drives evaluation/); at depth
  1, the library importing builder/."""
  assert _loops(_rooms(_graph(REPO), depth)) == []


def test_the_checks_see_a_loop_and_a_back_arrow(tmp_path):
  library = tmp_path / "pallasbench_dataset"
  (library / "evaluation").mkdir(parents=True)
  for name, text in {"__init__.py": "", "tasks.py": "from . import task_info\n",
                     "task_info.py": "from pallasbench_dataset.tasks import get_task\n",
                     "kernels.py": "from pallasbench_dataset.evaluation.errors import x\n",
                     "evaluation/__init__.py": "",
                     "evaluation/errors.py": "import pallasbench_dataset.schema\n",
                     "evaluation/judge.py": "from pallasbench_dataset import kernels\n",
                     "schema.py": ""}.items():
    (library / name).write_text(text)
  graph = _graph(tmp_path)
  assert _loops(graph) == [["pallasbench_dataset.task_info", "pallasbench_dataset.tasks"]]
  assert _loops(_rooms(graph, 2)) == [
      ["pallasbench_dataset.evaluation", "pallasbench_dataset.kernels"],
      ["pallasbench_dataset.task_info", "pallasbench_dataset.tasks"]]


def test_every_slow_entry_names_a_test_that_exists():
  """conftest.SLOW and LONGEST mark by path below tests/: a misspelt or stale entry would mark
  nothing, and a slow test would creep back into the fast loop (a long file, to the end of
  the run)."""
  from tests.conftest import LONGEST, SLOW  # pylint: disable=import-outside-toplevel
  missing = []
  for entry in sorted(SLOW):
    file, _, test = entry.partition("::")
    path = TESTS / file
    if not path.exists() or (test and not re.search(rf"^def {test}\(", path.read_text(), re.M)):
      missing.append(entry)
  assert missing == []
  assert [file for file in LONGEST if not (TESTS / file).exists()] == []
