"""How fast does the pipeline judge a population, and does the judge catch every cheat?

    python -m benchmarks.population_throughput --out DIR [--count 500] [--size medium]
        [--device gpu] [--gpus N] [--resume] [--json FILE]

Generates the deterministic population (`pallasbench_dataset.population.generate`: 60%
tuning, 20% broken, 20% cheat mutations of the fixed kernels) into DIR/candidates.jsonl,
evaluates it into DIR/run with a verdict cache of its own (DIR/verdicts, empty at first),
then submits the same population again into DIR/again, where every verdict comes from the
cache. Prints evaluations per GPU-minute (the judges' wall time), cache hits and verdicts
by kind. Exit status: 0, or 1 when a cheat or a broken candidate passed (a hole in the
judge), 2 for bad arguments, 130 when interrupted (run it again with --resume).

On the GPU machine (jax 0.11.2 and numpy; Dask travels as wheels in .whl/, as for
scripts/gpu_run.sh), each command within the device's time limit, DIR a folder that
outlives the command (inside the checkout, not $OUT):

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH="$PWD:/tmp/site"
    timeout --signal=TERM 540 python3 -m benchmarks.population_throughput --out .devrun/pop \
        --git-commit SHA
    timeout --signal=TERM 540 python3 -m benchmarks.population_throughput --out .devrun/pop \
        --git-commit SHA --resume
    # ... --resume again until it prints the second pass and "cheat that passed: none"

(--git-commit: the device's copy of the tree carries a stale .git, so name the commit.)
Trusted code only runs here; the candidates run in the pipeline's sandboxed exporter.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import pathlib
import shlex
import sys
from collections.abc import Sequence

from pallasbench_dataset.evaluate import resolve_device
from pallasbench_dataset.evaluation.pipeline import run_options
from pallasbench_dataset.evaluation.pipeline.suite import Interrupted
from pallasbench_dataset.evaluation.pipeline.verdicts import VerdictCache
from pallasbench_dataset.population.candidates import (
    CANDIDATES, Candidate, PopulationError, read_candidates, to_jsonl)
from pallasbench_dataset.population.generate import generate
from pallasbench_dataset.population.run import Summary, evaluate_as_asked
from pallasbench_dataset.tasks import Size

PROG = "python -m benchmarks.population_throughput"


def _population(args) -> list[Candidate]:
  """The generated population, written once; a resumed benchmark must find the same one."""
  population = generate(args.count, seed=args.seed, tasks=args.tasks)
  path = args.out / CANDIDATES
  if path.is_file():
    if read_candidates(path) != population:
      raise PopulationError(f"{path} holds another population (other --count, --seed or "
                            "--tasks); use another --out")
  else:
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(to_jsonl(population), encoding="utf-8")
  return population


def _judged(args, device: str, population: Sequence[Candidate], run_dir: pathlib.Path,
            argv: Sequence[str]) -> Summary:
  return evaluate_as_asked(args, device, population, run_dir,
                           command=shlex.join([*PROG.split(), *argv]),
                           cache=VerdictCache(args.out / "verdicts"),
                           resume=(run_dir / CANDIDATES).is_file())


def report(population: Sequence[Candidate], first: Summary, again: Summary) -> dict:
  rate = first.per_judge_minute
  return {
      "candidates": len(population),
      "kinds": dict(collections.Counter(c.kind for c in population)),
      "hardware": first.hardware,
      "first_pass": {"measured": first.measured, "cached": first.cached,
                     "wall_s": round(first.wall_s, 1),
                     "gpu_minutes": round(first.judge_minutes, 2),
                     "evaluations_per_gpu_minute": None if rate is None else round(rate, 3),
                     "by_kind": {k: dict(v) for k, v in first.by_kind.items()}},
      "again": {"cache_hits": again.cached, "measured": again.measured,
                "wall_s": round(again.wall_s, 1)},
      "passed": {kind: list(ids) for kind, ids in first.holes.items()}}


def _print(data: dict) -> None:
  first, again = data["first_pass"], data["again"]
  kinds = ", ".join(f"{k} {n}" for k, n in data["kinds"].items())
  print(f"population: {data['candidates']} candidates ({kinds}) on {data['hardware']}")
  print(f"first pass: {first['measured']} evaluated, {first['cached']} from the cache, "
        f"{first['wall_s']:.0f} s, {first['gpu_minutes']:.1f} GPU-minutes: "
        f"{first['evaluations_per_gpu_minute']} evaluations per GPU-minute")
  for kind, statuses in first["by_kind"].items():
    print(f"  {kind}: " + ", ".join(f"{s} {n}" for s, n in statuses.items()))
  print(f"again: {again['cache_hits']} of {data['candidates']} from the verdict cache, "
        f"{again['measured']} evaluated, {again['wall_s']:.0f} s")
  for kind, ids in data["passed"].items():
    print(f"{kind} that passed: {', '.join(ids) or 'none'}")


def main(argv: Sequence[str] | None = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
  p.add_argument("--out", type=pathlib.Path, required=True,
                 help="the benchmark's folder (population, runs, verdict cache)")
  p.add_argument("--count", type=int, default=500, help="candidates (default 500)")
  p.add_argument("--seed", type=int, default=0, help="the population's seed")
  p.add_argument("--tasks", nargs="+", help="task names (default: all)")
  p.add_argument("--size", choices=[s.value for s in Size],
                 help="default: medium on a GPU, small on the CPU")
  p.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"],
                 help="where the judges run (default: a GPU if one is usable)")
  p.add_argument("--resume", action="store_true", help="continue the benchmark in --out")
  p.add_argument("--json", type=pathlib.Path, help="also write the numbers as JSON")
  run_options.add_arguments(p)
  args = p.parse_args(argv)
  logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
  try:
    if (args.out / "run").exists() and not args.resume:
      raise FileExistsError(f"{args.out} holds a benchmark: pass --resume to continue it, or "
                            "choose another --out")
    device = resolve_device(args.device)
    population = _population(args)
    first = _judged(args, device, population, args.out / "run", argv)
    again = _judged(args, device, population, args.out / "again", argv)
  except Interrupted as e:
    print(f"interrupted ({e}): continue with --resume", file=sys.stderr)
    return 130
  except (ValueError, KeyError, RuntimeError, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  data = report(population, first, again)
  _print(data)
  if args.json:
    args.json.write_text(json.dumps(data, indent=1) + "\n")
  return 1 if any(first.holes.values()) else 0


if __name__ == "__main__":
  sys.exit(main())
