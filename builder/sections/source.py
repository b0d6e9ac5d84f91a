"""The project's source shipped in the folder, or a note that it is not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder.sections.inputs import CardInputs


def context(card: CardInputs) -> Mapping[str, Any]:
  """The shipped archive's path and commit; None when the build shipped none."""
  return {"source": card.source}
