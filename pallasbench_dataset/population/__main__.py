"""Populations of candidate kernels: make one from the suite, evaluate one on the pipeline.

    python -m pallasbench_dataset.population generate --out pop [--count 500] [--seed 0]
    python -m pallasbench_dataset.population evaluate --candidates pop/candidates.jsonl \\
        --out runs/pop [--size medium] [--device auto] [--scheduler ADDRESS] [--gpus N] [--resume]

Candidates come as a JSON Lines file (one {"task", "source", "id"?, "parent"?, "kind"?} a
line) or a folder of <task>/<name>.py files. `evaluate` writes a run folder (records.jsonl
in the dataset's schema, one per candidate) and reuses the verdicts of sources judged before
on the same machine (--cache DIR). Exit status: 0 when every candidate has a record (whatever
its verdict), 2 for bad arguments or input, 130 when interrupted (continue with --resume).
"""

from __future__ import annotations

import argparse
import collections
import logging
import pathlib
import shlex
import sys
from collections.abc import Sequence
from typing import Final

from pallasbench_dataset.arguments import ListOption
from pallasbench_dataset.evaluate import resolve_device
from pallasbench_dataset.evaluation.pipeline import run_options
from pallasbench_dataset.evaluation.pipeline.suite import Interrupted
from pallasbench_dataset.evaluation.pipeline.verdicts import VerdictCache, default_folder
from pallasbench_dataset.population.candidates import CANDIDATES, read_candidates, to_jsonl
from pallasbench_dataset.population.generate import generate
from pallasbench_dataset.population.run import evaluate_as_asked
from pallasbench_dataset.tasks import Size

PROG: Final = "python -m pallasbench_dataset.population"


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = p.add_subparsers(dest="command", required=True)
  g = sub.add_parser("generate", help="write a deterministic population made from the suite")
  g.add_argument("--out", type=pathlib.Path, required=True,
                 help=f"folder to write {CANDIDATES} into")
  g.add_argument("--count", type=int, default=500, help="candidates (default 500)")
  g.add_argument("--seed", type=int, default=0, help="another seed, another population")
  g.add_argument("--tasks", action=ListOption,
                 help="task names, separated by spaces or commas (default: all)")
  e = sub.add_parser("evaluate", help="evaluate a population into a run folder")
  e.add_argument("--candidates", type=pathlib.Path, metavar="FILE_OR_DIR",
                 help="a JSON Lines file or a folder of <task>/<name>.py (with --resume: "
                      "default the run's own)")
  e.add_argument("--out", type=pathlib.Path, required=True, help="the run folder")
  e.add_argument("--size", choices=[s.value for s in Size],
                 help="default: medium on a GPU, small on the CPU")
  e.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"],
                 help="where the judges run (default: a GPU if one is usable, else the CPU in "
                      "Pallas interpret mode)")
  e.add_argument("--resume", action="store_true", help="continue the run in --out")
  e.add_argument("--cache", type=pathlib.Path, metavar="DIR",
                 help=f"the verdict cache (default {default_folder()})")
  e.add_argument("--no-cache", action="store_true",
                 help="judge every candidate, and keep no verdict")
  run_options.add_arguments(e)
  return p


def _generate(args) -> int:
  candidates = generate(args.count, seed=args.seed, tasks=args.tasks)
  args.out.mkdir(parents=True, exist_ok=True)
  (args.out / CANDIDATES).write_text(to_jsonl(candidates), encoding="utf-8")
  kinds = collections.Counter(c.kind for c in candidates)
  print(f"wrote {len(candidates)} candidates ({', '.join(f'{k} {n}' for k, n in kinds.items())})"
        f" to {args.out / CANDIDATES}")
  return 0


def _evaluate(args, argv: Sequence[str]) -> int:
  if args.cache and args.no_cache:
    raise ValueError("--cache names the verdict cache, --no-cache turns it off: pass one")
  candidates = read_candidates(args.candidates) if args.candidates else None
  summary = evaluate_as_asked(
      args, resolve_device(args.device), candidates, args.out,
      command=shlex.join([*PROG.split(), *argv]),
      cache=None if args.no_cache else VerdictCache(args.cache or default_folder()),
      resume=args.resume)
  print(summary.describe())
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  args = build_parser().parse_args(argv)
  logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
  try:
    return _generate(args) if args.command == "generate" else _evaluate(args, argv)
  except Interrupted as e:
    again = [*PROG.split(), *argv] + ([] if args.resume else ["--resume"])
    print(f"interrupted ({e}): what was measured is kept in {e.run_dir}; continue with: "
          f"{shlex.join(again)}", file=sys.stderr)
    return 130
  except (ValueError, KeyError, RuntimeError, OSError) as e:
    print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
