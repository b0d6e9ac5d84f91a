"""Fixture measuring runs for the builder tests: records, run folders and a small kernel tree.

Records are real `EvalRecord`s (built through the schema, then written as JSON lines the way
the evaluator writes them), so a schema change reaches these fixtures too.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from pallasbench_dataset import kernels
from pallasbench_dataset.schema import (
    Artifacts, CompileProfile, Environment, ErrorType, EvalRecord, FilterResult, Roofline, RunInfo,
    Status,
    to_json_dict)
from pallasbench_dataset.tasks import get_task

from builder.trees import KernelTrees

# One task per level at least, so the default config has all three splits.
TASKS = ("relu", "gelu", "matmul_relu", "flash_attention")

ENV = Environment(platform="gpu", device_kind="NVIDIA H200", hardware="h200",
                  compute_capability="9.0", driver="570.86", cuda="12.8", jax="0.11.2",
                  jaxlib="0.11.2", python="3.12.3", git_commit="0123456789abcdef")


def write_tree(root: pathlib.Path, tasks=TASKS) -> KernelTrees:
  """A tiny kernels_tpu/ + kernels_gpu/ pair; the GPU files carry FIX_APPLIED/FIX_REASON."""
  trees = KernelTrees(tpu=root / "kernels_tpu", gpu=root / "kernels_gpu")
  for d in (trees.tpu, trees.gpu):
    d.mkdir(parents=True, exist_ok=True)
    (d / "__init__.py").write_text("")
  for task in tasks:
    (trees.tpu / f"{task}.py").write_text(
        f'"""{task}, original."""\nTASK_NAME = "{task}"\nBLOCK = (1024, 1024)\n\n\n'
        "def kernel(*inputs, interpret=False):\n  raise NotImplementedError\n")
    (trees.gpu / f"{task}.py").write_text(
        f'"""{task}, fixed."""\nTASK_NAME = "{task}"\nFIX_APPLIED = "tile_{task}"\n'
        f'FIX_REASON = "blocks of {task} exceeded the Triton limit; tiled"\nBLOCK = (8, 1024)\n\n\n'
        "def kernel(*inputs, interpret=False):\n  raise NotImplementedError\n")
  return trees


def sha(trees: KernelTrees, variant: str, task: str) -> str:
  return kernels.sha256(trees.path(variant, task).read_text())


def run_info(gpu_index: int | None = 0, run_id: str = "run-medium", copy: float = 3900.0,
             read: float = 4000.0, matmul: float = 400.0) -> RunInfo:
  """A release-2 record's `run` field: the command, the GPU and the ceilings measured on it."""
  return RunInfo(command="python -m builder.regenerate --device gpu --results runs/h200",
                 run_id=run_id, gpu_index=gpu_index, ceiling_copy_gbps=copy,
                 ceiling_read_gbps=read, ceiling_matmul_tflops=matmul)


def record(trees: KernelTrees, task: str, variant: str = "gpu", size: str = "medium", *,
           runtime_ms: float | None = 0.5, baseline_ms: float | None = 1.0,
           eager_ms: float | None = None, status: Status = Status.PASS, correct: bool = True,
           error: str | None = None, device: str = "gpu", comparable: bool = True,
           kernel_sha256: str | None = None, **overrides: Any) -> EvalRecord:
  """A record as the judge writes it; `eager_ms` adds the eager baseline (release 2 on)."""
  spec = get_task(task)
  timed = runtime_ms is not None and baseline_ms is not None
  eager = runtime_ms is not None and eager_ms is not None
  fields: dict[str, Any] = dict(
      task=task, task_id=spec.task_id, level=spec.level, category=spec.category,
      variant=variant, size=size, input_shapes=tuple(str(s) for s in spec.input_shapes(size)),
      device=device, interpret=device == "cpu",
      kernel_sha256=kernel_sha256 or sha(trees, variant, task), status=status,
      error_type=None if error is None else ErrorType.COMPILE, error=error, reasons=(),
      correct=correct, robust=status == Status.PASS, general_shapes=True, seeds=(0, 1, 2, 3, 4),
      tolerance=spec.tolerance.kind.value, rtol=spec.tolerance.rtol, atol=spec.tolerance.atol,
      max_rel_l2=spec.tolerance.max_rel_l2, max_abs_error=1e-7, max_rel_error=1e-6,
      rel_l2_error=1e-7,
      filters=(FilterResult(name="output_std", passed=True, value=1.0, threshold=1e-5,
                            detail="std = 1"),),
      compile=CompileProfile(trace_s=0.1, lower_s=0.2, compile_s=0.7, jaxpr_bytes=1000,
                             triton_ir_bytes=2000, ptx_bytes=3000, pallas_calls=(),
                             lowers_triton=True, lowers_triton_error=None, lowers_tpu=None,
                             lowers_tpu_error=None),
      timing_method="cupti" if device == "gpu" else "wallclock", timing_comparable=comparable,
      timing_iterations=100, timing_input_sets=4, runtime_ms=runtime_ms, runtime_iqr_ms=0.01,
      runtime_samples_ms=(runtime_ms,) * 3 if runtime_ms is not None else (),
      baseline_ms=baseline_ms, baseline_iqr_ms=0.01,
      baseline_samples_ms=(baseline_ms,) * 3 if baseline_ms is not None else (),
      speedup=baseline_ms / runtime_ms if timed else None,
      roofline=Roofline(flops=spec.flops(size), bytes=spec.io_bytes(size),
                        achieved_tflops=spec.flops(size) / (runtime_ms * 1e9) if timed else None,
                        achieved_gbps=spec.io_bytes(size) / (runtime_ms * 1e6) if timed else None,
                        ceiling_tflops=400.0, ceiling_gbps=4000.0, frac_compute=0.1,
                        frac_bandwidth=0.5),
      environment=ENV, measured_at="2026-11-20T10:00:00+00:00", eval_wall_s=3.5,
      eager_baseline_ms=eager_ms, eager_baseline_iqr_ms=0.02 if eager_ms is not None else None,
      eager_baseline_samples_ms=(eager_ms,) * 3 if eager_ms is not None else (),
      speedup_eager=eager_ms / runtime_ms if eager else None)
  fields.update(overrides)
  return EvalRecord(**fields)


