"""An evaluation's identity: which kernel (task, variant, candidate) at which size and precision.

Run folders, the driver's resume, the builder's merge of runs and the run report all find an
evaluation by its `EvalKey`. Its one encoding, `parts()`, is what files and messages have
always shown: (task, variant, size), then the precision unless it is float32, then the
candidate's id in a population run. A float32 evaluation names no precision, so that records
written before precisions were noted (absent means float32) keep their keys and resume.
`precision_field` is the same rule for a stored key that is a JSON object (the verdict cache).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Protocol

from pallasbench_dataset.precision import DEFAULT_PRECISION, PRECISIONS, precision_order


class Evaluated(Protocol):
  """What names an evaluation: a work item, a record or an artifacts line."""
  task: str
  variant: str
  size: str
  precision: str
  candidate: str | None


def precision_field(precision: str) -> dict[str, str]:
  """The precision as a stored key names it: not at all at the seed's (float32),
  `{"precision": ...}` at any other, so that a float32 key finds what was stored before
  precisions were noted. An unknown precision is named as it is, so that the message that
  refuses it can name its evaluation."""
  described = PRECISIONS.get(precision)
  return {} if described is not None and described.seed else {"precision": precision}


@functools.total_ordering
@dataclasses.dataclass(frozen=True, slots=True)
class EvalKey:
  """One evaluation; ordered by task name, variant, size, precision (PRECISIONS order) and
  candidate."""
  task: str
  variant: str
  size: str
  precision: str = DEFAULT_PRECISION
  candidate: str | None = None  # a population run's candidate id; None for the shipped kernels

  @classmethod
  def of(cls, item: Evaluated) -> EvalKey:
    """The key of a work item, record or artifacts line."""
    return cls(item.task, item.variant, str(item.size), item.precision, item.candidate)

  def parts(self) -> tuple[str, ...]:
    """(task, variant, size), the precision unless float32, the candidate when there is one."""
    return (self.task, self.variant, self.size, *precision_field(self.precision).values(),
            *(() if self.candidate is None else (self.candidate,)))

  def label(self, sep: str = "/") -> str:
    """The key as messages and logs name it: `relu/gpu/medium`, `relu/gpu/medium/bfloat16`."""
    return sep.join(self.parts())

  def sized(self) -> str:
    """The size, and the precision unless float32: `medium`, `medium/bfloat16`."""
    return "/".join((self.size, *precision_field(self.precision).values()))

  def _order(self) -> tuple[str, str, str, int, str]:
    return (self.task, self.variant, self.size, precision_order(self.precision),
            self.candidate or "")

  def __lt__(self, other: EvalKey) -> bool:
    if not isinstance(other, EvalKey):
      return NotImplemented
    return self._order() < other._order()
