"""How to measure and publish a new release on a GPU machine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder.sections.inputs import CardInputs


def context(card: CardInputs) -> Mapping[str, Any]:  # pylint: disable=unused-argument
  """Nothing of its own: the partial names the opening's repo id, tag and GPU extra, and the
  shipped source."""
  return {}
