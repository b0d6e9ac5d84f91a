"""The `sft` and `preference` configs: their formats, rows and held-out tasks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder import training
from builder.sections.inputs import CardInputs


def context(card: CardInputs) -> Mapping[str, Any]:
  """The configs' counts; None when the build made no fine-tuning config."""
  return {"training": training.card_stats(card.fine_tuning) if card.fine_tuning else None}
