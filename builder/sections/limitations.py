"""What the release does not measure or claim: dtypes, GPU kinds, the CPU judge, timing
noise, one shared GPU, and timeouts under load."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pallasbench_dataset.evaluation.judge.budgets import ran_out
from pallasbench_dataset.schema import EvalRecord, Status
from pallasbench_dataset.tasks import TASKS

from builder.records import Merged, Run
from builder.repeats import gpu_of
from builder.sections.inputs import CardInputs

def limits(records: Sequence[EvalRecord]) -> Mapping[str, Any]:
  """Facts the card's Limitations section states: the GPU kinds measured, and the dtypes of
  the tasks' floating-point inputs and outputs (from the registry)."""
  kinds = sorted({r.environment.device_kind for r in records if r.variant == "gpu"})
  floats = sorted({str(np.dtype(d)) for spec in TASKS.values()
                   for d in (spec.output_dtype, *(i.dtype for i in spec.inputs))
                   if np.issubdtype(np.dtype(d), np.floating)})
  return {"gpu_kinds": ", ".join(kinds) or "none", "n_gpu_kinds": len(kinds),
          "float_dtypes": ", ".join(floats)}


def _load_bound(status: str, reasons: Sequence[str]) -> str | None:
  """What a loaded host can have made of a verdict: "timeout", "overrun" (rejected because a
  stage ran past its budget: judge 3, `budgets.ran_out`), or None."""
  if status == Status.TIMEOUT:
    return "timeout"
  return "overrun" if status == Status.REJECTED and ran_out(reasons) else None


def load_facts(runs: Sequence[Run], merged: Merged,
               *changes: pd.DataFrame | None) -> dict[str, Any]:
  """What the Limitations section says of load: the compile budget and the compile stage's
  workers (the manifests'), the published records that timed out, those rejected because a
  stage ran past its budget (None where there are none), and, among the changed verdicts of
  each precision (`changes`), the repeated evaluations that timed out or ran past a stage's
  budget in one run and not in the other (`flipped`; `flipped_overruns`: whether a budget
  overrun is among them)."""
  budgets = sorted({r.manifest.compile_budget_s for r in runs if r.manifest.compile_budget_s})
  workers = sorted({r.manifest.cpu_workers for r in runs if r.manifest.cpu_workers})
  timeouts = collections.Counter(name for name, r in merged.published
                                 if r.status is Status.TIMEOUT)
  overruns = collections.Counter(name for name, r in merged.published
                                 if _load_bound(r.status, r.reasons) == "overrun")
  flips = [(a, b) for table in changes if table is not None
           for a, b in zip(map(_load_bound, table["status_a"], table["reasons_a"]),
                           map(_load_bound, table["status_b"], table["reasons_b"]))
           if (a is None) != (b is None)]
  return {"budget": " or ".join(f"{b:g} s" for b in budgets) or None,
          "workers": " or ".join(map(str, workers)) or None,
          "timeouts": ", ".join(f"{n} in `{name}`" for name, n in timeouts.items()) or "none",
          "overruns": ", ".join(f"{n} in `{name}`" for name, n in overruns.items()) or None,
          "flipped": len(flips), "flipped_overruns": any("overrun" in flip for flip in flips)}


def gpu_sharing(runs: Sequence[Run]) -> dict[str, Any] | None:
  """Whether several runs measured on one GPU, one after the other (their GPUs by UUID, else
  CUDA index; their times from the manifests): None for a single run or runs on several GPUs."""
  gpus = {gpu_of(r) for run in runs for r in run.records}
  if len(runs) < 2 or len(gpus) != 1 or None in gpus:
    return None
  spans = sorted((run.manifest.started_at, run.manifest.finished_at or "", run.name)
                 for run in runs)
  consecutive = all(a[1] and a[1] <= b[0] for a, b in zip(spans, spans[1:]))
  return {"gpu": next(iter(gpus)), "consecutive": consecutive,
          "spans": ", ".join(f"`{name}` {start} to {end or 'unfinished'}"
                             for start, end, name in spans)}


def context(card: CardInputs) -> Mapping[str, Any]:
  """The GPU kinds and dtypes, one shared GPU (None unless so), and the load's facts."""
  return {"limits": limits(card.merged.records), "gpu_sharing": gpu_sharing(card.runs),
          "load": load_facts(card.runs, card.merged, card.verdict_changes,
                             *(changes for _, changes in card.other_repeats.values()))}
