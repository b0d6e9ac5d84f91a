"""The configs and files of the folder, and how their columns map to the public schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder.sections.inputs import CardInputs


def context(card: CardInputs) -> Mapping[str, Any]:
  """The published records' count, and whether any predate the eager baseline or the `run`
  field (their columns are null)."""
  published = card.published
  return {"n_published": len(published),
          "legacy": {"judge_1": any(r.judge_version == "1" for r in published),
                     "no_run": any(r.run is None for r in published)}}
