"""How each evaluation was measured: the judge, correctness and its tolerances, the
robustness filters, timing (and the inputs that could stay in L2), and the ceilings each
rate was held against."""

from __future__ import annotations

import collections
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.judge.core import CEILING_TOLERANCE
from pallasbench_dataset.precision import PRECISIONS
from pallasbench_dataset.schema import EvalRecord
from pallasbench_dataset.tasks import TASKS

from builder.records import Merged, Run
from builder.sections.inputs import CardInputs
from builder.tables import by_precision, joined, md_table

_SEED_MATMUL: Final = "matmul TFLOP/s"


def _matmul_columns() -> dict[str, str]:
  """The ceilings table's matmul columns, by the rate each shows (`Precision.ceiling`, each
  once): the seed precision's _SEED_MATMUL, another's named by its config ("matmul bf16
  TFLOP/s")."""
  columns: dict[str, str] = {}
  for precision in PRECISIONS.values():
    columns.setdefault(precision.ceiling, _SEED_MATMUL if precision.seed
                       else f"matmul {precision.config} TFLOP/s")
  return columns


def _ceiling_row(run: str, gpu: Any, copy: Any, read: Any, *matmul: Any, n: int | None,
                 source: str) -> dict[str, Any]:
  """A row of the ceilings table, `matmul` the rates of `_matmul_columns`; another precision's
  than the seed's only where it was measured (runs from before it lack it, and a table none of
  whose runs measured it has no such column)."""
  row = {"run": run, "GPU": gpu, "copy GB/s": copy, "read GB/s": read,
         "evaluations": n, "from": source}
  return {**row, **{column: rate for column, rate in zip(_matmul_columns().values(), matmul)
                    if column == _SEED_MATMUL or rate is not None}}


def _ceiling_rows(run: Run) -> list[dict[str, Any]]:
  """The run's ceilings per GPU: from its records' `run` field (release 2 on), else from the
  manifest's per-device entries (every segment of the run), else its single `ceilings`."""
  rates = list(_matmul_columns())
  per_gpu = collections.Counter(
      (r.run.gpu_index, r.run.ceiling_copy_gbps, r.run.ceiling_read_gbps,
       *(getattr(r.run, f"ceiling_{rate}") for rate in rates))
      for r in run.records if r.run is not None)
  if per_gpu:
    return [_ceiling_row(run.name, *key, n=n, source="records")
            for key, n in sorted(per_gpu.items(), key=lambda item: str(item[0]))]
  devices = [d for seg in (run.manifest, *run.manifest.resumes) for d in seg.per_device]
  if devices:
    return [_ceiling_row(run.name, d.device, d.ceilings and d.ceilings.copy_gbps,
                         d.ceilings and d.ceilings.read_gbps,
                         *(d.ceilings and getattr(d.ceilings, rate) for rate in rates), n=None,
                         source="manifest" if d.ceilings else "not recorded") for d in devices]
  c = run.manifest.ceilings
  return [_ceiling_row(run.name, None, c and c.copy_gbps, c and c.read_gbps,
                       *(c and getattr(c, rate) for rate in rates), n=None,
                       source="manifest" if c else "not recorded")]


def _ceilings_table(runs: Sequence[Run]) -> str:
  rows = [row for run in runs for row in _ceiling_rows(run)]
  matmul = list(_matmul_columns().values())
  columns = [c for c in ("run", "GPU", "copy GB/s", "read GB/s", *matmul, "evaluations", "from")
             if any(c in row for row in rows)]
  return md_table(pd.DataFrame(rows, columns=columns),
                  {"copy GB/s": ".1f", "read GB/s": ".1f", **dict.fromkeys(matmul, ".1f")})


def _atol(atol: float, scale: str) -> str:
  """The atol as the judge applies it: absolute, or a fraction of the reference's RMS."""
  return f"{atol:g}" if scale == "absolute" else f"{atol:g} × RMS(reference)"


