"""The card is its sections: each a module of `builder.sections` (its context from the build)
with a partial of its own (`templates/sections/<module>.md.j2`), in one ordered list, and a
top template that only includes the partials in that order."""

import pkgutil
import shutil
import types

import jinja2
import jinja2.meta
import pytest

from builder import card, sections
from builder.records import merge_runs, read_run
from builder.rows import summary_rows
from builder.sections.inputs import CardInputs
from tests import runfixtures as rf

TEMPLATES = card.TEMPLATE.parent
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES))


def _reads(name: str) -> set[str]:
  """The names a template reads from its context."""
  return jinja2.meta.find_undeclared_variables(ENV.parse(ENV.loader.get_source(ENV, name)[0]))


def _name(section: types.ModuleType) -> str:
  return section.__name__.rpartition(".")[2]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  root = tmp_path_factory.mktemp("card-sections")
  trees = rf.write_tree(root / "src")
  run = read_run(rf.write_run(root / "run-a", rf.standard_records(trees)))
  merged = merge_runs([run])
  return CardInputs(rows=summary_rows(merged, trees, "medium"), merged=merged, runs=[run],
                    headline="medium", repo_id="org/pb", configs={"default": {"level_1": 2}},
                    rebuild="the command")


def test_every_section_is_one_module_and_one_partial():
  modules = {m.name for m in pkgutil.iter_modules(sections.__path__)} - {"inputs"}
  names = [_name(s) for s in sections.SECTIONS]
  assert sorted(names) == sorted(modules) and len(set(names)) == len(names)
  partials = {p.name for p in (TEMPLATES / "sections").iterdir()}
  assert partials == {f"{n}.md.j2" for n in names}
  assert [sections.partial(s) for s in sections.SECTIONS][:2] == [
      "sections/intro.md.j2", "sections/contents.md.j2"]


def test_the_top_template_holds_no_section_body():
  assert _reads(card.TEMPLATE.name) == {"card_data", "sections"}
  top = ENV.get_template(card.TEMPLATE.name)
  assert top.render(card_data="meta", sections=[]) == "---\nmeta\n---\n"


def test_each_partial_reads_only_what_the_sections_give(inputs):
  given = set(card.stats(inputs)) | {"pretty_name"}  # the YAML metadata's, as the Hub's cards
  for section in sections.SECTIONS:
    assert _reads(sections.partial(section)) <= given, _name(section)


def test_the_card_is_its_partials_in_order(inputs):
  values = card.stats(inputs)
  text = card.render_card("PB (H200)", [], **values)
  body = "".join(ENV.get_template(sections.partial(s)).render(pretty_name="PB (H200)", **values)
                 + "\n" for s in sections.SECTIONS)
  assert text.startswith("---\n") and text.split("\n---\n", 1)[1] == body
  headings = [line for line in text.splitlines() if line.startswith("## ")]
  assert headings[0] == "## Contents" and headings[-1] == "## License"


def test_two_sections_giving_one_name_fail(inputs, monkeypatch):
  monkeypatch.setattr(card, "SECTIONS", (*card.SECTIONS, sections.contact))
  with pytest.raises(ValueError, match=r"card section builder.sections.contact gives \['contact'\]"):
    card.stats(inputs)


def test_a_new_section_is_one_module_and_one_partial(inputs, tmp_path, monkeypatch):
  folder = tmp_path / "templates"
  shutil.copytree(TEMPLATES, folder)
  (folder / "sections" / "errata.md.j2").write_text("## Errata\n\n{{ errata }}\n\n")
  errata = types.ModuleType("builder.sections.errata")
  errata.context = lambda card_inputs: {"errata": f"none known for {card_inputs.repo_id}"}
  at = sections.SECTIONS.index(sections.contact)
  monkeypatch.setattr(card, "SECTIONS", (*sections.SECTIONS[:at], errata,
                                         *sections.SECTIONS[at:]))
  text = str(card.PallasBenchCard.from_template(
      card.card_data("PB", []), template_path=str(folder / card.TEMPLATE.name),
      **card.stats(inputs)))
  assert "\n## Errata\n\nnone known for org/pb\n\n## Contact\n" in text
