"""Where a judge's correctness checks spend their time, step by step, cold and warm.

    python -m benchmarks.check_costs --tasks geglu add --sizes medium large [--out FILE.json]

For each GPU-fixed kernel (jitted directly: trusted code only), the steps of
`checks.run_candidate` and `checks.judge_outputs` timed one by one, twice in one process:
`cold` pays every first-use compile (inputs, references, comparisons), `warm` shows the
steady cost. Also the reference's cold compile with XLA's GPU autotuner on and off, since
the correctness reference is compiled at the highest matmul precision in every judge.
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import sys
import time
import warnings
from collections.abc import Callable, Sequence

SEEDS = (1, 2, 3, 4, 5)


def _timed(fn: Callable, *args):
  import jax  # pylint: disable=import-outside-toplevel
  start = time.perf_counter()
  out = jax.block_until_ready(fn(*args))
  return out, time.perf_counter() - start


def _steps(task: str, size: str) -> dict[str, float]:
  import numpy as np  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset import filters  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.judge import checks  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.kernels import load_kernel  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.tasks import Size, get_task  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.tolerance import compare  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  spec = get_task(task)
  dims, edge_dims = spec.dims(size), spec.dims(Size.EDGE)
  fn = jax.jit(functools.partial(load_kernel("gpu", task).kernel, interpret=False))
  t = {}
  _, t["draw_one_seed"] = _timed(spec.make_inputs, dims, SEEDS[0])
  runs, t["run_candidate"] = _timed(
      lambda: checks.run_candidate(fn, spec, dims, SEEDS, on_gpu=True, edge=(fn, edge_dims)))
  refs, t["references"] = _timed(
      lambda: [checks.expected(spec, spec.make_inputs(dims, s)) for s in SEEDS])
  start = time.perf_counter()
  comparisons = [compare(o, r, spec.tolerance) for o, r in zip(runs.outputs, refs)]
  t["compare"] = time.perf_counter() - start
  assert all(c.passed for c in comparisons), comparisons
  start = time.perf_counter()
  thr = filters.threshold(np.asarray(refs[0]))
  names = [i.name for i in spec.inputs]
  base = np.asarray(runs.outputs[0])
  first = [np.asarray(x) for x in spec.make_inputs(dims, SEEDS[0])]
  t["host_copies"] = time.perf_counter() - start
  start = time.perf_counter()
  filters.output_filters(base, first, names, thr)
  t["output_filters"] = time.perf_counter() - start
  start = time.perf_counter()
  filters.input_impact([np.asarray(o) for o in runs.impact_outputs], names, base, thr)
  t["input_impact"] = time.perf_counter() - start
  return t


def _reference_compile(task: str, size: str) -> dict[str, float]:
  import jax  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.tasks import get_task  # pylint: disable=import-outside-toplevel
  spec = get_task(task)
  structs = spec.input_structs(size)
  out = {}
  for name, options in (("autotune_default", {}), ("autotune_0", {"xla_gpu_autotune_level": 0})):
    with jax.default_matmul_precision("highest"):
      lowered = jax.jit(lambda *a: spec.reference(*a)).lower(*structs)  # a fresh cache entry
      start = time.perf_counter()
      lowered.compile(compiler_options=options)
      out[f"reference_compile_{name}"] = time.perf_counter() - start
  return out


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m benchmarks.check_costs",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--tasks", nargs="+", required=True)
  p.add_argument("--sizes", nargs="+", default=["medium"])
  p.add_argument("--out", type=pathlib.Path, help="also write the rows as JSON")
  args = p.parse_args(argv)
  warnings.filterwarnings("ignore", message="The Pallas Triton backend is deprecated")
  rows = []
  for size in args.sizes:
    for task in args.tasks:
      row = {"task": task, "size": size}
      try:
        row.update(_reference_compile(task, size))
        for phase in ("cold", "warm"):
          row.update({f"{phase}.{k}": v for k, v in _steps(task, size).items()})
      except Exception as e:  # pylint: disable=broad-except
        row["error"] = f"{type(e).__name__}: {e}"[:300]
      rows.append(row)
      print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}),
            flush=True)
  if args.out:
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
  return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
