"""Card sections that read every run: results per size, artifact coverage, inputs that could
stay in L2, the GPUs' clocks and power state, compile conditions, ceiling sources, and the
command that rebuilds the folder. Each returns strings and small lists for the template.

A table of one precision's records has no precision column; where both were
measured, the tables of each are joined with a `precision` column (`joined`)."""

from __future__ import annotations

import collections
import shlex
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import pandas as pd

from pallasbench_dataset import analysis
from pallasbench_dataset.precision import PRECISIONS
from pallasbench_dataset.schema import Artifacts, EvalRecord, to_json_dict
from pallasbench_dataset.tasks import TASKS, Size

from builder import release
from builder.records import Merged, Run, key_of

LEVEL_FORMATS: Final = {"fast_0": ".0%", "fast_1": ".0%", "fast_2": ".0%",
                        "geomean_speedup": ".3f"}


def by_precision(records: Sequence[EvalRecord]) -> dict[str, list[EvalRecord]]:
  """The records of each precision among them, in PRECISIONS order (float32 first)."""
  out = {p: [r for r in records if r.precision == p] for p in PRECISIONS}
  return {p: rs for p, rs in out.items() if rs}


def joined(tables: Mapping[str, pd.DataFrame], after: str) -> pd.DataFrame:
  """One precision's table as it is; several joined in the order given, each row naming its
  precision in a column after `after`. Empty tables add no rows; none left: an empty frame."""
  if len(tables) == 1:
    return next(iter(tables.values()))
  frames = []
  for precision, table in tables.items():
    if table.empty:
      continue
    table = table.copy()
    table.insert(table.columns.get_loc(after) + 1, "precision", precision)
    frames.append(table)
  return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def sizes_of(merged: Merged, headline: str) -> list[str]:
  """The sizes the fixed kernels were measured at: the headline first (where measured), then
  in size order."""
  measured = {r.size for r in merged.records if r.variant == "gpu"}
  order = [s.value for s in Size]
  return [headline] * (headline in measured) + sorted(measured - {headline}, key=order.index)


def results(merged: Merged, headline: str, table) -> list[dict[str, Any]]:
  """`results_by_size` for each precision measured (PRECISIONS order: float32 first), each
  entry naming its precision."""
  out = []
  for precision in merged.precisions():
    view = merged.at_precision(precision)
    runs_df = pd.DataFrame([to_json_dict(r) for r in view.records])
    out += [{"precision": precision, **entry}
            for entry in results_by_size(runs_df, sizes_of(view, headline), table)]
  return out


def results_by_size(runs_df: pd.DataFrame, sizes: Sequence[str], table) -> list[dict[str, Any]]:
  """Per size: the fixed kernels' and the originals' fast_p tables (against the jitted
  reference; the fixed kernels also against the eager one), failures and outcomes. `table`
  renders a DataFrame (the card's md_table)."""
  out = []
  for size in sizes:
    at = runs_df[runs_df["size"] == size]
    fixed, original = at[at["variant"] == "gpu"], at[at["variant"] == "tpu"]
    eager = (None if fixed["speedup_eager"].isna().all() else
             table(analysis.summary_by_level(fixed, baseline="eager"), LEVEL_FORMATS))
    fails = analysis.failures(fixed)[["task", "level", "status", "error"]]
    orig_fails = analysis.failures(original) if not original.empty else original
    status = collections.Counter(original["status"]) if not original.empty else {}
    out.append({
        "size": size, "n_fixed": len(fixed),
        "fixed": table(analysis.summary_by_level(fixed), LEVEL_FORMATS),
        "eager": eager,
        "original": (table(analysis.summary_by_level(original), LEVEL_FORMATS)
                     if not original.empty else "(the original kernels were not measured)"),
        "failures": table(fails),
        "original_status": ", ".join(f"{k}: {v}" for k, v in sorted(status.items())) or "none",
        "original_failures": table(orig_fails[[c for c in ("task", "status", "error_type", "error")
                                               if c in orig_fails]])})
  return out


def _compiled(r: EvalRecord) -> bool:
  return r.compile is not None and r.compile.compile_s is not None


def artifact_coverage(merged: Merged) -> dict[str, Any]:
  """Per run (and precision, where both were measured): records, and how many carry each IR;
  the records whose kernel compiled on a GPU without PTX (a capture defect), counted by
  Pallas backend, and their kernels (`task/variant`, and the precision where both were
  measured)."""
  views = {p: _coverage(merged.at_precision(p)) for p in merged.precisions()}
  several = len(views) > 1
  return {"table": joined({p: v["table"] for p, v in views.items()}, "run"),
          "no_ptx": sum(v["no_ptx"] for v in views.values()),
          "gpu_compiled": sum(v["gpu_compiled"] for v in views.values()),
          "ptx_by_backend": joined({p: v["ptx_by_backend"] for p, v in views.items()}, "backend"),
          "no_ptx_kernels": [f"{k} ({p})" if several else k
                             for p, v in views.items() for k in v["no_ptx_kernels"]]}


