"""Measuring runs -> the dataset folder that `datasets.load_dataset(folder)` loads offline.

    from builder.build import build_dataset
    summary = build_dataset([Path("runs/h200-medium"), Path("runs/h200-large")], Path("data"))

The folder (exactly what the Hub repo holds):

    README.md                                  the generated card
    default/level_{1,2,3}-00000-of-00001.parquet   one SummaryRow per task at the headline size
                                                 (float32)
    bf16/level_{1,2,3}-00000-of-00001.parquet      the same at bfloat16 (only when measured; each
                                                 precision's in its `Precision.config`)
    runs/train-00000-of-00001.parquet          every EvalRecord (task x variant x size)
    artifacts/train-00000-of-00001.parquet     Artifacts rows (only when a run recorded them)
    candidates/train-00000-of-00001.parquet    CandidateRow rows (only with population runs)
    sft/{train,test}-00000-of-00001.parquet    SftRow rows, TRL's formats (builder.training)
    preference/{train,test}-00000-of-00001.parquet   PreferenceRow rows
    sakanaai_pallasbench.json                  the default config as one JSON list
    fix.patch                                  unified diff kernels_tpu -> kernels_gpu
    kernels_tpu/*.py, kernels_gpu/*.py         both kernel trees
    plots/speedup.png, plots/roofline.png (float32), plots/speedup_bf16.png and
                                                 plots/roofline_bf16.png (the bf16 config's,
                                                 only when measured; `Precision.suffix`),
                                                 plots/candidates.png (with population runs)
    results/<run>/manifest.json, records.jsonl, artifacts.jsonl.xz   the raw records, as
                                                 measured (the artifacts xz-compressed: IR
                                                 text, a tenth of the size as xz), and
                                                 candidates.jsonl of a population run

Parquet files are zstd-compressed (level 9): the artifacts config's IR and PTX take a fifth
of their Snappy size, which keeps a release small enough to live in the project's checkout.

Everything is validated strictly and the build is refused with a BuildError that says what
to fix; the folder is written next to `out_dir` and swapped in with `os.replace`, then
checked by loading it. The same records give byte-identical files (no build timestamps).
Splits and configs without rows are left out (`datasets` cannot load an empty split).
A filesystem failure (read-only folder, disk full) is a BuildError too, and leaves neither
the staging folder nor a half-written `out_dir` behind.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import pathlib
import shutil
import tempfile
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import pandas as pd
import pyarrow.parquet as pq

from pallasbench_dataset import analysis, schema
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.population.candidates import CANDIDATES
from pallasbench_dataset.precision import DEFAULT_PRECISION, PRECISIONS, Precision
from pallasbench_dataset.schema import to_json_dict
from pallasbench_dataset.tasks import LEVEL_SPLITS, TASKS, Size

from builder import card, plots, release, repeats, training
from builder import source as shipped_source
from builder.candidates import PopulationRun, candidate_rows, check_complete, read_population
from builder.records import (
    BuildError, Merged, Run, artifacts_file, check_artifacts, check_headline,
    check_headline_measured, merge_runs, missing_artifacts, pack_artifacts, pick_headline,
    read_run, unmeasured)
from builder.rows import summary_rows
from builder.sections.inputs import CardInputs
from builder.sections.rebuild import rebuild_command
from builder.trees import KernelTrees, check_sha256, fix_patch
from builder.validate import config_features, validate_folder

__all__ = ["BuildError", "BuildSummary", "KernelTrees", "build_dataset", "hardware_of"]

log = logging.getLogger(__name__)

JSON_NAME: Final = "sakanaai_pallasbench.json"
REPRO_THRESHOLD: Final = repeats.THRESHOLD


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BuildSummary:
  """What a build wrote."""
  out_dir: pathlib.Path
  rows: Mapping[str, Mapping[str, int]]  # config -> split -> rows, as `load_dataset` reads them
  tasks: int                             # rows of the default config
  complete: bool                         # all registered tasks are in the default config
  reproducibility: Mapping[str, Any] | None  # n, median, p90, max, n_above; None without repeats
  verdict_changes: int | None              # repeats whose status differs; None without repeats
  folder_bytes: int
  files: tuple[str, ...]                 # relative paths, sorted
  hardware: str                          # slug of the GPU-kernel rows, e.g. "h200" ("cpu")
  headline: str = "medium"               # the size of the default config's rows

  @property
  def repo_name(self) -> str:
    return f"pallasbench-robust-gpu-{self.hardware}"

  def default_repo_id(self, namespace: str | None = None, *, token: str | None = None) -> str:
    """`<namespace>/pallasbench-robust-gpu-<hardware>`; the namespace defaults to the user
    the Hub token belongs to (asks the Hub: needs a token)."""
    if namespace is None:
      from builder.push import token_owner  # pylint: disable=import-outside-toplevel
      namespace = token_owner(token)
    return f"{namespace}/{self.repo_name}"

  def describe(self) -> str:
    configs = "; ".join(f"{c}: " + ", ".join(f"{s} {n}" for s, n in splits.items())
                        for c, splits in self.rows.items())
    lines = [f"built {self.out_dir} ({self.folder_bytes / 1e6:.2f} MB, {len(self.files)} files)",
             f"  {self.tasks} of {len(TASKS)} tasks at {self.headline}; {configs}"]
    if self.reproducibility and self.reproducibility["n"]:
      r = self.reproducibility
      lines.append(f"  reproducibility over {r['n']} repeats: median {r['median']:.1%}, p90 "
                   f"{r['p90']:.1%}, max {r['max']:.1%}, {r['n_above']} above "
                   f"{REPRO_THRESHOLD:.0%}; {self.verdict_changes} verdict(s) differ")
    return "\n".join(lines)


def build_dataset(run_dirs: Sequence[pathlib.Path], out_dir: pathlib.Path, *,
                  headline_size: str | None = None, kernel_trees: KernelTrees | None = None,
                  repo_id: str | None = None, allow_partial: bool = False,
                  candidate_runs: Sequence[pathlib.Path] = (),
                  source: pathlib.Path | None = None) -> BuildSummary:
  """Builds the dataset folder `out_dir` from measuring runs (the first run wins per row).

  `headline_size` (the default config's size) defaults to medium when the fixed kernels were
  measured there, else the first size measured. `kernel_trees` defaults to this checkout's
  kernels_tpu/ and kernels_gpu/; `repo_id` only fills the card's examples. Evaluations a run
  planned but did not measure at the headline size, and records whose artifacts were lost,
  are refused unless `allow_partial`; the card then lists them. `candidate_runs` (population
  runs) become the `candidates` config and a section of the card; the other configs are the
  same with or without them. `source` (a git checkout holding the commit the runs were
  measured at, or the tar `git archive` made of it) ships that commit's source in source/
  (builder.source), and the card says how to re-measure from it.
  """
  if not run_dirs:
    raise BuildError("no run folders given; pass at least one folder written by the evaluator")
  try:
    return _build(run_dirs, pathlib.Path(out_dir), headline_size=headline_size,
                  kernel_trees=kernel_trees, repo_id=repo_id, allow_partial=allow_partial,
                  candidate_runs=candidate_runs, source=source)
  except OSError as e:  # read-only folder, disk full, unreadable input
    where = f" ({e.filename})" if e.filename else ""
    raise BuildError(f"cannot build {str(out_dir)!r}: {e.strerror or e}{where}; nothing was "
                     "replaced. Free space or fix the permissions, or choose another --out") from e


def _build(run_dirs: Sequence[pathlib.Path], out_dir: pathlib.Path, *, headline_size: str | None,
           kernel_trees: KernelTrees | None, repo_id: str | None, allow_partial: bool,
           candidate_runs: Sequence[pathlib.Path], source: pathlib.Path | None) -> BuildSummary:
  runs = [read_run(pathlib.Path(p)) for p in run_dirs]
  populations = [read_population(pathlib.Path(p)) for p in candidate_runs]
  _check_names([*runs, *populations])
  check_complete(populations, allow_partial=allow_partial)
  merged = merge_runs(runs)
  headline = _headline(headline_size) if headline_size else pick_headline(runs, merged)
  trees = kernel_trees or KernelTrees.shipped()
  _check_out_dir(out_dir, [run.path for run in (*runs, *populations)]
                 + ([pathlib.Path(source)] if source else []), trees)
  commit = shipped_source.measuring_commit(runs) if source else None
  check_sha256([r for run in runs for r in run.records], trees)
  check_headline_measured(merged, headline)
  missing = unmeasured(runs, merged, headline)
  check_headline(missing, headline, allow_partial=allow_partial)
  lost = missing_artifacts(runs)
  check_artifacts(lost, allow_partial=allow_partial)
  headline_view = merged.at_precision(DEFAULT_PRECISION)  # BuildSummary's, the float32 plots
  tables = {p: summary_rows(merged, trees, headline, p) for p in PRECISIONS}  # a config each
  rows = tables[DEFAULT_PRECISION]
  repro, changes = repeats.pairs(headline_view), _verdict_changes(headline_view)
  # Pairs of one precision: the card's part for each precision but the headline's.
  other_repeats = {p.name: (repeats.pairs(view), _verdict_changes(view))
                   for p in PRECISIONS.values() if not p.seed
                   for view in (merged.at_precision(p.name),)}
  repo_id = repo_id or release.default_repo_id(_hardware(merged))
  rebuild = rebuild_command(
      [run.name for run in runs], [pop.name for pop in populations], repo_id=repo_id,
      hardware=_hardware(merged), allow_partial=bool(missing or lost) or any(
          pop.missing for pop in populations),
      source=f"{shipped_source.FOLDER}/{shipped_source.name_of(commit)}" if commit else None,
      headline=headline if headline != pick_headline(runs, merged) else None)
  out_dir.parent.mkdir(parents=True, exist_ok=True)
  staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
  try:
    _write_folder(staging, runs=runs, merged=merged, tables=tables, trees=trees,
                  repro=repro, changes=changes, other_repeats=other_repeats, headline=headline,
                  repo_id=repo_id, rebuild=rebuild, missing=missing, lost_artifacts=lost,
                  populations=populations,
                  source=(pathlib.Path(source), commit) if source else None)
    counts = validate_folder(staging)
    _swap_in(staging, out_dir)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise
  return _summary(out_dir, counts, rows, repro, changes, merged, headline)


def _headline(size: str) -> str:
  try:
    return Size(size).value
  except ValueError:
    raise BuildError(f"unknown headline size {size!r}; sizes: {[s.value for s in Size]}") from None


REPUBLISHED: Final = ("results", "kernels_tpu", "kernels_gpu", shipped_source.FOLDER)


def _check_names(runs: Sequence[Run | PopulationRun]) -> None:
  """Every run is published as results/<name>/: two runs of one name would collide."""
  names = [run.name for run in runs]
  if len(set(names)) != len(names):
    raise BuildError(f"run folders share a name ({names}); they are published as results/<name>/,"
                     " so rename one")


def _check_out_dir(out_dir: pathlib.Path, run_paths: Sequence[pathlib.Path],
                   trees: KernelTrees) -> None:
  """Never replace a folder the build did not write, nor one holding inputs it would lose.

  Inputs inside out_dir's results/ and kernel trees are fine: a dataset folder rebuilds
  from its own published records and kernels, which the new folder carries again.
  """
  target = out_dir.resolve()
  for inp in [*run_paths, trees.tpu, trees.gpu]:
    inp = inp.resolve()
    inside = target in inp.parents
    if inp == target or (inside and inp.relative_to(target).parts[0] not in REPUBLISHED):
      raise BuildError(f"out_dir {str(out_dir)!r} holds the build's input {str(inp)!r}; "
                       "choose another output folder")
  check_out_dir(out_dir)


def check_out_dir(out_dir: pathlib.Path) -> None:
  """Refuses an output folder the build could not write or would wrongly replace: one that
  exists and is not a dataset folder it wrote, or whose nearest existing parent is not a
  writable folder. `regenerate` asks before measuring, the build again before writing."""
  if out_dir.exists():
    readme = out_dir / "README.md"
    ours = readme.is_file() and card.MARKER in readme.read_text(errors="replace")
    if not out_dir.is_dir() or (any(out_dir.iterdir()) and not ours):
      raise BuildError(f"out_dir {str(out_dir)!r} exists and is not a dataset folder written by "
                       "builder.build; pass a new or empty folder (it would be replaced)")
  parent = out_dir.absolute().parent  # the build writes beside out_dir, then renames
  anchor = next(p for p in (parent, *parent.parents) if p.exists())
  if not anchor.is_dir() or not os.access(anchor, os.W_OK | os.X_OK):
    raise BuildError(f"out_dir {str(out_dir)!r} cannot be written: {str(anchor)!r} is not a "
                     "writable folder; choose another --out")


def hardware_of(run_dirs: Sequence[pathlib.Path]) -> str:
  """The hardware slug the runs measured the fixed kernels on (e.g. "h200"; several joined
  with '-'): the name a default repo id ends in, known before building."""
  return _hardware(merge_runs([read_run(pathlib.Path(p)) for p in run_dirs]))


def _hardware(merged: Merged) -> str:
  """The hardware slug of the fixed kernels' rows (several: joined with '-')."""
  slugs = sorted({r.environment.hardware for r in merged.records if r.variant == "gpu"})
  return "-".join(slugs) or "unknown"


def _against_repeats(merged: Merged, compare: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]
                     ) -> pd.DataFrame | None:
  """`compare(rows, repeats)` for each later run's repeats, with the two runs named."""
  if not merged.repeats:
    return None
  rows_df = pd.DataFrame([to_json_dict(r) for r in merged.records])
  tables = []
  for name, repeated in merged.repeats:
    table = compare(rows_df, pd.DataFrame([to_json_dict(r) for r in repeated]))
    precision = table.pop("precision")  # one precision: the card's section says which
    table.insert(3, "run_a", [merged.source_run[EvalKey(*k)] for k in zip(
        table["task"], table["variant"], table["size"], precision)])
    table.insert(4, "run_b", name)
    tables.append(table)
  return pd.concat(tables, ignore_index=True)


