"""Evaluating a population into a run folder, and what the run found.

A population run is a suite run (`evaluation.suite`) whose items are candidates: variant
`candidate`, one size, each keyed by its candidate id, with the verdict cache. Its folder
holds the suite's manifest.json, records.jsonl and artifacts.jsonl, and candidates.jsonl:
the population as submitted (sources, parents, kinds), which the builder joins with the
records by id. Candidates that fail (a broken kernel, a timeout, a crash) are records like
any other; the run goes on.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Final, TextIO

from pallasbench_dataset.evaluate import DEFAULT_SIZE, default_options
from pallasbench_dataset.evaluation.judge import environment
from pallasbench_dataset.evaluation.pipeline import run_options
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.evaluation.pipeline.suite import MANIFEST, ClusterOptions, read_records, run_suite
from pallasbench_dataset.evaluation.pipeline.verdicts import VerdictCache
from pallasbench_dataset.kernels import Variant
from pallasbench_dataset.population.candidates import (
    CANDIDATES, MUST_FAIL, Candidate, PopulationError, read_candidates, to_jsonl)
from pallasbench_dataset.schema import EvalRecord, Status


def work_items(candidates: Sequence[Candidate], size: str, options: EvalOptions) -> list[WorkItem]:
  return [WorkItem(task=c.task, variant=Variant.CANDIDATE.value, size=size, source=c.source,
                   filename=c.filename, options=options, candidate=c.id) for c in candidates]


def _resumed_population(run_dir: pathlib.Path, candidates: Sequence[Candidate] | None,
                        size: str) -> list[Candidate]:
  """The population a resumed run continues: its own, which `candidates` (if given) must be."""
  stored = run_dir / CANDIDATES
  if not run_dir.is_dir():
    raise PopulationError(f"--resume: {run_dir} does not exist; leave out --resume to start a "
                          "new run there")
  if not stored.is_file():
    raise PopulationError(f"--resume: {run_dir} has no {CANDIDATES}; it is not a population run")
  kept = read_candidates(stored)
  if candidates is not None and list(candidates) != kept:
    raise PopulationError(f"--resume: {run_dir} holds another population ({len(kept)} "
                          f"candidates in its {CANDIDATES}); resume without --candidates, or "
                          "start a new run folder for this one")
  manifest = run_dir / MANIFEST
  sizes = json.loads(manifest.read_text()).get("sizes") if manifest.is_file() else None
  if sizes and sizes != [size]:
    raise PopulationError(f"--resume: {run_dir} was measured at {', '.join(sizes)}, not {size}; "
                          f"pass --size {sizes[0]}")
  return kept


def evaluate_population(candidates: Sequence[Candidate] | None, run_dir: pathlib.Path, *,
                        size: str, device: str, options: EvalOptions, limits: Limits,
                        cluster_options: ClusterOptions, git_commit: str | None, command: str,
                        cache: VerdictCache | None, resume: bool = False,
                        stream: TextIO = sys.stderr) -> pathlib.Path:
  """Evaluates the candidates at `size` into `run_dir` (a new folder, or with `resume` the
  run to continue: `candidates` None means its own). Raises PopulationError for a population
  or folder that does not fit, suite.Interrupted on SIGTERM/SIGINT."""
  if resume:
    candidates = _resumed_population(run_dir, candidates, size)
  elif not candidates:
    raise PopulationError("no candidates: pass --candidates FILE_OR_FOLDER")
  return run_suite(work_items(candidates, size, options), run_dir, device=device, limits=limits,
                   git_commit=git_commit, command=command, cluster_options=cluster_options,
                   resume=resume, stream=stream, cache=cache,
                   inputs={CANDIDATES: to_jsonl(candidates)})


def evaluate_as_asked(args: argparse.Namespace, device: str,
                      candidates: Sequence[Candidate] | None, run_dir: pathlib.Path, *,
                      command: str, cache: VerdictCache | None, resume: bool) -> Summary:
  """`evaluate_population` with a command line's options (`--size`, `--git-commit` and those of
  `run_options`) and the device's default evaluation options; the run's summary."""
  evaluate_population(
      candidates, run_dir, size=args.size or DEFAULT_SIZE[device], device=device,
      options=default_options(device), limits=run_options.limits(args, device),
      cluster_options=run_options.cluster_options(args, device),
      git_commit=args.git_commit or environment.git_commit(), command=command, cache=cache,
      resume=resume)
  return summarize(run_dir)


# ---------------------------------------------------------------------------------------------
# What a run found.

@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
  """A population run's verdicts, by status and by the candidates' kind, and its cost."""
  candidates: int
  records: int
  cached: int
  by_status: Mapping[str, int]
  by_kind: Mapping[str, Mapping[str, int]]     # kind ("unknown" if none) -> status -> count
  holes: Mapping[str, tuple[str, ...]]         # kind in MUST_FAIL -> ids that passed anyway
  measured: int                                # evaluations the judges ran, over all segments
  judge_minutes: float                         # wall minutes x judges, over all segments
  wall_s: float                                # over all segments
  hardware: str

  @property
  def per_judge_minute(self) -> float | None:
    return self.measured / self.judge_minutes if self.judge_minutes > 0 else None

  def describe(self) -> str:
    rate = self.per_judge_minute
    lines = [f"{self.records} of {self.candidates} candidates judged on {self.hardware}: "
             f"{self.records - self.cached} measured, {self.cached} from the verdict cache",
             f"  throughput: {self.measured} evaluations in {self.wall_s:.0f} s, "
             f"{self.judge_minutes:.1f} judge-minutes = "
             f"{'-' if rate is None else f'{rate:.2f}'} per judge-minute",
             "  status: " + _counts(self.by_status)]
    lines += [f"  {kind}: " + _counts(statuses) for kind, statuses in self.by_kind.items()]
    lines += [f"  {kind} that passed: " + (", ".join(ids) or "none")
              for kind, ids in self.holes.items() if kind in self.by_kind]
    return "\n".join(lines)


def _counts(counts: Mapping[str, int]) -> str:
  return ", ".join(f"{k} {n}" for k, n in counts.items()) or "none"


def _cost(manifest: dict) -> tuple[int, float, float]:
  """(evaluations measured, judge-minutes, wall seconds) over the run and its resumes."""
  measured, minutes, wall_s = 0, 0.0, 0.0
  for segment in (manifest, *manifest.get("resumes", ())):
    pipeline = segment.get("pipeline") or {}
    measured += pipeline.get("evaluations", 0)
    wall_s += pipeline.get("wall_s", 0.0)
    minutes += pipeline.get("wall_s", 0.0) * pipeline.get("judges", 1) / 60
  return measured, minutes, wall_s


def summarize(run_dir: pathlib.Path) -> Summary:
  candidates = read_candidates(run_dir / CANDIDATES)
  kinds = {c.id: c.kind or "unknown" for c in candidates}
  records: list[EvalRecord] = read_records(run_dir)
  manifest = json.loads((run_dir / MANIFEST).read_text())
  by_kind: dict[str, collections.Counter] = {}
  for r in records:
    by_kind.setdefault(kinds.get(r.candidate, "unknown"), collections.Counter())[r.status.value] += 1
  measured, minutes, wall_s = _cost(manifest)
  hardware = ", ".join(sorted({r.environment.device_kind for r in records})) or "nothing"
  return Summary(
      candidates=len(candidates), records=len(records), cached=sum(r.cached for r in records),
      by_status=_ordered(collections.Counter(r.status.value for r in records)),
      by_kind={k: _ordered(by_kind[k]) for k in sorted(by_kind)},
      holes={kind: tuple(sorted(r.candidate for r in records if kinds.get(r.candidate) == kind
                                and r.status is Status.PASS)) for kind in MUST_FAIL},
      measured=measured, judge_minutes=minutes, wall_s=wall_s, hardware=hardware)


def _ordered(counts: Mapping[str, int]) -> dict[str, int]:
  """Counts in the order of Status (pass first)."""
  return {s.value: counts[s.value] for s in Status if counts.get(s.value)}