def _coverage(merged: Merged) -> dict[str, Any]:
  """`artifact_coverage` of one precision's records."""
  records = {(name, key_of(r)): r for name, r in merged.published}
  rows, no_ptx, compiled = [], [], []
  by_run: dict[str, list[tuple[EvalRecord, Artifacts]]] = collections.defaultdict(list)
  for name, a in merged.published_artifacts:
    by_run[name].append((records[(name, key_of(a))], a))
  for name in dict.fromkeys(n for n, _ in merged.published):
    pairs = by_run.get(name, [])
    gpu_compiled = [(r, a) for r, a in pairs if _compiled(r) and r.device == "gpu"]
    compiled += gpu_compiled
    no_ptx += [r for r, a in gpu_compiled if not a.ptx]
    rows.append({"run": name, "records": sum(1 for n, _ in merged.published if n == name),
                 "artifacts lines": len(pairs), "jaxpr": sum(bool(a.jaxpr) for _, a in pairs),
                 "StableHLO": sum(bool(a.stablehlo) for _, a in pairs),
                 "Triton IR": sum(bool(a.triton_ir) for _, a in pairs),
                 "PTX": sum(bool(a.ptx) for _, a in pairs),
                 "compiled on a GPU": len(gpu_compiled),
                 "Mosaic GPU": sum("mosaic_gpu" in r.backends for r, _ in pairs)})
  def backend(r: EvalRecord) -> str:
    return " + ".join(sorted(r.backends)) or "none recorded"
  by_backend = collections.Counter(backend(r) for r, _ in compiled)
  missing = collections.Counter(backend(r) for r in no_ptx)
  backend_rows = [{"backend": b, "compiled on a GPU": n, "with PTX": n - missing[b],
                   "without PTX": missing[b]} for b, n in sorted(by_backend.items())]
  kernels = sorted({f"{r.task}/{r.variant}" for r in no_ptx},
                   key=lambda k: (TASKS[k.split("/")[0]].task_id, k))
  return {"table": pd.DataFrame(rows), "no_ptx": len(no_ptx), "gpu_compiled": len(compiled),
          "ptx_by_backend": pd.DataFrame(backend_rows), "no_ptx_kernels": kernels}


def l2_resident(records: Sequence[EvalRecord]) -> dict[str, Any]:
  """The rows whose timed inputs could stay in L2 (with their precision where the records
  hold both), and how many timed rows did not record it."""
  timed = [r for r in records if r.timing_comparable and r.runtime_ms is not None]
  resident = [r for r in timed if r.timing_l2_resident]
  def table(rs: Sequence[EvalRecord]) -> pd.DataFrame:
    return pd.DataFrame([
        {"task": r.task, "variant": r.variant, "size": r.size, "input sets": r.timing_input_sets,
         "rotated MiB": r.timing_rotated_bytes / 2**20 if r.timing_rotated_bytes else None,
         "L2 MiB": r.environment.l2_bytes / 2**20 if r.environment.l2_bytes else None}
        for r in rs])
  tables = {p: table([r for r in resident if r.precision == p]) for p in by_precision(records)}
  return {"n_timed": len(timed), "n_resident": len(resident),
          "n_unknown": sum(r.timing_l2_resident is None for r in timed),
          "table": joined(tables, "size") if tables else pd.DataFrame()}


def gpu_state(merged: Merged) -> pd.DataFrame:
  """Per run and GPU, what its judges recorded: L2 size and its source, clocks, performance
  state and power (nvidia-smi just after the ceilings were measured); one row per distinct
  state seen, with the number of records that carry it."""
  seen: collections.Counter = collections.Counter()
  for name, r in merged.published:
    env, gpu = r.environment, r.environment.gpu
    index = r.run.gpu_index if r.run is not None else None
    seen[(name, index, env.l2_bytes, env.l2_source,
          *(to_json_dict(gpu).get(k) if gpu else None for k in _GPU_COLUMNS))] += 1
  rows = [{"run": key[0], "GPU": key[1], "L2 MiB": key[2] / 2**20 if key[2] else None,
           "L2 from": key[3], **dict(zip(_GPU_HEADERS, key[4:])), "records": n}
          for key, n in sorted(seen.items(), key=lambda item: str(item[0]))]
  return pd.DataFrame(rows)