def _output_dtype(record: EvalRecord) -> str:
  """The dtype of the task's output at the record's precision (the registry's): the limits
  are the output's, so a bfloat16 evaluation whose output stays float32 has float32's."""
  return TASKS[record.task].at_precision(record.precision).output_dtype


def _tolerance_table(records: Sequence[EvalRecord]) -> str:
  """Evaluations per tolerance class, precision and output dtype (the limits are the output
  dtype's); the atol as the records apply it (`atol_scale`: absolute, or times the reference
  output's RMS)."""
  counts = collections.Counter((r.precision, _output_dtype(r), r.tolerance, r.rtol, r.atol,
                                r.atol_scale, r.max_rel_l2) for r in records)
  rows = [{"precision": p, "output": out, "class": c, "rtol": rt, "atol": _atol(at, scale),
           "max relative L2": l2, "evaluations": n}
          for (p, out, c, rt, at, scale, l2), n in sorted(counts.items(), key=str)]
  return md_table(pd.DataFrame(rows), {"rtol": "g", "max relative L2": "g"})


def _filters_table(records: Sequence[EvalRecord]) -> str:
  """Evaluations and failures per filter (and precision, where the records hold both)."""
  def counts(rs: Sequence[EvalRecord]) -> pd.DataFrame:
    runs, failed = collections.Counter(), collections.Counter()
    for r in rs:
      for f in r.filters:
        runs[f.name] += 1
        failed[f.name] += not f.passed
    return pd.DataFrame([{"filter": name, "evaluations": runs[name], "failed": failed[name]}
                         for name in sorted(runs)])
  tables = {p: counts(rs) for p, rs in by_precision(records).items()}
  return md_table(joined(tables, "filter") if tables else pd.DataFrame())


def _in_order(item: tuple[Any, int]) -> tuple:
  """Numbers in numeric order, before any text."""
  value = item[0]
  return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def _timing_facts(records: Sequence[EvalRecord]) -> dict[str, str]:
  def distinct(values) -> str:
    counts = collections.Counter(v for v in values if v is not None)
    return ", ".join(f"{v} ({n})" for v, n in sorted(counts.items(), key=_in_order)) or "none"
  seeds = collections.Counter(len(r.seeds) for r in records)
  return {"methods": distinct(r.timing_method for r in records),
          "iterations": distinct(r.timing_iterations for r in records),
          "input_sets": distinct(r.timing_input_sets for r in records),
          "seeds": ", ".join(f"{s} seeds ({n})" for s, n in sorted(seeds.items())) or "none",
          "not_comparable": str(sum(not r.timing_comparable for r in records)),
          "judge_text": _judge_text(records)}


_JUDGE_TEXT: Final = {
    "4": ("- **Judge** (`judge_version` 4, {n} evaluation(s)): as judge 3 below, and: each timed "
          "call's inputs are\n  drawn from new seeds just before it, the L2 then flushed, and "
          "checked and freed after it (no\n  two calls share an input, none exists before its "
          "call; `timing_input_sets` counts the calls),\n  the baseline's as well as the "
          "kernel's; on a GPU every timed output whose host copy fits\n  4 GiB is checked "
          "(`timed_outputs_checked`)."),
    "3": ("- **Judge** (`judge_version` 3, {n} evaluation(s)): as judge 2 below, and: the exporter "
          "reads\n  neither the project's kernel trees, data nor references, and reports its walls on "
          "a pipe\n  closed before kernel code runs; the judge reads the artifact's header itself "
          "(static shapes\n  only), charges every op outside the kernels its bytes as well as its "
          "FLOPs, checks every\n  task on input families that reach where its formula breaks, "
          "poisons and frees each timed\n  output before the next call, and on a GPU can run one "
          "call under compute-sanitizer's memcheck\n  (the project's trees: only with "
          "`regenerate --memcheck`).\n{budgets}"),
    "2": ("- **Judge** (`judge_version` 2, {n} evaluation(s)): the kernel's code runs only in a "
          "sandboxed exporter\n  process, which hands back `jax.export` artifacts; a separate judge "
          "process, which never\n  imports kernel code, analyses the exported module (the Triton "
          "custom calls are the kernel;\n  every other op is costed), draws the seeds after the "
          "export, runs the kernel on every input\n  before any reference output exists, and "
          "only then compares, in float64. On a CPU host it runs the\n  interpret-mode export and reads the "
          "structure from the Triton export: a CPU verdict vouches\n  for the interpret-mode "
          "program only."),
    "1": ("- **Evaluator** (`judge_version` 1, release 1, {n} evaluation(s)): the kernel ran in "
          "the process that\n  drew its seeds (derived from the task id), computed the references "
          "and timed it."),
}


