"""Red team round 22 (docs/red-team/round22.md), the builder's part.

4. Round 21 made `md_inline` escape what opens a link or an image (`[`, `]`, `!`) and a
   character reference (`&`) by prefixing a backslash, but left the backslash itself as written.
   A text that writes its own backslash before a bracket turns the escape into an escaped
   backslash, and the bracket is live again: `\\[the official results\\](https://...)` is a link
   in the card (the candidate tables, from a candidate's id or kind), and `\\&#8238;` writes a
   right-to-left override. Measured with markdown-it (gfm-like), as round 21's tests render.

Written as strict xfails; they pass since the fix (round22.md, "Since").
"""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from builder import candidates as bc
from builder.sections import candidates as card_candidates
from builder.tables import md_inline
from pallasbench_dataset.population.candidates import Candidate

from tests.builder.test_pieces import (  # noqa: F401  pylint: disable=unused-import
    _population_run, trees)

# Round 21's hostile text with a backslash of its own before each bracket.
LINK = r"\[the official results\](https://evil.example/login)"
REFERENCE = r"\&#8238;stluser"


def _html(markdown: str) -> str:
  return MarkdownIt("gfm-like").render(markdown)


@pytest.mark.parametrize("text, live", [(LINK, "<a "), (REFERENCE, "\u202e")],
                         ids=["link", "character_reference"])
def test_a_text_s_own_backslash_does_not_make_its_bracket_live(text, live):
  html = _html(f"| a |\n|---|\n| {md_inline(text)} |")
  assert live not in html, f"{text!r} -> {md_inline(text)!r} renders {html!r}"


def test_the_card_s_candidate_tables_render_no_link_from_an_escaped_bracket(
    trees, tmp_path):  # pylint: disable=redefined-outer-name
  hostile = Candidate(id=f"relu/{LINK}", task="relu", source="# fast\n", kind=LINK)
  run = bc.read_population(_population_run(tmp_path / "pop", trees, [hostile]))
  stats = card_candidates.candidates_stats([run], bc.candidate_rows([run]))
  for name in ("best", "by_kind"):
    html = _html(stats[name])
    assert "<a " not in html, (name, html)
