"""Measure every kernel, build the dataset folder, and optionally publish it.

    python -m builder.regenerate                      # CPU: small size, interpret mode
    python -m builder.regenerate --device gpu --measure-only --results R   # all GPUs, local Dask
    python -m builder.regenerate --device gpu --precisions float32,bfloat16 --results R
    python -m builder.regenerate --device gpu --scheduler tcp://HOST:8786 --results R
    python -m builder.regenerate --from-results R1 R2 --out data
    python -m builder.regenerate --from-results R --candidates POPULATION_RUN --out data
    python -m builder.regenerate --from-results R --push --repo-id ORG/pallasbench-robust-gpu-h200

Measuring needs jax, numpy and dask.distributed (the GPU machine has no `datasets`);
building and pushing import `datasets` and `huggingface_hub` only when they run.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import pathlib
import shlex
import sys
import time
from collections.abc import Sequence

from pallasbench_dataset.arguments import ListOption
from pallasbench_dataset.evaluate import default_options, resolve_device
from pallasbench_dataset.evaluation.pipeline import run_options
from pallasbench_dataset.evaluation.judge.environment import git_commit, gpu_name, hardware_slug
from pallasbench_dataset.evaluation.pipeline.suite import (
    Interrupted, plan, read_records, run_suite, unfinished_run)
from pallasbench_dataset.precision import DEFAULT_PRECISION, PRECISIONS
from pallasbench_dataset.tasks import Size, get_task, list_tasks

logger = logging.getLogger("builder.regenerate")

PROG = ("python", "-m", "builder.regenerate")
DEFAULT_OUT = pathlib.Path("build/dataset")
DEFAULT_SIZES = {"gpu": ("medium", "large"), "cpu": ("small",)}


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m builder.regenerate", description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"],
                 help="where the judges run (default: a GPU if jax sees one, else the CPU in "
                      "Pallas interpret mode)")
  p.add_argument("--sizes", action=ListOption, choices=[s.value for s in Size],
                 help="default: medium and large on a GPU, small on the CPU (list options take "
                      "their values separated by spaces or commas)")
  p.add_argument("--tasks", action=ListOption, help="task names (default: all 45)")
  p.add_argument("--levels", action=ListOption, type=int, choices=[1, 2, 3],
                 help="only the tasks of these levels (1 single ops, 2 fused, 3 architectures)")
  p.add_argument("--variants", action=ListOption, choices=["tpu", "gpu"],
                 default=["tpu", "gpu"], help="tpu (original), gpu (fixed); default both")
  p.add_argument("--precisions", action=ListOption, choices=PRECISIONS,
                 default=[DEFAULT_PRECISION],
                 help="the precisions to pose each task at, each the same tasks x variants x "
                      f"sizes (default {DEFAULT_PRECISION}; bfloat16 builds the `bf16` config)")
  p.add_argument("--memcheck", action="store_true",
                 help="also run one call of every kernel under compute-sanitizer's memcheck on a "
                      "GPU (off by default for the project's own trees: about 4.5 s more per "
                      "evaluation on an H200; a candidate judged by evaluate() always gets it)")
  p.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="dataset folder to build")
  p.add_argument("--results", type=pathlib.Path,
                 help="run folder for the records (default: a new <out>.runs/<device>-<time>)")
  p.add_argument("--resume", action="store_true", help="continue the run in --results")
  p.add_argument("--new-run", action="store_true",
                 help="start a new run even when an unfinished run of the same plan waits in "
                      "<out>.runs/ (without --results, such a run is resumed)")
  p.add_argument("--from-results", type=pathlib.Path, nargs="+", metavar="RUN",
                 help="build from existing run folders instead of measuring (first wins; "
                      "later runs of the same kernels feed the reproducibility table)")
  p.add_argument("--candidates", type=pathlib.Path, nargs="+", metavar="RUN", default=(),
                 help="population runs (python -m pallasbench_dataset.population evaluate) to "
                      "publish as the `candidates` config, beside the suite's configs")
  p.add_argument("--kernel-trees", type=pathlib.Path, metavar="DIR",
                 help="build with the kernels_tpu/ and kernels_gpu/ in DIR instead of this "
                      "checkout's: a released dataset folder holds the kernels its rows measured, "
                      "so it rebuilds after the checkout's kernels have moved on")
  p.add_argument("--source", type=pathlib.Path, metavar="PATH",
                 help="ship the project's source at the commit the runs were measured at: a git "
                      "checkout holding that commit (e.g. .), which is archived, or the tar "
                      "`git archive` made of it (a dataset folder's source/*.tar)")
  p.add_argument("--measure-only", action="store_true", help="measure, do not build")
  p.add_argument("--headline-size", choices=[s.value for s in Size],
                 help="size of the default config's rows (default: medium when measured, else "
                      "the first size the runs planned)")
  p.add_argument("--allow-partial", action="store_true",
                 help="build even if the runs did not measure everything they planned; the "
                      "card lists what is missing")
  run_options.add_arguments(p)
  p.add_argument("--push", action="store_true",
                 help="publish the built folder to the Hub (the token and repo id are checked "
                      "before anything is measured)")
  p.add_argument("--repo-id", help="ORG/NAME (default: <your user>/pallasbench-robust-gpu-<hw>)")
  p.add_argument("--revision", help="branch to push to (default: main)")
  p.add_argument("--create-pr", action="store_true",
                 help="open a pull request on the dataset repo instead of committing to the branch")
  p.add_argument("--tag", help="tag the pushed commit, e.g. v2")
  return p


def _measure(args, device: str, argv: Sequence[str]) -> pathlib.Path:
  specs = [get_task(t) for t in args.tasks] if args.tasks else list_tasks(
      levels=tuple(args.levels) if args.levels else None)
  sizes = args.sizes or DEFAULT_SIZES[device]
  options = dataclasses.replace(default_options(device), memcheck=args.memcheck)
  items = plan(specs, args.variants, sizes, options, args.precisions)
  run_dir, resume = args.results, args.resume
  if run_dir is None:
    runs = args.out.with_name(args.out.name + ".runs")
    waiting = None if args.new_run else unfinished_run(runs, items, device)
    if waiting is not None:
      logger.info("%s is an unfinished run of this plan: resuming it (--new-run starts afresh)",
                  waiting)
      run_dir, resume = waiting, True
    else:
      run_dir = runs / f"{device}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
  if run_dir.exists() and not run_dir.is_dir():
    raise ValueError(f"--results {run_dir} is a file, not a run folder: name a folder")
  logger.info("%d evaluations planned (%d tasks x %s x %s x %s) on %s into %s", len(items),
              len(specs), sizes, args.variants, args.precisions, device, run_dir)
  return run_suite(items, run_dir, device=device, limits=run_options.limits(args, device),
                   git_commit=args.git_commit or git_commit(),
                   command=shlex.join([*PROG, *argv]),
                   cluster_options=run_options.cluster_options(args, device), resume=resume)


def _check_arguments(args) -> None:
  """Combinations refused before anything is measured."""
  if args.resume and not args.results:
    raise ValueError("--resume continues the run in --results: name that folder")
  if args.measure_only and args.candidates:
    raise ValueError("--candidates publishes population runs in the built folder: leave out "
                     "--measure-only")
  unused = [f for f, v in (("--tag", args.tag), ("--revision", args.revision),
                           ("--create-pr", args.create_pr)) if v]
  if unused and not args.push:
    raise ValueError(f"{' and '.join(unused)} {'apply' if len(unused) > 1 else 'applies'} only "
                     f"to a push: add --push, or leave {'them' if len(unused) > 1 else 'it'} out")
  if not args.measure_only:
    from builder.build import check_out_dir  # pylint: disable=import-outside-toplevel
    check_out_dir(args.out)


def interpreter() -> str:
  """The Python running this command as a user types it: relative to the working folder when
  it lies below it (`.venv/bin/python`), else its absolute path. A bare `python` may be another
  interpreter, without this project's packages."""
  path = pathlib.Path(sys.executable)
  try:
    relative = path.relative_to(pathlib.Path.cwd())
  except ValueError:
    return str(path)
  return str(relative) if len(relative.parts) > 1 else f"./{relative}"


