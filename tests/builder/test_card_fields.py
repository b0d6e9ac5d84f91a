"""Red team round 16, finding 3: a population's candidate ids reach the card as Markdown and
HTML (class 17, the card's text).

`builder.sections.candidates` writes `cheats_passed` as "`<id>`" joined, raw, and `md_table`
(builder.tables._cell) collapses whitespace and escapes `|` only. A candidate id (free text:
`read_candidates` asks only for a non-empty string) holding a backtick and newlines ends its
code span and writes its own heading into the card; one holding `<!--` in the `best` table
opens an HTML comment that hides the rest of the card where it is rendered (the Hub's README).
Measured with ids "relu/fast<!--" and "relu/x`\\n\\n## Forged heading\\n\\n`y" (both passed, the
second a cheat): the README holds the line "## Forged heading" and a raw "<!--". Closed
(session 32): builder.tables.md_inline for every cell, md_code for the code spans.
"""

import pandas as pd

from builder import build
from builder.tables import md_code, md_inline, md_table
from pallasbench_dataset.population.candidates import Candidate

from tests import runfixtures as rf
from tests.builder.test_pieces import (  # noqa: F401  pylint: disable=unused-import
    _population_run, trees)

def test_candidate_ids_cannot_write_the_card(trees, tmp_path):
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  hide = Candidate(id="relu/fast<!--", task="relu", source="# a\n", kind="tuning")
  # (An id with a line break is refused when the population is read: round 21, finding 7.)
  forge = Candidate(id="relu/x` ## Forged heading `y", task="relu", source="# b\n", kind="cheat")
  pop = _population_run(tmp_path / "pop", trees, [hide, forge])
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees,
                                candidate_runs=[pop], repo_id="o/pb")
  card = (summary.out_dir / "README.md").read_text()
  assert "\n## Forged heading" not in card and "relu/x\\` ## Forged heading \\`y" in card
  assert "relu/fast<!--" not in card and card.count("<!--") == 1  # the builder's own mark
  assert "relu/fast&lt;\\!--" in card                             # shown, inert


def test_text_from_outside_the_builder_is_inert_in_the_card():
  """md_inline (every table cell, through tables._cell) and md_code (a code span): no newline,
  so no heading or block; no raw HTML; no backtick that ends a span; no bar that ends a cell."""
  hostile = "a|b`c\n\n## h\n<!-- x -->"
  assert md_inline(hostile) == "a\\|b\\`c ## h &lt;\\!-- x -->"
  assert md_table(pd.DataFrame([{"id": hostile}])).splitlines()[-1] == (
      "| a\\|b\\`c ## h &lt;\\!-- x --> |")
  assert md_code("x`` y\n# z") == "```x`` y # z```"
  assert md_code("`edge") == "`` `edge ``"
