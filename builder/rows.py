"""The rows of the default config: one `SummaryRow` per task at the headline size."""

from __future__ import annotations

from collections.abc import Mapping

from pallasbench_dataset.schema import EvalRecord, SummaryRow
from pallasbench_dataset.tasks import TASKS

from builder.records import Key, Merged
from builder.trees import KernelTrees, gpu_fix

NOT_MEASURED = "not_measured"  # Original_Status when the run did not measure the original kernel


def backend(record: EvalRecord) -> str:
  return "triton" if record.device == "gpu" and not record.interpret else "interpret (CPU)"


def compile_time_s(record: EvalRecord) -> float | None:
  """Cold trace + lower + compile seconds; None without a compile stage."""
  profile = record.compile
  if profile is None or profile.compile_s is None:
    return None
  return sum(s for s in (profile.trace_s, profile.lower_s, profile.compile_s) if s is not None)


def roofline_fraction(record: EvalRecord) -> float | None:
  """The larger of the compute and bandwidth fractions of the measured ceilings."""
  roof = record.roofline
  fractions = [] if roof is None else [f for f in (roof.frac_compute, roof.frac_bandwidth)
                                       if f is not None]
  return max(fractions) if fractions else None


def summary_row(gpu: EvalRecord, tpu: EvalRecord | None, trees: KernelTrees) -> SummaryRow:
  spec = TASKS[gpu.task]
  fix_applied, fix_reason = gpu_fix(trees, gpu.task)
  env = gpu.environment
  return SummaryRow(
      Op_Name=spec.name, Level_ID=spec.level, Task_ID=spec.task_id, Category=spec.category,
      Pallas_Runtime=gpu.runtime_ms, JAX_Baseline_Runtime=gpu.baseline_ms,
      Pallas_Speedup=gpu.speedup, Pallas_Code=trees.source("gpu", gpu.task),
      Pallas_Code_Original=trees.source("tpu", gpu.task), JAX_Baseline_Code=spec.reference_source,
      Correct=gpu.correct, Error=gpu.error, Target_Hardware=env.device_kind,
      Framework=f"JAX {env.jax} / Pallas", Backend=backend(gpu), Fix_Applied=fix_applied,
      Fix_Reason=fix_reason, Status=gpu.status.value, Robust=gpu.robust,
      General_Shapes=gpu.general_shapes, Max_Abs_Error=gpu.max_abs_error,
      Rel_L2_Error=gpu.rel_l2_error, Tolerance=gpu.tolerance, Compile_Time_s=compile_time_s(gpu),
      Roofline_Fraction=roofline_fraction(gpu), Timing_Method=gpu.timing_method,
      Original_Status=tpu.status.value if tpu else NOT_MEASURED,
      Original_Error=tpu.error if tpu else None,
      Original_Runtime=tpu.runtime_ms if tpu else None,
      Original_Speedup=tpu.speedup if tpu else None,
      Size=gpu.size, Input_Shapes=gpu.input_shapes, Corrections=spec.notes,
      JAX_Version=env.jax, Measured_At=gpu.measured_at)


def summary_rows(merged: Merged, trees: KernelTrees, headline: str) -> tuple[SummaryRow, ...]:
  """One row per task that has a GPU-kernel record at the headline size, in task-id order."""
  by_key: Mapping[Key, EvalRecord] = {(r.task, r.variant, r.size): r for r in merged.records}
  rows = [summary_row(r, by_key.get((r.task, "tpu", headline)), trees)
          for r in merged.records if r.variant == "gpu" and r.size == headline]
  return tuple(sorted(rows, key=lambda row: row.Task_ID))
