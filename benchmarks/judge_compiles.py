"""How many XLA programs a judge's correctness checks compile, and their cold and warm seconds.

    python -m benchmarks.judge_compiles --tasks relu layernorm --sizes small medium \
        --precisions float32 bfloat16 [--[no-]gpu-steps] [--names] [--out FILE.json]

For each (task, size, precision), in a fresh process (spawned, the persistent compilation
cache off), the judge's checks as the judge runs them (`checks.run_candidate`, then
`checks.judge_outputs`: five seeds, the task's input families, the impact draws, the edge
shape), twice: `cold` is the first check of its kind in the process and compiles every
program of the judge's own it needs, `warm` the same check again. The candidate is the task's
XLA reference compiled ahead of time at both shapes, as the judge compiles a candidate's
artifact before its checks: every compile counted is the judge's own, whatever the kernel.
`--gpu-steps` adds the steps a GPU judge takes besides (poisoning the allocator, counting
unwritten elements), so that a CPU can count a GPU judge's programs.

A compile is counted by a `jax.monitoring` listener on JAX's backend-compile event
(`/jax/core/compile/backend_compile_duration`, recorded around every XLA compile, of a
jitted function or of one eager op, with the program's name and its seconds): it counts what
XLA compiled, not what was traced, and needs no log parsing (`jax_log_compiles` logs the same
event as text). A program served from the persistent cache fires the event too, so the cache
is switched off here to count compiles, not cache reads.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import json
import multiprocessing
import pathlib
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Final

import jax

BACKEND_COMPILE_EVENT: Final = "/jax/core/compile/backend_compile_duration"
SEEDS: Final = (1, 2, 3, 4, 5)


@contextlib.contextmanager
def compiles() -> Iterator[list[tuple[str, float]]]:
  """Collects (program name, seconds) of every XLA compile in the block."""
  seen: list[tuple[str, float]] = []

  def listener(event: str, duration: float, **kwargs) -> None:
    if event == BACKEND_COMPILE_EVENT:
      seen.append((kwargs.get("fun_name", "?"), duration))

  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    yield seen
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


def check_costs(task: str, size: str, precision: str, gpu_steps: bool | None = None) -> dict:
  """The compiles and seconds of one judge check, cold then warm, in this process; with
  `gpu_steps` (by default on a GPU backend) the GPU judge's own steps too: the allocator
  poisoned before each run, the elements left unwritten counted."""
  from pallasbench_dataset.evaluation.judge import checks  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.tasks import Size, get_task  # pylint: disable=import-outside-toplevel
  jax.config.update("jax_enable_compilation_cache", False)
  spec = get_task(task).at_precision(precision)
  dims, edge_dims = spec.dims(size), spec.dims(Size.EDGE)

  def candidate(d):
    return jax.jit(spec.reference).lower(*spec.input_structs(d)).compile()

  fn, edge_fn = candidate(dims), candidate(edge_dims)
  gpu_steps = jax.default_backend() == "gpu" if gpu_steps is None else gpu_steps
  row: dict = {"task": task, "size": size, "precision": precision, "gpu_steps": gpu_steps}
  for phase in ("cold", "warm"):
    with compiles() as seen:
      start = time.perf_counter()
      runs = checks.run_candidate(fn, spec, dims, SEEDS, on_gpu=gpu_steps,
                                  edge=(edge_fn, edge_dims))
      verdict = checks.judge_outputs(runs, spec, dims, edge_dims)
      seconds = time.perf_counter() - start
    if not verdict.correct or verdict.rejections:
      raise RuntimeError(f"{task}: the reference failed the checks: {verdict}")
    row |= {f"{phase}_compiles": len(seen), f"{phase}_compile_s": sum(s for _, s in seen),
            f"{phase}_s": seconds}
    if phase == "cold":
      row["programs"] = dict(collections.Counter(name for name, _ in seen).most_common())
  return row


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m benchmarks.judge_compiles",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--tasks", nargs="+", required=True)
  p.add_argument("--sizes", nargs="+", default=["small"])
  p.add_argument("--precisions", nargs="+", default=["float32"])
  p.add_argument("--gpu-steps", action=argparse.BooleanOptionalAction, default=None,
                 help="the GPU judge's own steps too (default: on a GPU backend)")
  p.add_argument("--names", action="store_true", help="also print the programs compiled cold")
  p.add_argument("--out", type=pathlib.Path, help="also write the rows as JSON")
  args = p.parse_args(argv)
  keys = [(t, s, q) for s in args.sizes for q in args.precisions for t in args.tasks]
  rows = []
  # One process per key, so that a key's cold check is cold whatever ran before it.
  with concurrent.futures.ProcessPoolExecutor(
      max_workers=1, mp_context=multiprocessing.get_context("spawn"),
      max_tasks_per_child=1) as pool:
    for key, future in [(k, pool.submit(check_costs, *k, args.gpu_steps)) for k in keys]:
      row = future.result()
      rows.append(row)
      shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()
               if k != "programs" or args.names}
      print(json.dumps(shown), flush=True)
  if args.out:
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