def _verdict_changes(merged: Merged) -> pd.DataFrame | None:
  """Later runs' repeats whose status differs from the row's."""
  return _against_repeats(merged, analysis.verdict_changes)


# ---------------------------------------------------------------------------------------------
# Writing the folder.

def _by_level(rows: Sequence[schema.SummaryRow]) -> dict[str, list[dict[str, Any]]]:
  """The headline table's splits (level_1..3), empty ones left out."""
  splits = {split: [to_json_dict(r) for r in rows if r.Level_ID == level]
            for level, split in sorted(LEVEL_SPLITS.items())}
  return {s: v for s, v in splits.items() if v}


def _config_rows(merged: Merged, tables: Mapping[str, Sequence[schema.SummaryRow]],
                 candidates: Sequence[schema.CandidateRow]
                 ) -> dict[str, dict[str, list[dict[str, Any]]]]:
  """config -> split -> JSON rows: each precision's headline table in its config
  (`Precision.config`), then the others; empty splits and configs are left out (a float32
  build has no `bf16` config)."""
  configs = {**{PRECISIONS[p].config: _by_level(rows) for p, rows in tables.items()},
             "runs": {"train": _published(merged, merged.published, schema.RunRow)},
             "artifacts": {"train": _published(merged, merged.published_artifacts,
                                               schema.ArtifactRow)},
             "candidates": {"train": [to_json_dict(c) for c in candidates]}}
  return {c: splits for c, splits in configs.items() if any(splits.values())}


