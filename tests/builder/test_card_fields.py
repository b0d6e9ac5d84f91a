"""Red team round 16, finding 3: a population's candidate ids reach the card as Markdown and
HTML (class 17, the card's text).

`builder.sections.candidates` writes `cheats_passed` as "`<id>`" joined, raw, and `md_table`
(builder.tables._cell) collapses whitespace and escapes `|` only. A candidate id (free text:
`read_candidates` asks only for a non-empty string) holding a backtick and newlines ends its
code span and writes its own heading into the card; one holding `<!--` in the `best` table
opens an HTML comment that hides the rest of the card where it is rendered (the Hub's README).
Measured with ids "relu/fast<!--" and "relu/x`\\n\\n## Forged heading\\n\\n`y" (both passed, the
second a cheat): the README holds the line "## Forged heading" and a raw "<!--".
"""

import pytest

from builder import build
from pallasbench_dataset.population.candidates import Candidate

from tests import runfixtures as rf
from tests.builder.test_pieces import (  # noqa: F401  pylint: disable=unused-import
    _population_run, trees)

REASON = ("red team round 16, open: candidate ids (and kinds) reach the card raw: backticks, "
          "newlines and HTML are not escaped (sections.candidates, tables._cell)")


@pytest.mark.xfail(strict=True, reason=REASON)
def test_candidate_ids_cannot_write_the_card(trees, tmp_path):
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  hide = Candidate(id="relu/fast<!--", task="relu", source="# a\n", kind="tuning")
  forge = Candidate(id="relu/x`\n\n## Forged heading\n\n`y", task="relu", source="# b\n",
                    kind="cheat")
  pop = _population_run(tmp_path / "pop", trees, [hide, forge])
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees,
                                candidate_runs=[pop], repo_id="o/pb")
  card = (summary.out_dir / "README.md").read_text()
  assert "\n## Forged heading\n" not in card
  assert "<!--" not in card
