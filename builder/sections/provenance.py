"""Where the kernels come from and the licence each part is under."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder.sections.inputs import CardInputs


def context(card: CardInputs) -> Mapping[str, Any]:  # pylint: disable=unused-argument
  """Nothing: the text is the same for every build."""
  return {}