def manifest(tasks=TASKS, sizes=("medium",), variants=("tpu", "gpu"), **overrides) -> dict:
  """As pallasbench_dataset.evaluation.pipeline.suite.run_suite writes it (extra keys included)."""
  ceilings = {"copy_gbps": 3900.0, "read_gbps": 4000.0, "matmul_tflops": 400.0,
              "bandwidth_gbps": 4000.0, "method": "cupti: 1 GiB copy and read-only sum"}
  data = {"command": "python -m builder.regenerate --device gpu --out data",
          "argv": ["builder/regenerate.py", "--device", "gpu", "--out", "data"],
          "started_at": "2026-11-20T09:00:00+00:00",
          "finished_at": "2026-11-20T11:00:00+00:00", "git_commit": ENV.git_commit,
          "device": "gpu", "environment": to_json_dict(ENV), "ceilings": ceilings,
          "sizes": list(sizes), "variants": list(variants), "tasks": list(tasks),
          "devices": 1, "resumed_with": 0,
          "per_device": [{"device": "0", "environment": to_json_dict(ENV), "ceilings": ceilings}]}
  data.update(overrides)
  return data


def write_run(path: pathlib.Path, records, artifacts=(), **manifest_kwargs) -> pathlib.Path:
  path.mkdir(parents=True, exist_ok=True)
  (path / "manifest.json").write_text(json.dumps(manifest(**manifest_kwargs), indent=2))
  (path / "records.jsonl").write_text(
      "".join(json.dumps(to_json_dict(r)) + "\n" for r in records))
  if artifacts:
    (path / "artifacts.jsonl").write_text(
        "".join(json.dumps(to_json_dict(a)) + "\n" for a in artifacts))
  return path


def standard_records(trees: KernelTrees, size: str = "medium") -> list[EvalRecord]:
  """Both variants of every fixture task: gelu's fix fails, flash_attention's original fails."""
  out = []
  for i, task in enumerate(TASKS):
    out.append(record(trees, task, "gpu", size, runtime_ms=0.5 + 0.1 * i, baseline_ms=1.0))
    if task == "flash_attention":
      out.append(record(trees, task, "tpu", size, runtime_ms=None, baseline_ms=None,
                        status=Status.ERROR, correct=False,
                        error="Mosaic block shape (512, 512) exceeds the Triton limit"))
    else:
      out.append(record(trees, task, "tpu", size, runtime_ms=2.0, baseline_ms=1.0))
  out[2] = record(trees, "gelu", "gpu", size, runtime_ms=0.4, baseline_ms=1.0,
                  status=Status.INCORRECT, correct=False, error="not allclose at (3, 4)",
                  max_abs_error=float("inf"))  # NaN where the reference is finite
  return out


def artifacts_for(records) -> list[Artifacts]:
  """An artifacts line for each record, as the driver writes them with the judge's records."""
  return [Artifacts(task=r.task, variant=r.variant, size=r.size, jaxpr="{ lambda ; a. }",
                    stablehlo=f"module @{r.task}_{r.variant} {{}}", triton_ir=None, ptx=None)
          for r in records]
