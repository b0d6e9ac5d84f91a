"""The BibTeX entry of the release."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pallasbench_dataset.schema import EvalRecord

from builder import release
from builder.sections.inputs import CardInputs


def _citation(repo_id: str, hardware: str, records: Sequence[EvalRecord]) -> dict[str, str]:
  """BibTeX fields; the year is the last measurement's (no build timestamps)."""
  year = max((r.measured_at[:4] for r in records), default="")
  slugs = sorted({r.environment.hardware for r in records if r.variant == "gpu"})
  key = "_".join(["pallasbench_robust", *slugs, year]).strip("_")
  return {"key": key, "year": year, "hardware": hardware,
          "url": f"https://huggingface.co/datasets/{repo_id}", "release": release.NAME}


def context(card: CardInputs) -> Mapping[str, Any]:
  """The entry's fields, from every record."""
  return {"citation": _citation(card.repo_id, card.hardware, card.merged.records)}
