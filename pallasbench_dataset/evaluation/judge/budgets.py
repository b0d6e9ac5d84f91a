"""The time budget of each stage of an evaluation that works on the candidate's artifact.

Every stage the judge announces (`Context.stage`), the export before it and the compile
stage have a budget of their own here. A stage that runs past its budget ends the
evaluation: the process doing the work is killed, and the record is `rejected` with a reason
naming the stage and its budget. That is a verdict on the candidate (its code or artifact
made the work that long; the judge's own part of each stage is bounded far below it), so the
verdict cache keeps it and a resubmitted candidate costs nothing. A stage that runs only the
judge's own code (the copy check, the shipped baseline's compile, the eager baseline) has no budget: the evaluation's limit
(`Limits.timeout_s`) bounds it, and running out of that there is the judge's failure, a
harness error that is no verdict and never cached. In a stage of the candidate's, running out
of the limit (a caller's limit below the stage's budget) is a `timeout`.

Each budget is sized well above what an honest kernel's stage takes, with room for a loaded
host; the helpers that bound their own work (the module analysis, memcheck) get their budget
from here too, and the stage around them some more for starting the helper.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping
from typing import Final

EXPORT: Final = "export"            # the sandboxed exporter: import, trace, lower
ARTIFACT_CHECKS: Final = "checks of the artifact"  # header, deserialization, interface
MODULE_ANALYSIS: Final = "module analysis"
COMPILE: Final = "compile"          # the compile stage's process, and the judge's own compile
CORRECTNESS: Final = "correctness runs"
MEMCHECK: Final = "memcheck"
TIMING: Final = "timing"
# Stages of the judge's own work, with no budget of their own (the evaluation's limit bounds
# them): exporting and analysing the shipped kernels a candidate's are compared with,
# compiling the shipped kernel a candidate is timed beside, and timing the reference op by op.
COPY_CHECK: Final = "copy check"
SHIPPED_BASELINE: Final = "shipped baseline"
EAGER_BASELINE: Final = "eager baseline"
JUDGES_OWN: Final = frozenset({COPY_CHECK, SHIPPED_BASELINE, EAGER_BASELINE})

# What the analysis helper and memcheck allow one run of theirs (they end it themselves and
# report it as the candidate's: an unanalysable module, a memcheck that did not finish). The
# memcheck stage may run two (the kernel's call, then the task's reference where that one did
# not end cleanly), each given half of MEMCHECK_RUN_S.
ANALYSIS_RUN_S: Final = 60.0
ANALYSIS_STARTUP_S: Final = 120.0
MEMCHECK_RUN_S: Final = 120.0

STAGE_BUDGETS_S: Final[Mapping[str, Mapping[str, float]]] = types.MappingProxyType({
    "gpu": types.MappingProxyType({
        EXPORT: 240.0, ARTIFACT_CHECKS: 60.0,
        MODULE_ANALYSIS: ANALYSIS_STARTUP_S + ANALYSIS_RUN_S + 30.0, COMPILE: 60.0,
        CORRECTNESS: 120.0, MEMCHECK: MEMCHECK_RUN_S + 30.0, TIMING: 200.0}),
    # Interpret mode: the kernel runs as XLA:CPU ops, one grid step after another.
    "cpu": types.MappingProxyType({
        EXPORT: 600.0, ARTIFACT_CHECKS: 120.0,
        MODULE_ANALYSIS: ANALYSIS_STARTUP_S + ANALYSIS_RUN_S + 30.0, COMPILE: 300.0,
        CORRECTNESS: 600.0, MEMCHECK: MEMCHECK_RUN_S + 30.0, TIMING: 600.0}),
})


def budget_s(device: str, stage: str) -> float | None:
  """The budget of `stage` on a `device` ("gpu" or "cpu") judge; None: the stage has none."""
  return STAGE_BUDGETS_S[device].get(stage)


def overrun(stage: str, budget: float, detail: str = "") -> str:
  """The reason of a record whose `stage` ran past its budget."""
  return (f"the {stage} stage ran past its {budget:.0f} s budget{f' ({detail})' if detail else ''}; "
          "its process was killed")


def compile_overrun(budget: float, where: str | None = None) -> str:
  """The compile stage's note when a compile ran past the run's compile budget; `where`: the
  step it had reached."""
  return (f"the compile did not finish within the {budget:.0f} s compile budget"
          f"{f' ({where})' if where else ''}; it was killed")


# What the reasons of a stage that ran out say: `overrun`'s and `compile_overrun`'s texts.
_RAN_OUT: Final = re.compile(r"ran past its \d+ s budget|within the \d+ s compile budget")


def ran_out(reasons: Iterable[str]) -> bool:
  """Whether a record's reasons say one of its stages ran past its budget (a `rejected` that,
  like a `timeout`, can depend on the host's load): the card's reading of released records,
  which carry no error type for it (judge 3). The verdict cache reads the error type the judge
  sets (`timeout`), never these words, which a reason may quote from the candidate's names."""
  return any(_RAN_OUT.search(reason) for reason in reasons)
