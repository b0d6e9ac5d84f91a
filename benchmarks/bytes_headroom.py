"""How close the shipped kernels come to the module analysis' bytes budget.

    .venv/bin/python -m benchmarks.bytes_headroom [--sizes small medium large] [--variants gpu tpu]
        [--precision bfloat16]

Exports every kernel the way the exporter does (Triton, or Mosaic GPU, for an abstract H200;
the originals that do not lower for it through Mosaic for TPU, as a CPU judge reads them) and
prints, per (variant, task, size), the bytes plain XLA ops write per call and the bytes the
kernels return, each as a multiple of the task's own bytes and as a share of its limit, then the
largest of each. Runs on a CPU host; one export per line.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence

import jax

from pallasbench_dataset import Size, list_tasks
from pallasbench_dataset.evaluation.judge.module_analysis import (
    KERNEL_BYTES_LIMIT, OUTSIDE_BYTES_LIMIT, analyze_module, bytes_limit)
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.precision import DEFAULT_PRECISION


def _module(variant: str, task, size: str) -> tuple[str, str] | None:
  """(platform, module text) of the kernel's export for a device, or None when none lowers."""
  dims = task.dims(size)
  structs = [jax.ShapeDtypeStruct(i.concrete_shape(dims), i.dtype) for i in task.inputs]
  fn = functools.partial(load_kernel(variant, task.name).kernel, interpret=False)
  for platform in ("cuda", "tpu"):
    try:
      return platform, export_for(platform, fn, *structs).mlir_module()
    except Exception:  # pylint: disable=broad-except  (a kernel that does not lower there)
      continue
  return None


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m benchmarks.bytes_headroom")
  p.add_argument("--sizes", nargs="+", default=[Size.SMALL.value, Size.MEDIUM.value])
  p.add_argument("--variants", nargs="+", default=["gpu", "tpu"])
  p.add_argument("--precision", default=DEFAULT_PRECISION)
  args = p.parse_args(argv)
  worst = {"outside": (0.0, ""), "kernels": (0.0, "")}
  for variant in args.variants:
    for task in (t.at_precision(args.precision) for t in list_tasks()):
      for size in args.sizes:
        found = _module(variant, task, size)
        if found is None:
          print(f"{variant:4} {task.name:28} {size:7} no device export")
          continue
        platform, text = found
        report = analyze_module(text)
        own = task.io_bytes(size)
        row = f"{variant:4} {task.name:28} {size:7} {platform:5}"
        for name, written, factor in (("outside", report.outside_bytes, OUTSIDE_BYTES_LIMIT),
                                      ("kernels", report.kernel_bytes, KERNEL_BYTES_LIMIT)):
          share = written / bytes_limit(own, factor)
          row += f" {name} {written / own:6.2f}x own {share:6.1%} of limit"
          if share > worst[name][0]:
            worst[name] = (share, f"{variant} {task.name} {size}")
        print(row, flush=True)
  for name, (share, where) in worst.items():
    print(f"largest {name}: {share:.1%} of the limit ({where})")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
