"""Where to send questions and corrections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder.sections.inputs import CardInputs


def context(card: CardInputs) -> Mapping[str, Any]:
  """The dataset repository's discussions page."""
  return {"contact": f"https://huggingface.co/datasets/{card.repo_id}/discussions"}