def _published(merged: Merged, items, cls: type) -> list[dict[str, Any]]:
  """Every run's records (or artifacts) as rows of `cls`: the item, its run, and whether it is
  the one the default config and the card's tables use."""
  return [schema.config_row(cls(**{f.name: getattr(item, f.name) for f in dataclasses.fields(item)},
                                run_name=name, primary=merged.source_run[EvalKey.of(item)] == name))
          for name, item in items]


PARQUET_COMPRESSION: Final = "zstd"
PARQUET_LEVEL: Final = 9


def _write_parquet(path: pathlib.Path, rows: list[dict[str, Any]], features) -> tuple[int, int]:
  """Strictly typed rows to Parquet; (rows, in-memory bytes)."""
  import datasets  # pylint: disable=import-outside-toplevel
  try:
    ds = datasets.Dataset.from_list(rows, features=features)
  except (ValueError, TypeError, KeyError) as e:
    raise BuildError(f"rows for {path.name} do not match schema.py's features: {e}") from None
  path.parent.mkdir(parents=True, exist_ok=True)
  # pyarrow directly: datasets' to_parquet fixes Snappy per column. The table's schema carries
  # the features (its `huggingface` metadata), so load_dataset reads them back exactly.
  pq.write_table(ds.data.table, str(path), compression=PARQUET_COMPRESSION,
                 compression_level=PARQUET_LEVEL)
  return ds.num_rows, ds.data.nbytes


