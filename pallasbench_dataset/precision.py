"""The precisions a task is posed at, each described once: float32 (the seed's, the headline)
and bfloat16.

A task at a precision takes its floating inputs in that dtype, drawn from the same
distributions as at float32 and then rounded, and returns what its reference returns on
them; integer inputs (ids, labels, codes) stay integers (`TaskSpec.at_precision`). The
tolerance follows the output's dtype (`tolerance_for`). Everything that differs between
precisions (the dtype, the tolerance limits, the matmul ceiling a task is held against,
whether stored keys name it, the dataset config that publishes it) is a field of its
`Precision`; code reads the descriptor (`get_precision`) and loops over `PRECISIONS`, whose
order (float32 first) orders keys, records and tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from pallasbench_dataset.tolerance import BF16_TOLERANCES, TOLERANCES, Tolerance, ToleranceClass


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Precision:
  """One precision: what records and command lines call it and what follows from it."""
  name: str          # as records store it and command lines take it: "bfloat16"
  dtype: str         # the jnp dtype name of a task's floating inputs there
  itemsize: int      # bytes per element of that dtype
  tolerances: Mapping[ToleranceClass, Tolerance]  # the limits for outputs of that dtype
  ceiling: str       # the measured matmul rate it is held against: a field of judge's Ceilings
  seed: bool         # the seed's precision: the headline, which stored keys leave unnamed
  config: str        # the dataset config publishing its headline table ("default", "bf16")

  @property
  def suffix(self) -> str:
    """What its plots' file names end in: nothing for the seed's (the default config's),
    "_" and its config's name for another (`speedup_bf16.png`)."""
    return "" if self.seed else f"_{self.config}"


FLOAT32: Final = "float32"
BFLOAT16: Final = "bfloat16"
# The registry, in order; a precision is known exactly when it is here.
PRECISIONS: Final[dict[str, Precision]] = {
    FLOAT32: Precision(name=FLOAT32, dtype="float32", itemsize=4, tolerances=TOLERANCES,
                       ceiling="matmul_tflops", seed=True, config="default"),
    BFLOAT16: Precision(name=BFLOAT16, dtype="bfloat16", itemsize=2, tolerances=BF16_TOLERANCES,
                        ceiling="matmul_bf16_tflops", seed=False, config="bf16"),
}
DEFAULT_PRECISION: Final = FLOAT32


def get_precision(name: str) -> Precision:
  """The descriptor of precision `name`, or a ValueError that lists the valid ones."""
  try:
    return PRECISIONS[name]
  except (KeyError, TypeError):
    raise ValueError(f"unknown precision {name!r}; valid precisions: "
                     f"{', '.join(PRECISIONS)}") from None


def check_precision(precision: str) -> str:
  """`precision` itself, or a ValueError that lists the valid ones."""
  return get_precision(precision).name


def precision_order(precision: str) -> int:
  """Where `precision` sorts among the precisions (float32 first); a ValueError for an
  unknown one."""
  return list(PRECISIONS).index(check_precision(precision))


def tolerance_for(kind: ToleranceClass, dtype: str) -> Tolerance:
  """The class `kind`'s tolerance for an output of `dtype`: the limits of the precision of
  that dtype; a clear error for a dtype without."""
  for precision in PRECISIONS.values():
    if precision.dtype == str(dtype):
      return precision.tolerances[kind]
  raise ValueError(f"no tolerances for {dtype!r} outputs; outputs are "
                   f"{' or '.join(p.dtype for p in PRECISIONS.values())}")
