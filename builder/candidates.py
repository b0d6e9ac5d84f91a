"""Population runs -> the rows of the `candidates` config: each candidate, its source and verdict.

A population run (`python -m pallasbench_dataset.population evaluate`) is not a suite run:
its records are candidates (variant `candidate`), many per task, which belong in neither the
default config nor `runs`. The build takes them separately (`regenerate --candidates RUN`)
and joins each run's candidates.jsonl (id, task, source, parent, kind) with the record of
each id, checked as strictly as the suite's records: the registry, the speedups, the source's
sha256, one record per candidate.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Mapping, Sequence

from pallasbench_dataset.kernels import Variant
from pallasbench_dataset.population.candidates import (
    CANDIDATES, Candidate, PopulationError, read_candidates)
from pallasbench_dataset.schema import MANIFEST_FILE, RECORDS_FILE, CandidateRow, EvalRecord
from pallasbench_dataset.tasks import TASKS

from builder.records import BuildError, check_record, read_jsonl, some


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PopulationRun:
  """One population run folder, read and validated."""
  name: str
  path: pathlib.Path
  command: str
  candidates: tuple[Candidate, ...]
  records: Mapping[str, EvalRecord]  # by candidate id; candidates without one were not judged

  @property
  def missing(self) -> list[str]:
    return [c.id for c in self.candidates if c.id not in self.records]


def read_population(path: pathlib.Path) -> PopulationRun:
  """Reads one population run folder; BuildError names the file and line at fault."""
  path = pathlib.Path(path)
  for name in (MANIFEST_FILE, RECORDS_FILE, CANDIDATES):
    if not (path / name).is_file():
      raise BuildError(f"{path / name} is missing: a population run folder (written by python -m "
                       "pallasbench_dataset.population evaluate) holds manifest.json, "
                       f"records.jsonl and {CANDIDATES}")
  try:
    candidates = {c.id: c for c in read_candidates(path / CANDIDATES)}
    command = json.loads((path / MANIFEST_FILE).read_text())["command"]
  except (PopulationError, json.JSONDecodeError, KeyError, TypeError) as e:
    raise BuildError(f"{path} is not a readable population run: {e}") from None
  where = path / RECORDS_FILE
  records: dict[str, EvalRecord] = {}
  for record in read_jsonl(where, EvalRecord):
    _check(record, candidates, where)
    if record.candidate in records:
      raise BuildError(f"{where}: candidate {record.candidate!r} has two records; remove the "
                       "stale line")
    records[record.candidate] = record
  return PopulationRun(name=path.resolve().name, path=path, command=command,
                       candidates=tuple(candidates.values()), records=records)


def _check(record: EvalRecord, candidates: Mapping[str, Candidate], where: pathlib.Path) -> None:
  name = f"{where}: candidate {record.candidate!r}"
  if record.variant != Variant.CANDIDATE.value or record.candidate not in candidates:
    raise BuildError(f"{name} (variant {record.variant!r}) is not one of the run's "
                     f"{CANDIDATES}; suite runs go to --from-results")
  candidate = candidates[record.candidate]
  if record.task != candidate.task or record.task not in TASKS:
    raise BuildError(f"{name} is a record of task {record.task!r}, the candidate is for "
                     f"{candidate.task!r}")
  if record.kernel_sha256 != candidate.sha256:
    raise BuildError(f"{name}: the record's kernel_sha256 is not the sha256 of the candidate's "
                     f"source in {CANDIDATES}; the files do not belong together")
  check_record(record, where)


def check_complete(runs: Sequence[PopulationRun], *, allow_partial: bool) -> None:
  """Refuses candidates without a record (a run that did not finish), unless allowed."""
  missing = [(run.name, c) for run in runs for c in run.missing]
  if missing and not allow_partial:
    listed = some([f"{run}: {c}" for run, c in missing])
    raise BuildError(f"{len(missing)} candidate(s) have no record ({listed}). Finish the run (population "
                     "evaluate --resume --out RUN) or build with --allow-partial (their rows are "
                     "left out and the card counts them)")


def candidate_row(run: PopulationRun, candidate: Candidate, record: EvalRecord) -> CandidateRow:
  spec = TASKS[record.task]
  return CandidateRow(
      candidate=candidate.id, run=run.name, task=record.task, task_id=spec.task_id,
      level=spec.level, size=record.size, parent=candidate.parent, kind=candidate.kind,
      source=candidate.source, kernel_sha256=record.kernel_sha256, status=record.status.value,
      correct=record.correct, speedup=record.speedup, speedup_eager=record.speedup_eager,
      speedup_shipped=record.speedup_shipped, runtime_ms=record.runtime_ms,
      baseline_ms=record.baseline_ms, shipped_ms=record.shipped_ms, reasons=record.reasons,
      error_type=record.error_type.value if record.error_type else None, error=record.error,
      cached=record.cached, device=record.device, hardware=record.environment.device_kind,
      timing_comparable=record.timing_comparable, judge_version=record.judge_version,
      measured_at=record.measured_at)


def candidate_rows(runs: Sequence[PopulationRun]) -> tuple[CandidateRow, ...]:
  """One row per judged candidate, sorted by task id, run and candidate id."""
  rows = [candidate_row(run, c, run.records[c.id])
          for run in runs for c in run.candidates if c.id in run.records]
  return tuple(sorted(rows, key=lambda r: (r.task_id, r.run, r.candidate)))