def _write_configs(folder: pathlib.Path, configs: Mapping[str, Mapping[str, list]]):
  """Parquet files, and the `configs:` / `dataset_info:` YAML blocks describing them."""
  import datasets  # pylint: disable=import-outside-toplevel
  from datasets.info import DatasetInfosDict  # pylint: disable=import-outside-toplevel
  from datasets.utils.metadata import MetadataConfigs  # pylint: disable=import-outside-toplevel
  metadata, infos = {}, {}
  for name, splits in configs.items():
    features = schema.features_of(config_features()[name])
    split_dict, download = datasets.SplitDict(), 0
    for split, rows in splits.items():
      path = folder / name / f"{split}-00000-of-00001.parquet"
      n, nbytes = _write_parquet(path, rows, features)
      split_dict.add(datasets.SplitInfo(name=split, num_bytes=nbytes, num_examples=n))
      download += path.stat().st_size
    metadata[name] = {"data_files": [{"split": s, "path": f"{name}/{s}-*.parquet"}
                                     for s in splits]}
    infos[name] = datasets.DatasetInfo(
        features=features, splits=split_dict, download_size=download,
        dataset_size=sum(s.num_bytes for s in split_dict.values()))
  metadata["default"]["default"] = True
  return MetadataConfigs(metadata), DatasetInfosDict(infos)