_GPU_COLUMNS: Final = ("uuid", "sm_clock_mhz", "max_sm_clock_mhz", "memory_clock_mhz", "pstate",
                       "power_draw_w", "power_limit_w", "throttle_reasons")
_GPU_HEADERS: Final = ("UUID", "SM MHz", "max SM MHz", "memory MHz", "pstate", "power W",
                       "power limit W", "clock event reasons")


def compile_conditions(merged: Merged) -> dict[str, Any]:
  """How the fixed kernels' compile times were taken: the compiles running at once (itself
  included) and, where several runs compiled a kernel, the spread of compile_s between them."""
  fixed = [(name, r) for name, r in merged.published if r.variant == "gpu" and _compiled(r)]
  concurrent = [r.compile.concurrent_compiles for _, r in fixed
                if r.compile.concurrent_compiles is not None]
  by_key: dict = collections.defaultdict(list)
  for _, r in fixed:
    by_key[key_of(r)].append(r.compile.compile_s)
  spreads = [(max(v) - min(v)) / min(v) for v in by_key.values() if len(v) > 1 and min(v) > 0]
  return {"n": len(fixed), "n_concurrency": len(concurrent),
          "concurrency": (f"median {statistics.median(concurrent):g}, max {max(concurrent)}"
                          if concurrent else None),
          "n_spread": len(spreads),
          "spread": (f"median {statistics.median(spreads):.0%}, max {max(spreads):.0%}"
                     if spreads else None)}


def ceiling_sources(records: Sequence[EvalRecord]) -> str:
  """How many timed records held their rates against each source of ceiling."""
  counts = collections.Counter(
      (kind, source) for r in records if r.roofline is not None
      for kind, source in (("bandwidth", r.roofline.ceiling_gbps_source),
                           ("compute", r.roofline.ceiling_tflops_source)) if source)
  return "; ".join(f"{kind} {source}: {n}" for (kind, source), n in sorted(counts.items())) or (
      "not recorded")


def ceiling_methods(runs: Sequence[Run], records: Sequence[EvalRecord]) -> str:
  """The distinct ways the ceilings were measured: from the records' `run` and roofline, and
  from the manifests."""
  methods = {c.method for run in runs
             for c in (run.manifest.ceilings,
                       *(d.ceilings for seg in (run.manifest, *run.manifest.resumes)
                         for d in seg.per_device))
             if c is not None and c.method}
  methods |= {r.run.ceiling_method for r in records if r.run is not None and r.run.ceiling_method}
  methods |= {r.roofline.ceiling_method for r in records
              if r.roofline is not None and r.roofline.ceiling_method}
  return "; ".join(sorted(methods)) or "not recorded"


def rebuild_command(run_names: Sequence[str], population_names: Sequence[str], *,
                    repo_id: str, hardware: str, headline: str | None,
                    allow_partial: bool) -> str:
  """The command that rebuilds this folder where it sits in a checkout (release.FOLDER), from
  its own results and kernel trees: the runs in the order the build took them (a glob where
  that order is the folder names'), the repo id where it is not the default, the headline
  size where it is not the one the builder picks."""
  folder = release.FOLDER
  in_order = list(run_names) == sorted(run_names) and not population_names
  results = ([f"{folder}/results/*"] if in_order
             else [f"{folder}/results/{n}" for n in run_names])
  args = ["--from-results", *results]
  if population_names:
    args += ["--candidates", *(f"{folder}/results/{n}" for n in population_names)]
  args += ["--kernel-trees", folder, "--out", folder]
  if repo_id != release.default_repo_id(hardware):
    args += ["--repo-id", repo_id]
  if headline is not None:
    args += ["--headline-size", headline]
  if allow_partial:
    args.append("--allow-partial")
  quoted = [a if a.endswith("/*") else shlex.quote(a) for a in args]
  return "python -m builder.regenerate " + " ".join(quoted)


def limits(records: Sequence[EvalRecord]) -> Mapping[str, Any]:
  """Facts the card's Limitations section states: the GPU kinds measured, and the dtypes of
  the tasks' floating-point inputs and outputs (from the registry)."""
  kinds = sorted({r.environment.device_kind for r in records if r.variant == "gpu"})
  floats = sorted({str(np.dtype(d)) for spec in TASKS.values()
                   for d in (spec.output_dtype, *(i.dtype for i in spec.inputs))
                   if np.issubdtype(np.dtype(d), np.floating)})
  return {"gpu_kinds": ", ".join(kinds) or "none", "n_gpu_kinds": len(kinds),
          "float_dtypes": ", ".join(floats)}
