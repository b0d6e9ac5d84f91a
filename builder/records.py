"""Reading measuring runs: a run folder's manifest, records and artifacts, validated strictly.

A run folder holds `manifest.json`, `records.jsonl` (one `EvalRecord` a line) and optionally
`artifacts.jsonl` (one `Artifacts` a line; as `artifacts.jsonl.xz` in a release's `results/`,
which `pack_artifacts` writes). Several runs merge into one set of rows: the
FIRST run given that holds a (task, variant, size, precision) provides its row; the same key
in a later run is a repeat that only feeds the reproducibility table. A record or artifacts
line without a precision (runs before it was noted) is float32.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import lzma
import pathlib
import shutil
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from pallasbench_dataset import jsonlines, schema
from pallasbench_dataset.kernels import Variant
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.precision import DEFAULT_PRECISION, PRECISIONS, precision_order
from pallasbench_dataset.schema import Artifacts, Environment, ErrorType, EvalRecord, Status
from pallasbench_dataset.tasks import TASKS, Size

log = logging.getLogger(__name__)

PACKED_ARTIFACTS: Final = f"{schema.ARTIFACTS_FILE}.xz"  # as a release ships a run's artifacts

VARIANTS: Final = (Variant.TPU.value, Variant.GPU.value)  # the two shipped trees; no candidates
# Records written by the driver when the judge never reported back: they have no artifacts.
NO_ARTIFACTS: Final = frozenset({ErrorType.TIMEOUT, ErrorType.CRASH, ErrorType.OUT_OF_MEMORY,
                                 ErrorType.HARNESS})


class BuildError(ValueError):
  """The inputs cannot make an honest dataset; the message says what to fix."""


SHOWN: Final = 5  # items a refusal names before it counts the rest


def some(items: Sequence[str]) -> str:
  """A few of `items` for a message, the rest counted: "a, b, c, d, e and 83 more"."""
  head = ", ".join(items[:SHOWN])
  return head if len(items) <= SHOWN else f"{head} and {len(items) - SHOWN} more"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Ceilings:
  """Hardware ceilings measured in the run (a device copy and read, a large matmul in TF32
  and, from release 6 on, in bfloat16)."""
  copy_gbps: float | None
  read_gbps: float | None
  bandwidth_gbps: float | None  # the larger of copy and read
  matmul_tflops: float | None
  method: str | None
  matmul_bf16_tflops: float | None = None  # absent from manifests before bfloat16 was measured


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DeviceCeilings:
  """One GPU of a run (a manifest's `per_device` entry): its index and the ceilings measured."""
  device: str
  ceilings: Ceilings | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Resume:
  """A later command that continued the run (`regenerate --resume`) into the same folder."""
  command: str
  started_at: str
  finished_at: str | None
  git_commit: str | None
  sizes: tuple[str, ...]
  variants: tuple[str, ...]
  tasks: tuple[str, ...]
  per_device: tuple[DeviceCeilings, ...] = ()
  precisions: tuple[str, ...] = (DEFAULT_PRECISION,)  # float32 where the manifest names none


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
  """`<run>/manifest.json`: how and where a run was made."""
  command: str
  started_at: str
  finished_at: str | None
  git_commit: str | None
  device: str
  environment: Environment | None  # None when the run measured nothing
  ceilings: Ceilings | None
  sizes: tuple[str, ...]
  variants: tuple[str, ...]
  tasks: tuple[str, ...]
  resumes: tuple[Resume, ...] = ()
  per_device: tuple[DeviceCeilings, ...] = ()
  precisions: tuple[str, ...] = (DEFAULT_PRECISION,)  # float32 where the manifest names none
  # The compile stage's CPU workers and its budget per compile (None where not noted).
  cpu_workers: int | None = None
  compile_budget_s: float | None = None

  def planned(self) -> set[EvalKey]:
    """Every (task, variant, size, precision) the run's commands set out to measure."""
    return {EvalKey(t, v, s, p) for seg in (self, *self.resumes)
            for t in seg.tasks for v in seg.variants for s in seg.sizes for p in seg.precisions}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Run:
  """One run folder, read and validated."""
  name: str
  path: pathlib.Path
  manifest: Manifest
  records: tuple[EvalRecord, ...]
  artifacts: tuple[Artifacts, ...]
  records_artifacts: bool = False  # the run wrote artifacts.jsonl: its records expect a line


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Merged:
  """The rows of the dataset and the repeats, from several runs."""
  records: tuple[EvalRecord, ...]          # one per key, sorted by (task_id, variant, size)
  artifacts: tuple[Artifacts, ...]         # same order and precedence
  source_run: Mapping[EvalKey, str]        # which run each row comes from
  repeats: tuple[tuple[str, tuple[EvalRecord, ...]], ...]  # (run name, its repeated records)
  # Every record and artifacts line of every run as (run name, item), in key order and within a
  # key in the order the runs were given: what the `runs` and `artifacts` configs publish.
  published: tuple[tuple[str, EvalRecord], ...] = ()
  published_artifacts: tuple[tuple[str, Artifacts], ...] = ()

  def at_precision(self, precision: str) -> Merged:
    """The rows, repeats and published items of one precision (the default config and the
    card's sections read float32's, the `bf16` config bfloat16's)."""
    def keep(items):
      return tuple(item for item in items if item.precision == precision)

    def keep_tagged(tagged):
      return tuple((name, item) for name, item in tagged if item.precision == precision)
    repeats = tuple((name, keep(records)) for name, records in self.repeats)
    return Merged(records=keep(self.records), artifacts=keep(self.artifacts),
                  source_run={k: v for k, v in self.source_run.items()
                              if k.precision == precision},
                  repeats=tuple((name, records) for name, records in repeats if records),
                  published=keep_tagged(self.published),
                  published_artifacts=keep_tagged(self.published_artifacts))

  def precisions(self) -> tuple[str, ...]:
    """The precisions measured, in PRECISIONS order."""
    return tuple(p for p in PRECISIONS if any(r.precision == p for r in self.records))


def sort_key(item: EvalRecord | Artifacts) -> tuple[int, str, str, int]:
  return (TASKS[item.task].task_id, item.variant, item.size, precision_order(item.precision))


def read_run(path: pathlib.Path) -> Run:
  """Reads and validates one run folder; BuildError names the file and line at fault."""
  path = pathlib.Path(path)
  if not path.is_dir():
    raise BuildError(f"run folder {str(path)!r} does not exist")
  manifest = read_manifest(path / schema.MANIFEST_FILE)
  records_path = path / schema.RECORDS_FILE
  if not records_path.is_file():
    raise BuildError(f"{records_path} is missing: a run folder needs manifest.json and records.jsonl")
  records = tuple(read_jsonl(records_path, EvalRecord))
  artifacts_path = artifacts_file(path)
  artifacts = tuple(read_jsonl(artifacts_path, Artifacts)) if artifacts_path else ()
  for item, where in [(r, records_path) for r in records] + [(a, artifacts_path) for a in artifacts]:
    _check_known(item.task, item.variant, item.size, item.precision,
                 f"{where} ({EvalKey.of(item).label()})")
  for r in records:
    check_record(r, records_path)
  _check_unique(records, records_path)
  _check_unique(artifacts, artifacts_path)
  return Run(name=path.resolve().name, path=path, manifest=manifest, records=records,
             artifacts=artifacts, records_artifacts=artifacts_path is not None)


def artifacts_file(folder: pathlib.Path) -> pathlib.Path | None:
  """The run folder's artifacts: `artifacts.jsonl`, or `artifacts.jsonl.xz` as packed in a
  release; None when the run wrote none. Both at once is refused: which is the run's?"""
  found = [folder / name for name in (schema.ARTIFACTS_FILE, PACKED_ARTIFACTS)
           if (folder / name).is_file()]
  if len(found) > 1:
    raise BuildError(f"{folder} holds both {schema.ARTIFACTS_FILE} and {PACKED_ARTIFACTS}; "
                     "keep the one the run wrote")
  return found[0] if found else None


def pack_artifacts(source: pathlib.Path, folder: pathlib.Path) -> None:
  """`source` as `folder/artifacts.jsonl.xz`: compressed (xz's default preset; the IR text
  takes a tenth of its size) or, already packed, copied byte for byte, so that a folder built
  from a release's own `results/` holds the same bytes."""
  dest = folder / PACKED_ARTIFACTS
  if source.name == PACKED_ARTIFACTS:
    shutil.copyfile(source, dest)
  else:
    dest.write_bytes(lzma.compress(source.read_bytes()))


_OPTIONAL: Final = frozenset({"resumes", "precisions", "cpu_workers", "compile_budget_s"})


def read_manifest(path: pathlib.Path) -> Manifest:
  data = _load_json(path)
  names = [f.name for f in dataclasses.fields(Manifest)]
  missing = sorted(set(names) - set(data) - _OPTIONAL)
  if missing:
    raise BuildError(f"{path} lacks the keys {missing}; it must be written by the evaluator")
  picked = {k: data[k] for k in names if k in data}  # other keys (devices, ...) stay raw
  picked["resumes"] = [_pick_segment(r) for r in data.get("resumes", ())]
  picked["ceilings"] = _pick_ceilings(picked["ceilings"])
  picked["per_device"] = _pick_devices(data.get("per_device", ()))
  try:
    manifest = schema.from_json_dict(Manifest, picked)
  except (ValueError, TypeError) as e:
    raise BuildError(f"{path} is not a valid run manifest: {e}") from None
  for key in manifest.planned():
    _check_known(key.task, key.variant, key.size, key.precision, str(path))
  return manifest


def _pick_ceilings(value: Any) -> Any:
  """Only the ceilings the card shows (a manifest may hold more keys); one with a default (the
  bfloat16 matmul) only where the manifest has it, older ones lacking it."""
  if not isinstance(value, dict):
    return value
  return {f.name: value.get(f.name) for f in dataclasses.fields(Ceilings)
          if f.name in value or f.default is dataclasses.MISSING}


def _pick_devices(entries: Any) -> Any:
  """`per_device` entries as DeviceCeilings dicts; the device index as text."""
  if not isinstance(entries, list):
    return entries
  return [{"device": str(e.get("device")), "ceilings": _pick_ceilings(e.get("ceilings"))}
          if isinstance(e, dict) else e for e in entries]


def _pick_segment(data: Any) -> Any:
  """A `resumes` entry as a Resume dict (other keys, such as argv, dropped)."""
  if not isinstance(data, dict):
    return data
  picked = {f.name: data.get(f.name) for f in dataclasses.fields(Resume)
            if f.name not in ("per_device", "precisions")}
  if "precisions" in data:
    picked["precisions"] = data["precisions"]
  picked["per_device"] = _pick_devices(data.get("per_device", []))
  return picked


def _load_json(path: pathlib.Path) -> dict[str, Any]:
  if not path.is_file():
    raise BuildError(f"{path} is missing: a run folder needs manifest.json and records.jsonl")
  try:
    data = json.loads(path.read_text())
  except json.JSONDecodeError as e:
    raise BuildError(f"{path} is not valid JSON: {e}") from None
  if not isinstance(data, dict):
    raise BuildError(f"{path} must hold a JSON object")
  return data


def read_jsonl(path: pathlib.Path, cls: type) -> Iterable[Any]:
  """One record a line. A line that is not JSON at all is a torn write of a killed run
  (the evaluator re-measures it on --resume): skipped with a warning. A JSON line that does
  not fit the schema is an error."""
  for lineno, line in enumerate(jsonlines.lines(_read_text(path)), start=1):
    if not line.strip():
      continue
    try:
      data = json.loads(line)
    except json.JSONDecodeError as e:
      log.warning("%s:%d is not JSON (a torn write?), skipped: %s", path, lineno, e)
      continue
    try:
      if not isinstance(data, dict):
        raise ValueError("a line must hold one JSON object")
      yield schema.from_json_dict(cls, data)
    except (ValueError, TypeError) as e:
      raise BuildError(f"{path}:{lineno}: not a valid {cls.__name__}: {e}") from None


def _read_text(path: pathlib.Path) -> str:
  if path.name.endswith(".xz"):
    try:
      return lzma.decompress(path.read_bytes()).decode()
    except lzma.LZMAError as e:
      raise BuildError(f"{path} is not a readable xz file: {e}") from None
  return path.read_text()


def _check_known(task: str, variant: str, size: str, precision: str, where: str) -> None:
  _check_task(task, where)
  _check_variant(variant, where)
  _check_size(size, where)
  if precision not in PRECISIONS:
    raise BuildError(f"{where}: unknown precision {precision!r}; precisions: {list(PRECISIONS)}")


def _check_task(task: str, where: str) -> None:
  if task not in TASKS:
    raise BuildError(f"{where}: unknown task {task!r}; known tasks: {', '.join(TASKS)}")


def _check_variant(variant: str, where: str) -> None:
  if variant not in VARIANTS:
    raise BuildError(f"{where}: variant {variant!r} is not one of {VARIANTS}; candidate "
                     "evaluations do not belong in the dataset")


def _check_size(size: str, where: str) -> None:
  if size not in {s.value for s in Size}:
    raise BuildError(f"{where}: unknown size {size!r}; sizes: {[s.value for s in Size]}")


def check_record(record: EvalRecord, path: pathlib.Path) -> None:
  """A record agrees with the task registry, its status with its own fields, and its speedups
  with its times."""
  _check_registry(record, path)
  _check_status(record, path)
  _check_speedup(record, path)


def _check_status(record: EvalRecord, path: pathlib.Path) -> None:
  """What the judge writes with a pass (`judge.core`): no reason, no error, correct and robust.
  A pass that says otherwise was not written by the judge (red team round 21: a line edited
  from `incorrect` to `pass` was published as a pass, and chosen for training)."""
  if record.status is not Status.PASS:
    return
  wrong = [what for what, bad in [
      ("reasons", bool(record.reasons)),
      ("not correct and robust", not (record.correct and record.robust)),
      ("an error", record.error is not None or record.error_type is not None)] if bad]
  if wrong:
    key = dataclasses.replace(EvalKey.of(record), candidate=None)
    raise BuildError(f"{path}: {key.label()} says {record.status.value} with "
                     f"{', '.join(wrong)} (reasons {list(record.reasons)[:2]}, correct "
                     f"{record.correct}, robust {record.robust}, error type "
                     f"{record.error_type}): the judge writes no such record; measure it again")


def _check_registry(record: EvalRecord, path: pathlib.Path) -> None:
  spec = TASKS[record.task]
  if (record.task_id, record.level) != (spec.task_id, spec.level):
    raise BuildError(f"{path}: record {record.task!r} says task_id {record.task_id}, level "
                     f"{record.level}; the registry says {spec.task_id}, {spec.level}")


def _check_speedup(record: EvalRecord, path: pathlib.Path) -> None:
  """speedup must be baseline_ms / runtime_ms (above 1: the kernel is faster), or absent;
  speedup_eager and speedup_shipped likewise eager_baseline_ms or shipped_ms / runtime_ms."""
  # named without a candidate's id: a population run's reader names the candidate
  key = dataclasses.replace(EvalKey.of(record), candidate=None)
  for name, speedup, base, baseline in [
      ("speedup", record.speedup, "baseline_ms", record.baseline_ms),
      ("speedup_eager", record.speedup_eager, "eager_baseline_ms", record.eager_baseline_ms),
      ("speedup_shipped", record.speedup_shipped, "shipped_ms", record.shipped_ms)]:
    if speedup is None:
      continue
    if record.runtime_ms is None or baseline is None or record.runtime_ms <= 0:
      raise BuildError(f"{path}: {key.label()} has a {name} but no {base} or "
                       "runtime_ms")
    expected = baseline / record.runtime_ms
    if abs(speedup - expected) > 1e-6 * abs(expected):
      raise BuildError(f"{path}: {key.label()} {name} {speedup!r} is not "
                       f"{base} / runtime_ms = {expected!r}; fix the evaluator")


def _check_unique(items: Sequence[EvalRecord | Artifacts], path: pathlib.Path) -> None:
  seen: set[EvalKey] = set()
  for key in map(EvalKey.of, items):
    if key in seen:
      raise BuildError(f"{path}: {key.label()} appears twice; a run holds one "
                       "evaluation per (task, variant, size) at each precision: remove the stale "
                       "line")
    seen.add(key)


def merge_runs(runs: Sequence[Run]) -> Merged:
  """First run wins per key; later records with a known key become repeats."""
  rows: dict[EvalKey, EvalRecord] = {}
  source: dict[EvalKey, str] = {}
  repeats: list[tuple[str, tuple[EvalRecord, ...]]] = []
  for run in runs:
    repeated = tuple(r for r in run.records if EvalKey.of(r) in rows)
    for r in run.records:
      rows.setdefault(EvalKey.of(r), r)
      source.setdefault(EvalKey.of(r), run.name)
    if repeated:
      repeats.append((run.name, tuple(sorted(repeated, key=sort_key))))
  artifacts = _merge_artifacts(runs, source)
  return Merged(records=tuple(sorted(rows.values(), key=sort_key)), artifacts=artifacts,
                source_run=source, repeats=tuple(repeats),
                published=_every(runs, lambda run: run.records),
                published_artifacts=_every(runs, lambda run: run.artifacts))


def _every(runs: Sequence[Run], items) -> tuple[tuple[str, Any], ...]:
  """(run name, item) of every run's items, in key order, runs in the order given."""
  order = {run.name: n for n, run in enumerate(runs)}
  tagged = [(run.name, item) for run in runs for item in items(run)]
  return tuple(sorted(tagged, key=lambda t: (*sort_key(t[1]), order[t[0]])))


def _merge_artifacts(runs: Sequence[Run], source: Mapping[EvalKey, str]) -> tuple[Artifacts, ...]:
  """Artifacts of the run that gave each row; an artifact without its record in its own run
  is an error (the `artifacts` config pairs each line with its run's record)."""
  chosen: dict[EvalKey, Artifacts] = {}
  for run in runs:
    measured = {EvalKey.of(r) for r in run.records}
    for a in run.artifacts:
      key = EvalKey.of(a)
      if key not in measured:
        raise BuildError(f"{artifacts_file(run.path)}: {key.label()} has no record "
                         "in its run; artifacts must belong to a measured evaluation")
      if source[key] == run.name:
        chosen[key] = a
  return tuple(sorted(chosen.values(), key=sort_key))


def missing_artifacts(runs: Sequence[Run]) -> list[tuple[str, EvalKey]]:
  """(run name, key) of every record without its line in a run that wrote artifacts.jsonl.

  The driver writes a record and its artifacts together; a record the judge reported without
  its artifacts means a lost line (a torn write, a disk full). Records of evaluations whose
  judge never reported back (timeout, crash, out of memory, harness error) have none.
  """
  missing = []
  for run in runs:
    if not run.records_artifacts:
      continue
    have = {EvalKey.of(a) for a in run.artifacts}
    missing += [(run.name, EvalKey.of(r)) for r in run.records
                if EvalKey.of(r) not in have and r.error_type not in NO_ARTIFACTS]
  return missing


def check_artifacts(missing: Sequence[tuple[str, EvalKey]], *, allow_partial: bool) -> None:
  """Refuses a build whose records lost their artifacts (each one named), unless allowed."""
  if not missing or allow_partial:
    return
  listed = some([f"{run}: {key.label()}" for run, key in missing])
  raise BuildError(f"{len(missing)} record(s) have no line in their run's artifacts.jsonl: "
                   f"{listed}. Re-measure them (remove their lines from records.jsonl, then "
                   "regenerate --resume --results RUN), or build with --allow-partial (the card "
                   "then lists every missing artifact)")


def _headline_sizes(merged: Merged) -> set[str]:
  """The sizes at which fixed kernels were measured at float32 (the default config's)."""
  return {r.size for r in merged.records
          if r.variant == Variant.GPU.value and r.precision == DEFAULT_PRECISION}


def pick_headline(runs: Sequence[Run], merged: Merged) -> str:
  """`medium` when the fixed kernels were measured there at float32, else the first size the
  runs planned (in their manifests' order) that has a float32 fixed-kernel record."""
  measured = _headline_sizes(merged)
  if not measured:
    raise BuildError("the runs hold no record of the fixed kernels (variant gpu) at float32 at "
                     "any size: nothing to build (the default config is float32); measure with "
                     "--variants gpu (or tpu,gpu) at float32 (--precisions float32, the default)")
  if Size.MEDIUM.value in measured:
    return Size.MEDIUM.value
  order = [s for run in runs for seg in (run.manifest, *run.manifest.resumes) for s in seg.sizes]
  return next(s for s in [*order, *(s.value for s in Size)] if s in measured)


def check_headline_measured(merged: Merged, headline: str) -> None:
  """Refuses a headline size at which no fixed kernel was measured, naming the sizes that were."""
  measured = sorted(_headline_sizes(merged), key=[s.value for s in Size].index)
  if headline not in measured:
    raise BuildError(f"the headline size {headline!r} lacks records for every task: the runs "
                     f"measured the fixed kernels at {', '.join(measured) or 'no size'}; pass "
                     f"--headline-size {measured[0] if measured else 'SIZE'} (or leave it out: "
                     "medium when measured, else the first size measured)")


def unmeasured(runs: Sequence[Run], merged: Merged, headline: str) -> list[EvalKey]:
  """Planned evaluations without a record, plus any task lacking its GPU-kernel headline row
  (float32: the default config's)."""
  have = set(merged.source_run)
  planned = {k for run in runs for k in run.manifest.planned()}
  tasks = {r.task for r in merged.records} | {k.task for k in planned}
  wanted = planned | {EvalKey(t, Variant.GPU.value, headline) for t in tasks}
  return sorted(wanted - have, key=lambda k: (k.size != headline, k.size,
                                               precision_order(k.precision),
                                               TASKS[k.task].task_id, k.variant))


def check_headline(missing: Sequence[EvalKey], headline: str, *, allow_partial: bool) -> None:
  """Refuses a build with evaluations missing at the headline size, unless allowed."""
  at_headline = [k for k in missing if k.size == headline]
  if at_headline and not allow_partial:
    listed = some([f"{k.task} ({', '.join((k.variant, *k.parts()[3:]))})" for k in at_headline])
    raise BuildError(f"the headline size {headline!r} lacks records for {len(at_headline)} "
                     f"evaluation(s): {listed}. To build what was measured, pass --allow-partial "
                     "(the card then lists every evaluation that was not measured); or finish "
                     "the run (regenerate --resume), or add a run folder that measured them")
