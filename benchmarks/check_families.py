"""Every fixed kernel and every XLA baseline on every input family, at both precisions.

    python benchmarks/check_families.py [--size small] [TASK ...]

On this machine's default backend (a CPU: interpret mode), at `--size`: for each task, each
precision and each family kept there, the kernels_gpu kernel and the jitted reference run on
the family's inputs (seed 17) and are compared with the float64 reference at the task's
tolerance. One line per (task, precision, family, runner), then the count of failures;
exit status 1 if any failed.
"""

import argparse
import sys
import time

import jax

from pallasbench_dataset import list_tasks
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.precision import PRECISIONS
from pallasbench_dataset.tolerance import compare

SEED = 17


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--size", default="small")
  parser.add_argument("tasks", nargs="*")
  args = parser.parse_args(argv)
  interpret = jax.default_backend() == "cpu"
  failures = checked = 0
  start = time.monotonic()
  for spec in list_tasks():
    if args.tasks and spec.name not in args.tasks:
      continue
    kernel = load_kernel("gpu", spec.name).kernel
    runners = {"kernels_gpu": lambda *a: kernel(*a, interpret=interpret),
               "xla": jax.jit(spec.reference)}
    for precision in PRECISIONS:
      task = spec.at_precision(precision)
      for family in task.families:
        inputs = task.family_inputs(family, args.size, SEED)
        want = task.expected(*inputs)
        for runner, fn in runners.items():
          result = compare(fn(*inputs), want, task.tolerance)
          checked += 1
          failures += not result.passed
          print(f"{spec.name} {precision} {family.name} {runner}: "
                f"{'pass' if result.passed else 'FAIL ' + str(result.reason)}", flush=True)
  print(f"{checked} checks, {failures} failed, {time.monotonic() - start:.0f} s")
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
