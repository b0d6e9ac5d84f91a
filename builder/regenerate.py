"""Measure every kernel, build the dataset folder, and optionally publish it.

    python -m builder.regenerate                      # CPU: small size, interpret mode
    python -m builder.regenerate --device gpu --sizes medium large --measure-only --results R
    python -m builder.regenerate --from-results R1 R2 --out data
    python -m builder.regenerate --from-results R --push --repo-id ORG/pallasbench-robust-gpu-h200

Measuring needs only jax and numpy (the GPU machine has no `datasets`); building and
pushing import `datasets` and `huggingface_hub` only when they run.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import shlex
import sys
import time
from collections.abc import Sequence

from pallasbench_dataset.evaluate import DEFAULT_TIMEOUT_S, default_options, resolve_device
from pallasbench_dataset.evaluation.environment import git_commit
from pallasbench_dataset.evaluation.judge_process import Limits, default_memory_limit
from pallasbench_dataset.evaluation.suite import plan, run_suite
from pallasbench_dataset.tasks import Size, get_task, list_tasks

logger = logging.getLogger("builder.regenerate")

DEFAULT_OUT = pathlib.Path("build/dataset")
DEFAULT_SIZES = {"gpu": ("medium", "large"), "cpu": ("small",)}


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m builder.regenerate", description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"])
  p.add_argument("--sizes", nargs="+", choices=[s.value for s in Size],
                 help="default: medium and large on a GPU, small on the CPU")
  p.add_argument("--tasks", nargs="+", help="task names (default: all 45)")
  p.add_argument("--levels", nargs="+", type=int, choices=[1, 2, 3])
  p.add_argument("--variants", default="tpu,gpu", help="comma-separated: tpu (original), gpu (fixed)")
  p.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="dataset folder to build")
  p.add_argument("--results", type=pathlib.Path,
                 help="run folder for the records (default: a new <out>.runs/<device>-<time>)")
  p.add_argument("--resume", action="store_true", help="continue the run in --results")
  p.add_argument("--from-results", type=pathlib.Path, nargs="+", metavar="RUN",
                 help="build from existing run folders instead of measuring (first wins; "
                      "later runs of the same kernels feed the reproducibility table)")
  p.add_argument("--measure-only", action="store_true", help="measure, do not build")
  p.add_argument("--headline-size", choices=[s.value for s in Size],
                 help="size of the default config's rows (default: medium when measured, else "
                      "the first size measured)")
  p.add_argument("--allow-partial", action="store_true",
                 help="build even if the runs did not measure everything they planned; the "
                      "card lists what is missing")
  p.add_argument("--timeout", type=float, help="seconds per evaluation (default 300 GPU, 900 CPU)")
  p.add_argument("--gpus", type=int, default=1, help="GPUs to spread the work over")
  p.add_argument("--isolation", default="task", choices=["task", "run"],
                 help="a fresh judge process per task (default), or one per run, replaced "
                      "after any error")
  p.add_argument("--git-commit", help="commit to record (default: the checkout's HEAD); for "
                                      "copies of the tree without .git")
  p.add_argument("--push", action="store_true", help="publish the built folder to the Hub")
  p.add_argument("--repo-id", help="ORG/NAME (default: <your user>/pallasbench-robust-gpu-<hw>)")
  p.add_argument("--revision", help="branch to push to")
  p.add_argument("--create-pr", action="store_true")
  p.add_argument("--tag", help="tag the pushed commit")
  return p


def _measure(args, device: str) -> pathlib.Path:
  variants = [v.strip() for v in args.variants.split(",") if v.strip()]
  if not set(variants) <= {"tpu", "gpu"} or not variants:
    raise ValueError(f"--variants takes tpu and/or gpu, not {args.variants!r}")
  specs = [get_task(t) for t in args.tasks] if args.tasks else list_tasks(
      levels=tuple(args.levels) if args.levels else None)
  sizes = args.sizes or DEFAULT_SIZES[device]
  items = plan(specs, variants, sizes, default_options(device))
  if args.resume and not args.results:
    raise ValueError("--resume continues the run in --results: name that folder")
  stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
  run_dir = args.results or args.out.with_name(args.out.name + ".runs") / f"{device}-{stamp}"
  limits = Limits(timeout_s=args.timeout or DEFAULT_TIMEOUT_S[device],
                  memory_bytes=default_memory_limit())
  logger.info("measuring %d evaluations (%d tasks x %s x %s) on %s into %s", len(items),
              len(specs), sizes, variants, device, run_dir)
  return run_suite(items, run_dir, device=device, limits=limits,
                   git_commit=args.git_commit or git_commit(),
                   command=shlex.join(["python", "-m", "builder.regenerate", *sys.argv[1:]]),
                   resume=args.resume, devices=args.gpus, isolation=args.isolation)


def main(argv: Sequence[str] | None = None) -> int:
  args = build_parser().parse_args(argv)
  logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
  start = time.monotonic()
  try:
    headline = args.headline_size or "medium"
    if args.from_results:
      run_dirs = list(args.from_results)
    else:
      device = resolve_device(args.device)
      run_dirs = [_measure(args, device)]
      sizes = args.sizes or DEFAULT_SIZES[device]
      headline = args.headline_size or ("medium" if "medium" in sizes else sizes[0])
      logger.info("measured in %.0f s", time.monotonic() - start)
    if args.measure_only:
      return 0
    from builder.build import build_dataset  # pylint: disable=import-outside-toplevel
    summary = build_dataset(run_dirs, args.out, headline_size=headline,
                            repo_id=args.repo_id, allow_partial=args.allow_partial)
    print(summary.describe())
    if args.push:
      from builder.push import push_folder  # pylint: disable=import-outside-toplevel
      result = push_folder(args.out, args.repo_id or summary.default_repo_id(),
                           revision=args.revision, create_pr=args.create_pr, tag=args.tag)
      print(result.describe())
  except (ValueError, KeyError, RuntimeError, FileExistsError, FileNotFoundError) as e:
    print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
    return 2
  print(f"done in {time.monotonic() - start:.0f} s", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
