"""Red team round 16, finding 1: one candidate's line separator makes its population run
unreadable (class 17, the population's text).

A population run keeps its population as candidates.jsonl (`to_jsonl`: `json.dumps(...,
ensure_ascii=False)`, one object a line) and reads it back with `read_candidates`, which splits
the file with `str.splitlines()`. `json.dumps` escapes only the characters below U+0020 (and `"`
and `\\`), so U+0085 NEXT LINE, U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR are
written raw; `splitlines` splits at all three. A candidate whose source holds one (in a comment
or a string: Python ends lines only at \\n and \\r, so the kernel is unchanged and may pass,
tests/controls/adv_line_separator_relu.py: `pass`) turns its line into fragments that are not
JSON. Every reader of the run then raises PopulationError: `population.run.summarize` (the
command's report, right after the run), `--resume`, and the build (`builder.candidates.
read_population` -> BuildError), for every candidate of the run.

Measured: `read_candidates` of the file `to_jsonl` wrote for [an honest candidate, the control]
raised "candidates.jsonl:2: not valid JSON (Unterminated string starting at at column 46)".
Closed (session 32): pallasbench_dataset/jsonlines.py splits at "\n" alone, and the project
writes its lines escaped.
"""

import dataclasses
import json

import pytest

from builder import build
from pallasbench_dataset import jsonlines
from pallasbench_dataset.population.candidates import (
    Candidate, read_candidates, to_jsonl)

from tests import runfixtures as rf
from tests.builder.test_pieces import (  # noqa: F401  pylint: disable=unused-import
    _candidate, _population_run, trees)
from tests.paths import CONTROLS

SEPARATORS = {"next_line": "\x85", "line_separator": "\u2028", "paragraph_separator": "\u2029"}


@pytest.mark.parametrize("char", SEPARATORS.values(), ids=SEPARATORS.keys())
def test_a_population_file_reads_back_whatever_its_sources_hold(char, tmp_path):
  population = [Candidate(id="relu/honest", task="relu", source="# honest\n"),
                Candidate(id="relu/hostile", task="relu", source=f"# a{char}b\n", kind="tuning")]
  path = tmp_path / "candidates.jsonl"
  path.write_text(to_jsonl(population), encoding="utf-8")
  assert read_candidates(path) == population


def test_one_candidate_s_line_separator_does_not_break_the_build(trees, tmp_path):
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  source = (CONTROLS / "adv_line_separator_relu.py").read_text(encoding="utf-8")
  honest = _candidate("honest")
  hostile = Candidate(id="relu/hostile", task="relu", source=source, kind="tuning")
  pop = _population_run(tmp_path / "pop", trees, [honest, hostile])
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees,
                                candidate_runs=[pop], repo_id="o/pb")
  assert summary.out_dir.is_dir()


@pytest.mark.parametrize("char", SEPARATORS.values(), ids=SEPARATORS.keys())
def test_a_population_file_another_tool_wrote_raw_reads_back(char, tmp_path):
  """Both halves of the fix: the project writes ASCII lines, and reads any writer's, split at
  "\n" alone (pallasbench_dataset/jsonlines.py)."""
  population = [Candidate(id="relu/honest", task="relu", source="# honest\n"),
                Candidate(id="relu/hostile", task="relu", source=f"# a{char}b\n", kind="tuning")]
  assert to_jsonl(population).isascii()
  path = tmp_path / "candidates.jsonl"
  path.write_text("\r\n".join(json.dumps(dataclasses.asdict(c), ensure_ascii=False)
                              for c in population) + "\r\n", encoding="utf-8")
  assert char in path.read_text(encoding="utf-8")
  assert read_candidates(path) == population


def test_json_lines_are_split_at_newline_alone():
  """Every reader of the project's JSON Lines (population, records, autotune results, the
  build's) splits with jsonlines.lines: at "\n" alone, a Windows "\r" dropped, no empty last."""
  assert jsonlines.lines('{"a": "x\u2028y\x85z\x0c"}\r\n{}\n\n{}') == [
      '{"a": "x\u2028y\x85z\x0c"}', "{}", "", "{}"]
  assert jsonlines.lines("") == [] and jsonlines.lines("{}") == ["{}"]
