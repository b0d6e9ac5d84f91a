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
from pallasbench_dataset.schema import Artifacts, EvalRecord, Status, to_json_dict
from pallasbench_dataset.tasks import TASKS, Size

from builder import release
from builder.records import Merged, Run, key_of
from builder.repeats import gpu_of

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
  """Per run and GPU, what its judges recorded: L2 size and its source, clocks (whole MHz, as
  nvidia-smi reports them), performance state, power and the clock-event reasons (the bit mask
  and its meaning; nvidia-smi just after the ceilings were measured); one row per distinct
  state seen, with the number of records that carry it."""
  seen: collections.Counter = collections.Counter()
  for name, r in merged.published:
    env, gpu = r.environment, r.environment.gpu
    index = r.run.gpu_index if r.run is not None else None
    seen[(name, index, env.l2_bytes, env.l2_source,
          *(to_json_dict(gpu).get(k) if gpu else None for k in _GPU_COLUMNS))] += 1
  rows = []
  for key, n in sorted(seen.items(), key=lambda item: str(item[0])):
    state = dict(zip(_GPU_COLUMNS, key[4:]))
    for column in _MHZ:
      state[column] = None if state[column] is None else round(state[column])
    state["throttle_reasons"] = clock_event_reasons(state["throttle_reasons"])
    rows.append({"run": key[0], "GPU": key[1], "L2 MiB": key[2] / 2**20 if key[2] else None,
                 "L2 from": key[3], **{_GPU_HEADERS[c]: state[c] for c in _GPU_COLUMNS},
                 "records": n})
  return pd.DataFrame(rows)


_GPU_COLUMNS: Final = ("uuid", "sm_clock_mhz", "max_sm_clock_mhz", "memory_clock_mhz", "pstate",
                       "power_draw_w", "power_limit_w", "throttle_reasons")
_GPU_HEADERS: Final = dict(zip(_GPU_COLUMNS, (
    "UUID", "SM MHz", "max SM MHz", "memory MHz", "pstate", "power W", "power limit W",
    "clock event reasons")))
_MHZ: Final = ("sm_clock_mhz", "max_sm_clock_mhz", "memory_clock_mhz")
# NVML's clock-event reason bits (nvml.h, nvmlClocksEventReason*), as nvidia-smi's
# `clocks_event_reasons.active` prints their mask.
CLOCK_EVENT_REASONS: Final = ((0x1, "GPU idle"), (0x2, "applications clocks setting"),
                              (0x4, "SW power cap"), (0x8, "HW slowdown"), (0x10, "sync boost"),
                              (0x20, "SW thermal slowdown"), (0x40, "HW thermal slowdown"),
                              (0x80, "HW power brake slowdown"), (0x100, "display clock setting"))


def clock_event_reasons(mask: str | None) -> str | None:
  """nvidia-smi's clock-event mask with its reasons named: `0x4 (SW power cap)`; `0x0 (none)`;
  a text that is not a hexadecimal mask is returned as it is."""
  if mask is None:
    return None
  try:
    value = int(mask, 16)
  except ValueError:
    return mask
  names = [name for bit, name in CLOCK_EVENT_REASONS if value & bit]
  unknown = value & ~sum(bit for bit, _ in CLOCK_EVENT_REASONS)
  if unknown:
    names.append(f"other bits {unknown:#x}")
  return f"{value:#x} ({', '.join(names) or 'none'})"


def compile_conditions(runs: Sequence[Run]) -> dict[str, Any]:
  """How each run's compile stage compiled the fixed kernels: the compiles that overlapped
  each one (itself included: any compile that ran at some moment while it did; the records'
  `concurrent_compiles`), the stage's workers and budget (the manifest's); and, for each later
  run, the difference |b - a| / a of a kernel's compile_s against the first run's (a)."""
  per_run, first = [], None
  for run in runs:
    fixed = {key_of(r): r.compile.compile_s for r in run.records
             if r.variant == "gpu" and _compiled(r)}
    overlap = [r.compile.concurrent_compiles for r in run.records
               if r.variant == "gpu" and _compiled(r) and r.compile.concurrent_compiles is not None]
    entry = {"run": run.name, "n": len(fixed), "n_overlap": len(overlap),
             "overlap": (f"median {statistics.median(overlap):g}, max {max(overlap)}"
                         if overlap else None),
             "workers": run.manifest.cpu_workers, "budget_s": run.manifest.compile_budget_s,
             "first": None if first is None else first[0], "n_spread": 0, "spread": None}
    if first is None:
      first = (run.name, fixed)
    else:
      spreads = [abs(b - fixed_a) / fixed_a for key, b in fixed.items()
                 if (fixed_a := first[1].get(key)) and fixed_a > 0]
      entry["n_spread"] = len(spreads)
      entry["spread"] = (f"median {statistics.median(spreads):.0%}, max {max(spreads):.0%}"
                         if spreads else None)
    per_run.append(entry)
  return {"runs": per_run}