def resume_command(argv: Sequence[str], run_dir: pathlib.Path) -> str:
  """The command that continues an interrupted run: this one, resuming `run_dir`."""
  kept, skip = [], False
  for arg in argv:
    if skip or arg in ("--resume", "--new-run") or arg.startswith("--results="):
      skip = False
      continue
    if arg == "--results":
      skip = True
      continue
    kept.append(arg)
  return shlex.join([interpreter(), *PROG[1:], *kept, "--resume", "--results", str(run_dir)])


def build_command(args, run_dirs: Sequence[pathlib.Path]) -> str:
  """The command that builds (and pushes) what was measured, without measuring again."""
  parts = [interpreter(), *PROG[1:], "--from-results", *map(str, run_dirs), "--out", str(args.out)]
  for flag, value in (("--headline-size", args.headline_size), ("--kernel-trees", args.kernel_trees),
                      ("--source", args.source),
                      ("--repo-id", args.repo_id), ("--revision", args.revision),
                      ("--tag", args.tag)):
    parts += [flag, str(value)] if value else []
  if args.candidates:
    parts += ["--candidates", *map(str, args.candidates)]
  parts += [flag for flag, on in (("--allow-partial", args.allow_partial), ("--push", args.push),
                                  ("--create-pr", args.create_pr)) if on]
  return shlex.join(parts)


