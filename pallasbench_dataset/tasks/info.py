"""What a newcomer asks of the registry: which tasks there are, and what one of them is.

    python -m pallasbench_dataset.tasks            # every task, one a line
    python -m pallasbench_dataset.tasks softmax    # one task: inputs per size, tolerance, reference
    python -m pallasbench_dataset.tasks --precisions   # per task, its dtypes at each other precision
    python -m pallasbench_dataset.tasks --markdown > docs/tasks.md   # the registry as a page

Exit status 0, or 2 for an unknown task name.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pallasbench_dataset.inputs import InputSpec
from pallasbench_dataset.precision import FLOAT32, PRECISIONS, get_precision
from pallasbench_dataset.tasks import (
    HEADLINE_SIZE, LEVEL_SPLITS, Size, TaskSpec, get_task, input_family_rows, list_tasks)


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


def _tolerance_text(spec: TaskSpec) -> str:
  tol = spec.tolerance
  bound = f", L2 {tol.max_rel_l2:g}" if tol.max_rel_l2 is not None else ""
  return f"{spec.tolerance_class.value} (rtol {tol.rtol:g}, atol {tol.atol:g}{bound})"


def _output_why(low: TaskSpec, dtype: str) -> str:
  if low.output_dtype == FLOAT32 and all(i.dtype != dtype for i in low.inputs):
    return "integer inputs only: the task is its float32 one (the reference's float32 one-hot)"
  if low.output_dtype == FLOAT32:
    return f"the reference returns float32 on {dtype} inputs (it accumulates into float32)"
  return "as the reference returns it"


def precision_table(precision: str) -> str:
  """Markdown, one row per task: what changes at `precision` (TaskSpec.at_precision). Floating
  inputs take its dtype and integer ones stay; the output takes the dtype the reference
  returns on them, and the tolerance follows the output's dtype (tolerance.py)."""
  at = get_precision(precision)
  lines = [f"| # | task | {at.dtype} inputs | integer inputs | output | why | tolerance at "
           f"{at.name} | families left out |", "|---|---|---|---|---|---|---|---|"]
  for spec in list_tasks():
    low = spec.at_precision(at.name)
    floats = [i.name for i in low.inputs if i.dtype == at.dtype]
    ints = [f"{i.name} ({i.dtype})" for i in low.inputs if i.dtype != at.dtype]
    dropped = sorted({f.name for f in spec.families} - {f.name for f in low.families})
    lines.append(f"| {spec.task_id} | {spec.name} | {', '.join(floats) or '-'} | "
                 f"{', '.join(ints) or '-'} | {low.output_dtype} | {_output_why(low, at.dtype)} | "
                 f"{_tolerance_text(low)} | {', '.join(dropped) or '-'} |")
  return "\n".join(lines)


DOC_COMMAND = "python -m pallasbench_dataset.tasks --markdown > docs/tasks.md"


def _shapes(shape_at) -> str:
  return " / ".join(str(shape_at(size)) for size in Size)


def _input_cell(spec: TaskSpec, n: int, inp: InputSpec) -> str:
  dtype = "" if inp.dtype == FLOAT32 else f" {inp.dtype}"
  return f"`{inp.name}`{dtype} {_shapes(lambda size: spec.input_shapes(size)[n])}"


def _task_row(spec: TaskSpec) -> str:
  inputs = "; ".join(_input_cell(spec, n, inp) for n, inp in enumerate(spec.inputs))
  return (f"| {spec.task_id} | {spec.name} | {spec.category} | {inputs} | "
          f"{_shapes(spec.output_shape)} | {spec.tolerance_class.value} |")


def _tolerance_rows() -> list[str]:
  rows = ["| output dtype | class | rtol | atol | atol is a fraction of | relative L2 <= |",
          "|---|---|---|---|---|---|"]
  for dtype, classes in ((p.dtype, p.tolerances) for p in PRECISIONS.values()):
    rows += [f"| {dtype} | {kind.value} | {tol.rtol:g} | {tol.atol:g} | {tol.atol_scale.value} | "
             f"{'-' if tol.max_rel_l2 is None else f'{tol.max_rel_l2:g}'} |"
             for kind, tol in classes.items()]
  return rows


def markdown() -> str:
  """The registry as a Markdown page (docs/tasks.md): every task's inputs and output at every
  size, its tolerance class, the classes' limits, the notes and the input families."""
  specs = list_tasks()
  lines = ["# The tasks", "",
           f"Generated from the task registry (`pallasbench_dataset/tasks/`) by `{DOC_COMMAND}`;",
           "tests/tasks/test_registry.py checks that it is current. Edit the registry, not this "
           "page.",
           "",
           f"{len(specs)} tasks. A kernel is `kernel(*inputs, interpret=False)`, taking the "
           "inputs in the order listed.",
           "Inputs are float32 unless a dtype is named; shapes are at the sizes "
           f"{' / '.join(size.value for size in Size)} (headline: {HEADLINE_SIZE.value}).",
           "`python -m pallasbench_dataset.tasks NAME` prints one task with its reference "
           "(`pallasbench_dataset/references/NAME.py`, the JAX baseline)."]
  for level, split in sorted(LEVEL_SPLITS.items()):
    at_level = [s for s in specs if s.level == level]
    lines += ["", f"## Level {level} ({len(at_level)} tasks, split `{split}`)", "",
              "| # | task | category | inputs | output | tolerance |", "|---|---|---|---|---|---|"]
    lines += [_task_row(s) for s in at_level]
  lines += ["", "## Tolerance classes", "",
            "An element passes when |out - ref| <= atol_abs + rtol * |ref| (atol_abs: atol times "
            "the RMS of the reference; docs/tolerance.md says why); a task is judged by its "
            "class at its output's dtype.", "", *_tolerance_rows()]
  lines += ["", "## Notes", "", "What each task is, and where it corrects the public suite "
            "(`(corrected)`).", ""]
  lines += [f"- **{s.name}**: {s.notes}" for s in specs if s.notes]
  lines += ["", "## Input families", "", "Inputs beyond the nominal draw, checked like it.", "",
            "| task | family | inputs |", "|---|---|---|"]
  lines += [f"| {r['task']} | {r['family']} | {r['inputs']} |" for r in input_family_rows()]
  return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m pallasbench_dataset.tasks",
                                   description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("name", nargs="?", help="a task to show (default: list them all)")
  parser.add_argument("--precisions", action="store_true",
                      help="print, per task, its dtypes and tolerance at each precision but "
                      "the seed's (Markdown, a table each)")
  parser.add_argument("--markdown", action="store_true",
                      help=f"print the registry as a Markdown page ({DOC_COMMAND})")
  args = parser.parse_args(argv)
  if args.markdown:
    print(markdown(), end="")
    return 0
  if args.precisions:
    print("\n\n".join(precision_table(p.name) for p in PRECISIONS.values() if not p.seed))
    return 0
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
