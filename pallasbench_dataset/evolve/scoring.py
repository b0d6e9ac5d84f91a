"""The sealed judge's record as a search score and as feedback for the LLM, for either framework.

The score (`combined_score` in both frameworks, higher is better) is the judge's speedup over
the jitted JAX baseline when the kernel passes (correct, a real Pallas kernel, robust) with a
comparable timing, UNTIMED_PASS for a pass without one (a CPU judge's interpret mode: a speed
it did not measure is never credited, or a search on a CPU would climb towards whatever runs
fastest in interpret mode, the one cheat a CPU judge cannot see among it), and 0.0 for every
other verdict, so a search can never climb by failing faster. The size and the
device of the evaluation are settings: the framework's config first (OpenEvolve
`evaluator.evaluator_args`, Shinka `job.extra_cmd_args`), then the environment
(PALLASBENCH_SIZE, PALLASBENCH_DEVICE), then the defaults: device `auto` (a GPU when one is
usable) and size `medium` on a GPU, `small` on a CPU.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping
from typing import Final

from pallasbench_dataset.evaluate import (
    DEFAULT_SIZE, DEFAULT_TIMEOUT_S, evaluate, measurable, resolve_device, summary_text)
from pallasbench_dataset.schema import EvalRecord, Status
from pallasbench_dataset.tasks import Size

ENV_SIZE: Final = "PALLASBENCH_SIZE"
ENV_DEVICE: Final = "PALLASBENCH_DEVICE"
# The exporter and the judge each have the judge's time limit (900 s on a CPU). A framework's
# own limit is longer, so a slow kernel comes back as the judge's `timeout` record, with why.
FRAMEWORK_TIMEOUT_S: Final = int(2 * max(DEFAULT_TIMEOUT_S.values()) + 60)
# A pass whose timing is not comparable: parity, whatever interpret mode measured.
UNTIMED_PASS: Final = 1.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
  """Where and at which size the judge evaluates: device `gpu` or `cpu`, a registered size."""
  size: str
  device: str


def settings(size: str | None = None, device: str | None = None,
             environ: Mapping[str, str] = os.environ) -> Settings:
  """Explicit values, then PALLASBENCH_SIZE / PALLASBENCH_DEVICE, then the defaults."""
  device = resolve_device(device or environ.get(ENV_DEVICE) or "auto")
  size = size or environ.get(ENV_SIZE) or DEFAULT_SIZE[device]
  if size not in {s.value for s in Size}:
    raise ValueError(f"size must be one of {[s.value for s in Size]}, not {size!r} "
                     f"(from the config or {ENV_SIZE})")
  return Settings(size=size, device=device)


def judge(task: str, program_path: str | os.PathLike, chosen: Settings) -> EvalRecord:
  """One sealed evaluation of the program file; kernel failures come back in the record."""
  return evaluate(task, pathlib.Path(program_path), size=chosen.size, device=chosen.device)


def passed(record: EvalRecord) -> bool:
  return record.status is Status.PASS


def combined_score(record: EvalRecord) -> float:
  if not passed(record):
    return 0.0
  if not record.timing_comparable or record.speedup is None or not measurable(record.speedup):
    return UNTIMED_PASS
  return float(record.speedup)


def metrics(record: EvalRecord) -> dict[str, float | str]:
  """Score, verdict and timings; a measurement the judge did not make is left out, not zeroed."""
  values = {"combined_score": combined_score(record), "passed": float(passed(record)),
            "correct": float(record.correct), "status": record.status.value,
            "speedup": record.speedup, "runtime_ms": record.runtime_ms,
            "baseline_ms": record.baseline_ms, "max_abs_error": record.max_abs_error}
  return {key: value for key, value in values.items() if value is not None}


def feedback(record: EvalRecord) -> dict[str, str]:
  """Text for the LLM, by heading: the verdict with the judge's reasons, then the full error,
  the edge-shape error and what the kernel printed, each only when there is one."""
  sections = {"verdict": summary_text(record), "error": record.error,
              "edge_error": record.edge_error, "kernel_output": record.exporter_output}
  return {key: text for key, text in sections.items() if text}