def _finite(value: Any) -> Any:
  """JSON has no NaN or Infinity: they become null in the JSON list (Parquet keeps them)."""
  if isinstance(value, float) and not math.isfinite(value):
    return None
  if isinstance(value, dict):
    return {k: _finite(v) for k, v in value.items()}
  if isinstance(value, list):
    return [_finite(v) for v in value]
  return value


LICENSE: Final = pathlib.Path(__file__).resolve().parents[1] / "LICENSE"  # the project's
NOTICE: Final = """PallasBench-Robust
Copyright the PallasBench-Robust contributors.
Licensed under the Apache License, Version 2.0 (LICENSE in this folder).

kernels_tpu/ re-implements the kernels of the 45 tasks of PallasBench
(https://github.com/Tyronita/PallasBench), Copyright 2026 Tyronita, licensed under the
Apache License, Version 2.0.

kernels_gpu/ holds this project's changes to those kernels for NVIDIA GPUs: each file states
its change in FIX_APPLIED and FIX_REASON, and fix.patch holds every change.
"""


def _write_sources(folder: pathlib.Path, runs: Sequence[Run | PopulationRun], rows,
                   trees: KernelTrees) -> None:
  """The licence and its notice, the JSON list, fix.patch, both kernel trees and the raw
  results."""
  shutil.copyfile(LICENSE, folder / "LICENSE")
  (folder / "NOTICE").write_text(NOTICE)
  data = [_finite(to_json_dict(r)) for r in rows]
  (folder / JSON_NAME).write_text(
      json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
  (folder / "fix.patch").write_text(fix_patch(trees))
  for variant in ("tpu", "gpu"):
    (folder / f"kernels_{variant}").mkdir()
    for path in trees.files(variant):
      (folder / f"kernels_{variant}" / path.name).write_bytes(path.read_bytes())
  for run in runs:
    dest = folder / "results" / run.name
    dest.mkdir(parents=True)
    for name in (schema.MANIFEST_FILE, schema.RECORDS_FILE, CANDIDATES):
      if (run.path / name).is_file():
        shutil.copyfile(run.path / name, dest / name)
    if (artifacts := artifacts_file(run.path)) is not None:  # so the folder rebuilds on its own
      pack_artifacts(artifacts, dest)


def _write_folder(folder: pathlib.Path, *, runs: Sequence[Run], merged: Merged,
                  tables: Mapping[str, Sequence[schema.SummaryRow]],
                  trees: KernelTrees, repro: pd.DataFrame | None,
                  changes: pd.DataFrame | None,
                  other_repeats: Mapping[str, tuple[pd.DataFrame | None, pd.DataFrame | None]],
                  headline: str, repo_id: str, rebuild: str, missing, lost_artifacts,
                  populations: Sequence[PopulationRun],
                  source: tuple[pathlib.Path, str] | None) -> None:
  candidates = candidate_rows(populations)
  shipped = ({"path": shipped_source.ship(*source, folder), "commit": source[1]}
             if source else None)
  rows = tables[DEFAULT_PRECISION]
  headline_view = merged.at_precision(DEFAULT_PRECISION)  # the prompts pose float32 tasks
  fine_tuning = training.config_rows(headline_view, trees, headline, candidates)
  configs = {**_config_rows(merged, tables, candidates), **fine_tuning}
  metadata, infos = _write_configs(folder, configs)
  _write_sources(folder, [*runs, *populations], rows, trees)
  (folder / "plots").mkdir()
  for precision, table in tables.items():
    if table:
      _write_plots(folder / "plots", PRECISIONS[precision], table, merged.at_precision(precision),
                   headline)
  if populations:
    (folder / "plots" / "candidates.png").write_bytes(plots.candidates_png(candidates))
  counts = {c: {s: len(v) for s, v in splits.items()} for c, splits in configs.items()}
  hardware = ", ".join(sorted({r.Target_Hardware for r in rows}))
  text = card.render_card(
      f"PallasBench-Robust ({hardware})", [metadata, infos],
      **card.stats(CardInputs(
          rows=rows, merged=merged, runs=runs, headline=headline, repro=repro,
          verdict_changes=changes, repo_id=repo_id, configs=counts, rebuild=rebuild,
          missing=missing, lost_artifacts=lost_artifacts, other_repeats=other_repeats,
          populations=populations, candidates=candidates, source=shipped,
          fine_tuning=fine_tuning)))
  (folder / "README.md").write_text(text)


def _write_plots(folder: pathlib.Path, precision: Precision, rows: Sequence[schema.SummaryRow],
                 view: Merged, headline: str) -> None:
  """The speedup plot of one precision's config and the roofline of its records (`view`),
  named by the precision's suffix (`speedup.png`, `speedup_bf16.png`); their titles name the
  precision unless it is the seed's (the default config's)."""
  named = None if precision.seed else precision.name
  (folder / f"speedup{precision.suffix}.png").write_bytes(plots.speedup_png(
      rows, comparable=plots.comparable(view.records, headline), precision=named,
      size=headline, runs=_runs_of(view, headline)))
  (folder / f"roofline{precision.suffix}.png").write_bytes(plots.roofline_png(
      view.records, precision=named))


def _runs_of(view: Merged, size: str) -> list[str]:
  """The runs the rows at `size` come from, in the order the build took them."""
  return list(dict.fromkeys(view.source_run[EvalKey.of(r)] for r in view.records if r.size == size))


def _swap_in(staging: pathlib.Path, out_dir: pathlib.Path) -> None:
  """Replaces out_dir by the finished folder; out_dir is never half-written, and when the
  second rename fails the previous folder is put back."""
  os.chmod(staging, 0o755)  # mkdtemp makes it 0700
  if not out_dir.exists():
    os.replace(staging, out_dir)
    return
  old = pathlib.Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
  try:
    os.replace(out_dir, old / "previous")
    try:
      os.replace(staging, out_dir)
    except BaseException:
      os.replace(old / "previous", out_dir)
      raise
  finally:
    shutil.rmtree(old, ignore_errors=True)


def _summary(out_dir: pathlib.Path, counts, rows, repro: pd.DataFrame | None,
             changes: pd.DataFrame | None, merged: Merged, headline: str) -> BuildSummary:
  files = sorted(p for p in out_dir.rglob("*") if p.is_file())
  stats = analysis.reproducibility_summary(repro) if repro is not None else None
  summary = BuildSummary(
      out_dir=out_dir, rows=counts, tasks=len(rows), complete=len(rows) == len(TASKS),
      reproducibility=types.MappingProxyType(stats) if stats else None,
      verdict_changes=None if changes is None else len(changes),
      folder_bytes=sum(p.stat().st_size for p in files),
      files=tuple(str(p.relative_to(out_dir)) for p in files),
      hardware=_hardware(merged), headline=headline)
  if not summary.complete:
    log.warning("built %d of %d tasks: a partial dataset", len(rows), len(TASKS))
  log.info("built %s: %s, %d bytes", out_dir, dict(counts), summary.folder_bytes)
  return summary
