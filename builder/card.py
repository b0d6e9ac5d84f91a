"""The dataset card: YAML metadata from `datasets`' own helpers, a Jinja body, every number
computed from the records by `pallasbench_dataset.analysis`.

The body is the sections of `builder.sections`, in their order: `stats` gathers each one's
context from the build, and `templates/README.md.j2` includes each one's partial.
`PallasBenchCard.from_template(card_data=DatasetCardData(...), **stats)` renders it
(distilabel's pattern); `render_card` builds both from a build.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any, Final

import jinja2
from huggingface_hub import DatasetCard, DatasetCardData

from builder.sections import SECTIONS, partial
from builder.sections.inputs import CardInputs
from builder.sections.intro import MARKER

TEMPLATE: Final = pathlib.Path(__file__).parent / "templates" / "README.md.j2"
TAGS: Final = ("jax", "pallas", "gpu-kernels", "triton", "benchmark", "code", "kernels",
               "performance")
__all__ = ("MARKER", "TEMPLATE", "PallasBenchCard", "card_data", "render_card", "stats")


class PallasBenchCard(DatasetCard):
  """The PallasBench-Robust card: `DatasetCard` with this project's template as default, whose
  `{% include %}`s load from the template's folder."""
  default_template_path = str(TEMPLATE)

  @classmethod
  def from_template(cls, card_data: DatasetCardData, template_path: str | None = None,
                    template_str: str | None = None, **template_kwargs: Any) -> PallasBenchCard:
    """`DatasetCard.from_template`, rendered by an environment that loads the partials, and
    given the ordered partials of SECTIONS as `sections`."""
    path = pathlib.Path(template_path or cls.default_template_path)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(path.parent))
    template = (env.from_string(template_str) if template_str is not None and not template_path
                else env.get_template(path.name))
    values = {**card_data.to_dict(), "sections": [partial(s) for s in SECTIONS],
              **template_kwargs}
    return cls(template.render(card_data=card_data.to_yaml(), **values))


def card_data(pretty_name: str, yaml_blocks: Sequence[Any]) -> DatasetCardData:
  """Fixed metadata plus `configs:` / `dataset_info:` written by `datasets`' helpers."""
  data = DatasetCardData(license="apache-2.0", pretty_name=pretty_name, language=["en"],
                         tags=list(TAGS), task_categories=["text-generation"],
                         size_categories=["n<1K"])
  for block in yaml_blocks:  # MetadataConfigs, DatasetInfosDict
    block.to_dataset_card_data(data)
  return data


def stats(card: CardInputs) -> dict[str, Any]:
  """Everything the template shows, as strings and small lists: the contexts of every section
  of SECTIONS, one namespace (a name given by two sections is an error in the sections)."""
  out: dict[str, Any] = {}
  for section in SECTIONS:
    values = section.context(card)
    if clash := out.keys() & values.keys():
      raise ValueError(f"card section {section.__name__} gives {sorted(clash)}, which an "
                       "earlier section gives too: rename one of them")
    out.update(values)
  return out


def render_card(pretty_name: str, yaml_blocks: Sequence[Any], **card_stats: Any) -> str:
  card = PallasBenchCard.from_template(card_data=card_data(pretty_name, yaml_blocks),
                                       **card_stats)
  text = str(card)
  return text if text.endswith("\n") else text + "\n"