def _hardware(device: str) -> str | None:
  """The hardware slug of a run about to be measured (for the default repo id)."""
  if device == "cpu":
    return "cpu"
  name = gpu_name()
  return hardware_slug(name, "gpu") if name else None


def _preflight(args, hardware: str | None) -> str | None:
  """With --push: the token and repo id checked before anything is measured or built."""
  if not args.push:
    return args.repo_id
  if args.measure_only:
    raise ValueError("--push publishes a built folder: leave out --measure-only")
  from builder.push import preflight  # pylint: disable=import-outside-toplevel
  return preflight(args.repo_id, hardware=hardware, revision=args.revision,
                   create_pr=args.create_pr)


def main(argv: Sequence[str] | None = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  args = build_parser().parse_args(argv)
  logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
  start = time.monotonic()
  measured: list[pathlib.Path] = []
  try:
    _check_arguments(args)
    from builder.trees import KernelTrees  # pylint: disable=import-outside-toplevel
    trees = KernelTrees.within(args.kernel_trees) if args.kernel_trees else None
    if args.from_results:
      run_dirs = list(args.from_results)
      if args.push:  # the runs are read here only to name a default repo
        from builder.build import hardware_of  # pylint: disable=import-outside-toplevel
        repo_id = _preflight(args, None if args.repo_id else hardware_of(run_dirs))
      else:
        repo_id = args.repo_id
    else:
      device = resolve_device(args.device)
      repo_id = _preflight(args, _hardware(device))
      run_dirs = measured = [_measure(args, device, argv)]
      logger.info("measured in %.0f s", time.monotonic() - start)
    if args.measure_only:
      return 0
    from builder.build import build_dataset  # pylint: disable=import-outside-toplevel
    summary = build_dataset(run_dirs, args.out, headline_size=args.headline_size,
                            repo_id=repo_id, allow_partial=args.allow_partial,
                            candidate_runs=args.candidates, kernel_trees=trees,
                            source=args.source)
    print(summary.describe())
    if args.push:
      from builder.push import push_folder  # pylint: disable=import-outside-toplevel
      result = push_folder(args.out, repo_id or summary.default_repo_id(),
                           revision=args.revision, create_pr=args.create_pr, tag=args.tag)
      print(result.describe())
  except Interrupted as e:
    kept = len(read_records(e.run_dir))
    print(f"interrupted ({e}): the {kept} evaluation(s) measured are kept in {e.run_dir}; "
          f"continue with: {resume_command(argv, e.run_dir)}", file=sys.stderr)
    return 130
  except (ValueError, KeyError, RuntimeError, OSError) as e:
    print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
    if measured:
      print(f"the records measured are kept in {measured[0]}; once that is fixed, build them "
            f"without measuring again: {build_command(args, measured)}", file=sys.stderr)
    return 2
  print(f"done in {time.monotonic() - start:.0f} s", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
