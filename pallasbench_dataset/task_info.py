"""What a newcomer asks of the registry: which tasks there are, and what one of them is.

    python -m pallasbench_dataset.tasks            # the 45 tasks, one a line
    python -m pallasbench_dataset.tasks softmax    # one task: inputs per size, tolerance, reference

Exit status 0, or 2 for an unknown task name.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pallasbench_dataset.tasks import HEADLINE_SIZE, Size, TaskSpec, get_task, list_tasks


def listing() -> str:
  """One line per task, in task-id order: id, name, level, category, tolerance class."""
  lines = [f"{'id':>3}  {'task':<28} {'level':<6} {'category':<16} tolerance"]
  lines += [f"{s.task_id:>3}  {s.name:<28} {s.level:<6} {s.category:<16} {s.tolerance_class.value}"
            for s in list_tasks()]
  lines.append(f"{len(lines) - 1} tasks; `python -m pallasbench_dataset.tasks NAME` shows one")
  return "\n".join(lines)


def describe(spec: TaskSpec) -> str:
  """One task: its inputs (name, dtype, shape at every size), output, tolerance and notes, then
  the reference's source (the dataset's JAX_Baseline_Code)."""
  tol = spec.tolerance
  lines = [f"{spec.name} (task {spec.task_id}, level {spec.level}, {spec.category})",
           f"  entry point: kernel({', '.join(i.name for i in spec.inputs)}, interpret=False)",
           "  inputs:"]
  for n, inp in enumerate(spec.inputs):
    shapes = ", ".join(f"{size.value} {spec.input_shapes(size)[n]}" for size in Size)
    lines.append(f"    {inp.name}: {inp.dtype}; {shapes}")
  outputs = ", ".join(f"{size.value} {spec.output_shape(size)}" for size in Size)
  lines.append(f"  output: {spec.output_dtype}; {outputs}")
  lines.append(f"  headline size: {HEADLINE_SIZE.value}")
  bound = f", relative L2 <= {tol.max_rel_l2:g}" if tol.max_rel_l2 is not None else ""
  lines.append(f"  tolerance: {spec.tolerance_class.value} (rtol {tol.rtol:g}, atol "
               f"{tol.atol:g}{bound})")
  if spec.notes:
    lines.append(f"  notes: {spec.notes}")
  lines += ["", f"reference (pallasbench_dataset/references/{spec.name}.py):", "",
            spec.reference_source.rstrip()]
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m pallasbench_dataset.tasks",
                                   description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("name", nargs="?", help="a task to show (default: list them all)")
  args = parser.parse_args(argv)
  if args.name is None:
    print(listing())
    return 0
  try:
    spec = get_task(args.name)
  except KeyError as e:
    print(f"error: {e.args[0]}", file=sys.stderr)
    return 2
  print(describe(spec))
  return 0