def _budget(device: str, stage: str) -> str:
  budget = budgets.budget_s(device, stage)
  return "none" if budget is None else f"{budget:.0f} s"


def _stage_budgets() -> str:
  """Judge 3's stage budgets: what running past one makes of the record, the stages of the
  judge's own work that have none, and each budgeted stage's on a GPU judge and on a CPU one
  (`budgets.STAGE_BUDGETS_S`), as a list; indented to continue the judge's item."""
  text = ("Each stage that works on the candidate has its own time budget. A stage that runs "
          "past its budget ends the evaluation: its process is killed and the record is "
          "`rejected`, with a reason naming the stage and its budget; that is a verdict on the "
          "candidate, which the verdict cache keeps. The stages of the judge's own work "
          f"({', '.join(sorted(budgets.JUDGES_OWN))}) have no budget of their own: the "
          "evaluation's limit bounds them. The budgets, on a GPU judge / on a CPU judge:")
  stages = dict.fromkeys(stage for device in budgets.STAGE_BUDGETS_S.values()
                         for stage in device)
  return "\n".join([textwrap.fill(text, width=96, initial_indent="  ", subsequent_indent="  "),
                    *(f"  - {stage}: {_budget('gpu', stage)} / {_budget('cpu', stage)}"
                      for stage in stages)])


def _judge_text(records: Sequence[EvalRecord]) -> str:
  versions = collections.Counter(r.judge_version for r in records)
  return "\n".join(_JUDGE_TEXT[v].format(n=versions[v], budgets=_stage_budgets())
                   for v in sorted(versions, reverse=True))


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


def context(card: CardInputs) -> Mapping[str, Any]:
  """The protocol's counts, of the published records (`primary` in `runs`): seeds, tolerance
  classes and filters, timing, inputs that could stay in L2, the ceilings (with a bfloat16
  column where a run measured it), and the CPU rows."""
  records, published = card.merged.records, card.published
  ceilings_table = _ceilings_table(card.runs)
  l2 = l2_resident(records)
  eager_over = eager_above_ceiling(records)
  return {"primary_runs": ", ".join(f"`{n}`" for n in dict.fromkeys(
              card.merged.source_run.values())),
          "tolerance_table": _tolerance_table(records), "filters_table": _filters_table(records),
          **_timing_facts(records),
          "l2": {**l2, "table": md_table(l2["table"], {"rotated MiB": ".2f", "L2 MiB": ".0f"})},
          # judge 4 draws each call's inputs just before it; judges 1-3 rotated fixed sets
          "drawn_per_call": bool(records) and all(r.judge_version not in ("1", "2", "3")
                                                  for r in records),
          "ceilings_table": ceilings_table,
          "ceiling_bf16": any(column in ceilings_table for column in _matmul_columns().values()
                              if column != _SEED_MATMUL),
          "ceiling_methods": ceiling_methods(card.runs, published),
          "ceiling_sources": ceiling_sources(card.merged),
          "ceiling_tolerance": f"{CEILING_TOLERANCE:.0%}",
          "eager_over": md_table(eager_over, {"eager ms": ".4g"}), "n_eager_over": len(eager_over),
          "cpu_rows": sum(r.device == "cpu" for r in records)}
