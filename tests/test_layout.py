"""The trust boundary in the layout: the trusted rooms never import the untrusted one.

`evaluation/exporter/` is the only code that runs beside candidate code; `judge/` and
`pipeline/` start it as a program and read its answer as bytes (protocol.py). An import of it
from a trusted room (or from the sandbox that holds it) would put code the candidate's process
runs, and may have patched in memory there, on the trusted side's path.
"""

import ast
import pathlib

import pytest

EVALUATION = pathlib.Path(__file__).resolve().parents[1] / "pallasbench_dataset" / "evaluation"
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
