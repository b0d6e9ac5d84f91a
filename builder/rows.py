"""The rows of the default config: one `SummaryRow` per task at the headline size, at float32;
and of the `bf16` config: the same table at bfloat16."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pallasbench_dataset import inputs
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.precision import DEFAULT_PRECISION
from pallasbench_dataset.schema import EvalRecord, SummaryRow
from pallasbench_dataset.tasks import TASKS, TaskSpec

from builder.records import Merged
from builder.trees import KernelTrees, gpu_fix

NOT_MEASURED = "not_measured"  # Original_Status when the run did not measure the original kernel


def backend(record: EvalRecord) -> str:
  """The Pallas backend(s) the judge found in the kernel's module ("triton", "mosaic_gpu");
  a GPU record that names none ran on Triton."""
  if record.device != "gpu" or record.interpret:
    return "interpret (CPU)"
  return "+".join(record.backends) or "triton"


def kernel_name(task: str) -> str:
  """The public rows' Kernel_Name of a GPU-fixed kernel."""
  return f"{task}_gpu_fixed"


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


# ---------------------------------------------------------------------------------------------
# JAX_Code_Functional: the reference module plus the task's inputs, runnable on its own.
#
# A dataset cell must run without this package, so the cell carries a copy of the module
# that draws the benchmark's inputs (`pallasbench_dataset/inputs.py`, less its __future__
# import, which may only open a file) and the task's input specs as that module's objects.

def _inputs_module_source() -> str:
  source = inspect.getsource(inputs)
  return source.replace("from __future__ import annotations\n", "", 1)


def _missing_imports(source: str) -> list[str]:
  """`import jax` / `import jax.numpy as jnp` lines the reference does not have at top level."""
  bound = {alias.asname or alias.name for node in ast.parse(source).body
           if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
  wanted = {"jax": "import jax", "jnp": "import jax.numpy as jnp"}
  return [line for name, line in wanted.items() if name not in bound]


def _with_imports(source: str, lines: list[str]) -> str:
  """`lines` inserted after the reference's last top-level import."""
  if not lines:
    return source
  body = ast.parse(source).body
  docstring = body[0].end_lineno if body and isinstance(body[0], ast.Expr) else 0
  last = max((n.end_lineno for n in body if isinstance(n, (ast.Import, ast.ImportFrom))),
             default=docstring)
  text = source.splitlines(keepends=True)
  return "".join(text[:last] + [line + "\n" for line in lines] + text[last:])


def functional_source(spec: TaskSpec, size: str) -> str:
  """The reference as a self-contained script: its module, then `get_inputs(seed)` drawing the
  task's inputs at `size` exactly as the benchmark does, and a `__main__` block running it."""
  dims = spec.dims(size)
  described = "\n".join(f"#   {item.name}: {item.dtype} {item.concrete_shape(dims)}, "
                        f"{item.dist.describe()}" for item in spec.inputs)
  footer = (
      f"\n\n# The inputs of task {spec.task_id} at the {size!r} size, drawn as PallasBench-Robust "
      f"draws them for a seed:\n{described}\n\n"
      f"{_inputs_module_source().rstrip()}\n\n\n"
      f"INPUTS = {spec.inputs!r}\n"
      f"DIMS = {dict(dims)!r}\n\n\n"
      "def get_inputs(seed=0):\n"
      f"  key = jax.random.fold_in(jax.random.key(seed), {spec.task_id})\n"
      "  return tuple(item.sample(jax.random.fold_in(key, i), DIMS) for i, item in enumerate(INPUTS))\n"
      "\n\n"
      "if __name__ == \"__main__\":\n"
      "  out = jax.jit(reference)(*get_inputs())\n"
      "  print(out.shape, out.dtype)\n")
  source = _with_imports(spec.reference_source, _missing_imports(spec.reference_source))
  return source.rstrip("\n") + "\n" + footer


# ---------------------------------------------------------------------------------------------
# Rows.

def _original(tpu: EvalRecord | None, field: Callable[[EvalRecord], Any]) -> Any:
  return field(tpu) if tpu is not None else None


def summary_row(gpu: EvalRecord, tpu: EvalRecord | None, trees: KernelTrees) -> SummaryRow:
  spec = TASKS[gpu.task].at_precision(gpu.precision)  # the inputs JAX_Code_Functional draws
  fix_applied, fix_reason = gpu_fix(trees, gpu.task)
  env = gpu.environment
  return SummaryRow(
      Op_Name=spec.name, Level_ID=spec.level, Task_ID=spec.task_id,
      Kernel_Name=kernel_name(spec.name), Category=spec.category,
      Pallas_Runtime=gpu.runtime_ms, JAX_Baseline_Runtime=gpu.baseline_ms,
      JAX_Native_Runtime=gpu.eager_baseline_ms, Pallas_Speedup=gpu.speedup,
      Pallas_Speedup_Native=gpu.speedup_eager, Pallas_Speedup_Compiled=gpu.speedup,
      Pallas_Code=trees.source("gpu", gpu.task),
      Pallas_Code_Original=trees.source("tpu", gpu.task), JAX_Baseline_Code=spec.reference_source,
      JAX_Code_Functional=functional_source(spec, gpu.size),
      Correct=gpu.correct, Error=gpu.error, Target_Hardware=env.device_kind,
      Framework=f"JAX {env.jax} / Pallas", Backend=backend(gpu), Fix_Applied=fix_applied,
      Fix_Reason=fix_reason, Status=gpu.status.value, Robust=gpu.robust,
      General_Shapes=gpu.general_shapes, Max_Abs_Error=gpu.max_abs_error,
      Rel_L2_Error=gpu.rel_l2_error, Tolerance=gpu.tolerance, Compile_Time_s=compile_time_s(gpu),
      Roofline_Fraction=roofline_fraction(gpu), Timing_Method=gpu.timing_method,
      Timing_L2_Resident=gpu.timing_l2_resident,
      Original_Status=tpu.status.value if tpu else NOT_MEASURED,
      Original_Error=_original(tpu, lambda r: r.error),
      Original_Runtime=_original(tpu, lambda r: r.runtime_ms),
      Original_Speedup_Native=_original(tpu, lambda r: r.speedup_eager),
      Original_Speedup_Compiled=_original(tpu, lambda r: r.speedup),
      Size=gpu.size, Input_Shapes=gpu.input_shapes, Corrections=spec.notes,
      JAX_Version=env.jax, Measured_At=gpu.measured_at)


def summary_rows(merged: Merged, trees: KernelTrees, headline: str,
                 precision: str = DEFAULT_PRECISION) -> tuple[SummaryRow, ...]:
  """One row per task that has a GPU-kernel record at the headline size and `precision`, in
  task-id order; its original's record is the one at the same size and precision."""
  by_key: Mapping[EvalKey, EvalRecord] = {EvalKey.of(r): r for r in merged.records}
  rows = [summary_row(r, by_key.get(EvalKey(r.task, "tpu", headline, precision)), trees)
          for r in merged.records
          if r.variant == "gpu" and r.size == headline and r.precision == precision]
  return tuple(sorted(rows, key=lambda row: row.Task_ID))
