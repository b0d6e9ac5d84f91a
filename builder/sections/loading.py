"""How to load the configs with `datasets`, pandas and the project's loader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder.sections.inputs import CardInputs


def context(card: CardInputs) -> Mapping[str, Any]:  # pylint: disable=unused-argument
  """Nothing of its own: the partial names the repo id, tag and configs of the opening."""
  return {}