def ceiling_sources(merged: Merged) -> list[tuple[str, str]]:
  """Per run: how many of its timed records held their rates against each source of ceiling."""
  out = []
  for name in dict.fromkeys(n for n, _ in merged.published):
    counts = collections.Counter(
        (kind, source) for n, r in merged.published if n == name and r.roofline is not None
        for kind, source in (("bandwidth", r.roofline.ceiling_gbps_source),
                             ("compute", r.roofline.ceiling_tflops_source)) if source)
    out.append((name, "; ".join(f"{kind} {source}: {n}" for (kind, source), n
                                in sorted(counts.items())) or "not recorded"))
  return out


def eager_above_ceiling(records: Sequence[EvalRecord]) -> pd.DataFrame:
  """The timed rows whose eager reference time implies a rate above a ceiling the kernel is
  held to (the task's analytic FLOPs or bytes over the eager time): the judge holds only the
  kernel's rate to the ceilings, so these are named rather than rejected."""
  rows = []
  for r in records:
    roof = r.roofline
    if roof is None or not r.eager_baseline_ms or r.eager_baseline_ms <= 0:
      continue
    gbps = roof.bytes / (r.eager_baseline_ms * 1e6)
    tflops = roof.flops / (r.eager_baseline_ms * 1e9)
    rates = (("GB/s", gbps, roof.ceiling_gbps), ("TFLOP/s", tflops, roof.ceiling_tflops))
    over = [(kind, rate, ceiling) for kind, rate, ceiling in rates if ceiling and rate > ceiling]
    for kind, rate, ceiling in over:
      rows.append({"task": r.task, "variant": r.variant, "size": r.size,
                   "precision": r.precision, "eager ms": r.eager_baseline_ms,
                   "rate": f"{rate:.1f} {kind}", "ceiling": f"{ceiling:.1f} {kind}"})
  return pd.DataFrame(rows)


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
                    allow_partial: bool, source: str | None = None) -> str:
  """The command that rebuilds this folder where it sits in a checkout (release.FOLDER), from
  its own results, kernel trees and shipped source (`source`, its path in the folder): the
  runs in the order the build took them (a glob where that order is the folder names'), the
  repo id where it is not the default, the headline size where it is not the one the builder
  picks."""
  folder = release.FOLDER
  in_order = list(run_names) == sorted(run_names) and not population_names
  results = ([f"{folder}/results/*"] if in_order
             else [f"{folder}/results/{n}" for n in run_names])
  args = ["--from-results", *results]
  if population_names:
    args += ["--candidates", *(f"{folder}/results/{n}" for n in population_names)]
  args += ["--kernel-trees", folder, "--out", folder]
  if source is not None:
    args += ["--source", f"{folder}/{source}"]
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


def load_facts(runs: Sequence[Run], merged: Merged,
               changes: pd.DataFrame | None) -> dict[str, Any]:
  """What the Limitations section says of load: the compile budget and the compile stage's
  workers (the manifests'), the published records that timed out, and the repeated
  evaluations whose verdict is a timeout in one run and not in the other."""
  budgets = sorted({r.manifest.compile_budget_s for r in runs if r.manifest.compile_budget_s})
  workers = sorted({r.manifest.cpu_workers for r in runs if r.manifest.cpu_workers})
  timeouts = collections.Counter(name for name, r in merged.published
                                 if r.status is Status.TIMEOUT)
  flipped = (0 if changes is None or changes.empty else
             int(((changes["status_a"] == "timeout") != (changes["status_b"] == "timeout")).sum()))
  return {"budget": " or ".join(f"{b:g} s" for b in budgets) or None,
          "workers": " or ".join(map(str, workers)) or None,
          "timeouts": ", ".join(f"{n} in `{name}`" for name, n in timeouts.items()) or "none",
          "flipped": flipped}


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
