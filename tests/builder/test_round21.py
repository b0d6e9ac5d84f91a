"""Red team round 21: what a population's candidates reach after their verdicts
(docs/red-team/round21.md): the preference config's `chosen` answers, the card, the records
the build trusts.

1. `training.population_pairs` keeps one row per distinct source (the first by candidate id)
   in each run, and pairs runs separately. A text that the same build shows `incorrect` (a
   twin judged apart: `population evaluate --no-cache`, another run, another cache) is
   published as a `chosen` answer, `chosen_status` "pass"; across two runs the same text is
   `chosen` in one pair and `rejected` in another.
2. A candidate its own population names a `cheat` or `broken` (`population.candidates.MUST_FAIL`:
   "one that passes is a hole in the judge", which the card lists as "Cheats that passed")
   is `chosen` by the preference config when it passed.
3. `tables.md_inline`, "text inert in a line of the card", escapes bars, backticks and `<`
   only: a candidate's id or kind holding Markdown link or image syntax renders as a link or
   an `<img>` in the card's tables (markdown-it, GFM tables: measured).
4. The build checks a record against the registry, its speedups against its times and its
   sha256 against its source, never its status against its own fields: a record edited to
   `pass` that still says `correct: false` and `not allclose` is published as a pass and
   chosen.

Each test states what should hold; written as strict xfails, they pass since the fixes
(round21.md, "Since").
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pyarrow.parquet as pq
import pytest
from markdown_it import MarkdownIt

from builder import build, training
from builder import candidates as bc
from builder.records import BuildError
from builder.sections import candidates as card_candidates
from builder.tables import md_inline, md_table
from pallasbench_dataset.population.candidates import Candidate
from pallasbench_dataset.population.candidates import MUST_FAIL
from pallasbench_dataset.schema import CandidateRow, Status

from tests import runfixtures as rf
from tests.builder.test_pieces import (  # noqa: F401  pylint: disable=unused-import
    _candidate_record, _population_run, trees)

# A lottery kernel's source (wrong on some draws): the same text in every row below.
LOTTERY = "# the same text, judged twice\ndef kernel(x): ...\n"


def _row(name: str, status: str, speedup: float | None, *, run: str = "r",
         source: str | None = None, kind: str | None = None) -> CandidateRow:
  source = source if source is not None else f"# {name}\n"
  return CandidateRow(
      candidate=f"relu/{name}", run=run, task="relu", task_id=1, level=1, size="small",
      parent=None, kind=kind, source=source, kernel_sha256=Candidate(
          id="x", task="relu", source=source).sha256, status=status, correct=status == "pass",
      speedup=speedup, speedup_eager=None, speedup_shipped=None, runtime_ms=None,
      baseline_ms=None, shipped_ms=None, reasons=() if status == "pass" else ("seed 7: not "
                                                                              "allclose",),
      error_type=None, error=None, cached=False, device="gpu", hardware="NVIDIA H200",
      timing_comparable=True, judge_version="2", measured_at="2026-12-07T10:00:00+00:00")


def _failed_shas(rows) -> set[str]:
  """The sources the rows show failing on their own merits (a limit's ending is the host's)."""
  return {r.kernel_sha256 for r in rows if r.status in ("incorrect", "rejected", "error")}


# -- 1. a text the build shows incorrect is chosen ---------------------------------------------

def test_a_text_one_twin_shows_incorrect_is_never_chosen():
  """One run judged without the cache (`--no-cache`): two candidates hold the lottery text,
  `a` passed on its draw, `b` was incorrect on its own; `c` is another, failing kernel, and
  `d` a slower one that passed."""
  rows = [_row("a", "pass", 2.0, source=LOTTERY), _row("b", "incorrect", None, source=LOTTERY),
          _row("c", "incorrect", None), _row("d", "pass", 1.0)]
  pairs = training.population_pairs(rows)
  assert pairs, "no pair at all: the test no longer measures what it was written for"
  chosen = {p.chosen_sha256 for p in pairs}
  assert not chosen & _failed_shas(rows), [(p.chosen_kernel, p.rejected_kernel) for p in pairs]


def test_one_text_is_never_both_chosen_and_rejected(trees, tmp_path):
  """Two population runs of one machine (each with its own cache, or the judge's code moved on
  between them) judged the lottery text: `pass` in run `p1`, `incorrect` in run `p2`. Built,
  the preference config publishes that text as `chosen` (status pass) and as `rejected`."""
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  lucky = Candidate(id="relu/lucky", task="relu", source=LOTTERY)
  unlucky = Candidate(id="relu/unlucky", task="relu", source=LOTTERY)
  bad = Candidate(id="relu/bad", task="relu", source="# a wrong kernel\n")
  good = Candidate(id="relu/good", task="relu", source="# a right kernel\n")
  fails = dict(status=Status.INCORRECT, correct=False, robust=True, speedup=None,
               runtime_ms=None, reasons=("seed 7: not allclose",))
  p1 = _population_run(tmp_path / "p1", trees, [lucky, bad], [
      _candidate_record(trees, lucky), dataclasses.replace(_candidate_record(trees, bad), **fails)])
  p2 = _population_run(tmp_path / "p2", trees, [unlucky, good], [
      dataclasses.replace(_candidate_record(trees, unlucky), **fails),
      _candidate_record(trees, good)])
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees,
                                candidate_runs=[p1, p2], repo_id="o/pb")
  pairs = [r for f in (summary.out_dir / "preference").glob("*.parquet")
           for r in pq.read_table(f).to_pylist() if r["pair_kind"] == "population"]
  candidates = pq.read_table(summary.out_dir / "candidates" / "train-00000-of-00001.parquet")
  statuses = {(r["kernel_sha256"], r["status"]) for r in candidates.to_pylist()}
  assert (lucky.sha256, "incorrect") in statuses  # the build holds the text's failure
  chosen = {r["chosen_sha256"] for r in pairs}
  rejected = {r["rejected_sha256"] for r in pairs}
  assert lucky.sha256 not in chosen, [(r["chosen_kernel"], r["rejected_kernel"]) for r in pairs]
  assert not chosen & rejected


# -- 2. a cheat that passed is chosen -----------------------------------------------------------

@pytest.mark.parametrize("kind", MUST_FAIL)
def test_a_candidate_its_population_says_must_fail_is_never_chosen(kind):
  rows = [_row("hole", "pass", 3.0, kind=kind), _row("tuned", "pass", 1.0, kind="tuning"),
          _row("wrong", "incorrect", None, kind="tuning")]
  pairs = training.population_pairs(rows)
  assert pairs, "no pair at all: the test no longer measures what it was written for"
  chosen = {p.chosen_kernel for p in pairs}
  assert "r/relu/hole" not in chosen, [(p.chosen_kernel, p.rejected_kernel) for p in pairs]


# -- 3. Markdown links and images in the card ---------------------------------------------------

HOSTILE_TEXT = ("![build passing](https://evil.example/pixel.png) "
                "[the official results](https://evil.example/login)")


def _html(markdown: str) -> str:
  return MarkdownIt("gfm-like").render(markdown)


def test_text_md_inline_makes_inert_renders_no_link_or_image():
  html = _html(md_inline(HOSTILE_TEXT))
  assert "<img" not in html and "<a " not in html, html


def test_the_card_s_candidate_tables_render_no_link_or_image(trees, tmp_path):
  hostile = Candidate(id=f"relu/{HOSTILE_TEXT}", task="relu", source="# fast\n", kind=HOSTILE_TEXT)
  run = bc.read_population(_population_run(tmp_path / "pop", trees, [hostile]))
  stats = card_candidates.candidates_stats([run], bc.candidate_rows([run]))
  for name in ("best", "by_kind"):
    html = _html(stats[name])
    assert "<img" not in html and "<a " not in html, (name, html)


def test_md_table_still_shows_the_text():
  """Control: the text reaches the card (only its rendering is in question)."""
  table = md_table(pd.DataFrame([{"kind": HOSTILE_TEXT}]))
  assert "evil.example/pixel.png" in table


# -- 4. a record whose status contradicts its own fields ----------------------------------------

def test_a_record_that_says_pass_and_not_allclose_is_refused(trees, tmp_path):
  """The judge writes `pass` only with correct, robust, no reasons and no error
  (`judge.core`); a line edited from `incorrect` to `pass` keeps the rest."""
  c = Candidate(id="relu/edited", task="relu", source="# edited\n")
  edited = dataclasses.replace(_candidate_record(trees, c), status=Status.PASS, correct=False,
                               robust=True, reasons=("seed 7: not allclose(rtol=1e-05): 4 of "
                                                     "262144 elements off",))
  with pytest.raises(BuildError):
    bc.read_population(_population_run(tmp_path / "pop", trees, [c], [edited]))


# -- 6. one candidate's kind aborts the build ---------------------------------------------------

MATHTEXT_KIND = r"$\undefinedmacro$"  # any text with two unescaped dollar signs is mathtext


def test_one_candidate_s_kind_does_not_abort_the_build(trees, tmp_path):
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  honest = Candidate(id="relu/honest", task="relu", source="# honest\n", kind="tuning")
  odd = Candidate(id="relu/odd", task="relu", source="# odd\n", kind=MATHTEXT_KIND)
  pop = _population_run(tmp_path / "pop", trees, [honest, odd])
  try:
    summary, aborted = build.build_dataset([run], tmp_path / "out", kernel_trees=trees,
                                           candidate_runs=[pop], repo_id="o/pb"), None
  except ValueError as e:  # matplotlib's mathtext error (not a BuildError)
    summary, aborted = None, f"{type(e).__name__}: {' '.join(str(e).split())}"
  assert aborted is None, f"one candidate's kind aborted the build: {aborted}"
  table = pq.read_table(summary.out_dir / "candidates" / "train-00000-of-00001.parquet")
  assert [r["kind"] for r in table.to_pylist()] == ["tuning", MATHTEXT_KIND]
