"""Does the sealed judge time what a direct call times? Exported artifact vs direct call.

    python -m benchmarks.judge_overhead --size medium [--tasks relu matmul] [--out FILE.json]

For each GPU-fixed kernel, in one process: the kernel jitted and called directly, and the
same kernel exported for cuda (as the exporter does), serialized, deserialized and called
(as the judge does), timed interleaved on the same input sets with the judge's timing
(CUPTI on a GPU). Prints one row per kernel and the largest deviation. Trusted code only:
it imports the project's own kernels.
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import statistics
import sys
import warnings
from collections.abc import Sequence


def measure(task: str, size: str, iterations: int) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.judge import timing  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.kernels import load_kernel  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.lowering import export_for  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.tasks import get_task  # pylint: disable=import-outside-toplevel
  spec = get_task(task)
  dims = spec.dims(size)
  kernel = functools.partial(load_kernel("gpu", task).kernel, interpret=False)
  structs = spec.input_structs(dims)
  blob = export_for("cuda", kernel, *structs).serialize()
  judged = jax.jit(jax.export.deserialize(bytearray(blob)).call)
  direct = jax.jit(kernel)
  sets = [spec.make_inputs(dims, seed) for seed in range(4)]
  method = timing.available_method()
  direct_t, judged_t = (t.samples for t in timing.time_interleaved(
      [direct, judged], [sets, sets], iterations=iterations, rounds=2, warmup=3, method=method))
  return {"task": task, "size": size, "method": method.value, "artifact_bytes": len(blob),
          "direct_ms": direct_t.median_ms, "judged_ms": judged_t.median_ms,
          "ratio": judged_t.median_ms / direct_t.median_ms}


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m benchmarks.judge_overhead", description=__doc__.split("\n\n")[0])
  p.add_argument("--size", default="medium")
  p.add_argument("--tasks", nargs="+", help="default: all")
  p.add_argument("--iterations", type=int, default=50)
  p.add_argument("--out", type=pathlib.Path, help="also write the rows as JSON")
  args = p.parse_args(argv)
  warnings.filterwarnings("ignore", message="The Pallas Triton backend is deprecated")
  from pallasbench_dataset.tasks import list_tasks  # pylint: disable=import-outside-toplevel
  tasks = args.tasks or [s.name for s in list_tasks()]
  rows = []
  print(f"{'task':<28} {'direct':>10} {'judged':>10} {'ratio':>7} {'bytes':>7}", flush=True)
  for task in tasks:
    try:
      row = measure(task, args.size, args.iterations)
    except Exception as e:  # pylint: disable=broad-except
      row = {"task": task, "size": args.size, "error": f"{type(e).__name__}: {e}"[:300]}
      print(f"{task:<28} error: {row['error']}", flush=True)
    else:
      print(f"{task:<28} {row['direct_ms'] * 1e3:>8.2f}us {row['judged_ms'] * 1e3:>8.2f}us "
            f"{row['ratio']:>7.3f} {row['artifact_bytes']:>7}", flush=True)
    rows.append(row)
  ratios = [r["ratio"] for r in rows if "ratio" in r]
  if ratios:
    worst = max(rows, key=lambda r: abs(r.get("ratio", 1.0) - 1.0))
    print(f"{len(ratios)} kernels: median ratio {statistics.median(ratios):.4f}, largest deviation "
          f"{worst['task']} {worst['ratio']:.4f}; within 5%: "
          f"{sum(abs(r - 1.0) <= 0.05 for r in ratios)}/{len(ratios)}")
  if args.out:
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
  return 0 if len(ratios) == len(rows) else 1


if __name__ == "__main__":
  sys.exit(main())
