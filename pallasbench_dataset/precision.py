"""The precisions a task is posed at, named once: float32 (the seed's, the headline) and bfloat16.

A task at a precision takes its floating inputs in that dtype, drawn from the same
distributions as at float32 and then rounded, and returns what its reference returns on
them; integer inputs (ids, labels, codes) stay integers (`TaskSpec.at_precision`). The
tolerance follows the output's dtype (`tolerance.tolerance_for`).
"""

from __future__ import annotations

from typing import Final

FLOAT32: Final = "float32"
BFLOAT16: Final = "bfloat16"
PRECISIONS: Final = (FLOAT32, BFLOAT16)
DEFAULT_PRECISION: Final = FLOAT32


def check_precision(precision: str) -> str:
  """`precision` itself, or a ValueError that lists the valid ones."""
  if precision not in PRECISIONS:
    raise ValueError(f"unknown precision {precision!r}; valid precisions: {', '.join(PRECISIONS)}")
  return precision

