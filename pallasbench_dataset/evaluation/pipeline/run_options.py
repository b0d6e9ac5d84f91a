"""The options every measuring command shares: the limits of an evaluation and where the
pipeline's stages run. `python -m builder.regenerate` and `python -m
pallasbench_dataset.population evaluate` both take them, with the same meaning and defaults.
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Final

from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.pipeline.cluster import default_plan
from pallasbench_dataset.evaluation.judge.process import DEFAULT_TIMEOUT_S, Limits, default_memory_limit
from pallasbench_dataset.evaluation.pipeline.suite import ClusterOptions

DEFAULT_COMPILE_BUDGET_S: Final = {device: budgets.budget_s(device, budgets.COMPILE)
                                   for device in ("gpu", "cpu")}


def add_arguments(p: argparse.ArgumentParser) -> None:
  p.add_argument("--timeout", type=float,
                 help="seconds per export and per judge evaluation (default "
                      f"{DEFAULT_TIMEOUT_S['gpu']:.0f} GPU, {DEFAULT_TIMEOUT_S['cpu']:.0f} CPU)")
  p.add_argument("--compile-budget", type=float,
                 help="seconds per artifact in the compile stage; a compile that runs longer "
                      f"is rejected, naming the stage (default {DEFAULT_COMPILE_BUDGET_S['gpu']:.0f} GPU, "
                      f"{DEFAULT_COMPILE_BUDGET_S['cpu']:.0f} CPU)")
  p.add_argument("--scheduler", metavar="ADDRESS",
                 help="an existing Dask scheduler (tcp://host:port) whose workers declare the "
                      "resources judge=1 (one per GPU) and cpu=1; default: a local cluster "
                      "on 127.0.0.1")
  p.add_argument("--gpus", type=int,
                 help="GPUs of the local cluster, one judge worker each (default: all)")
  p.add_argument("--cpu-workers", type=int,
                 help="export and compile workers of the local cluster (default: the cores the "
                      "judges leave, up to 16)")
  p.add_argument("--compile-cache", type=pathlib.Path, metavar="DIR",
                 help="JAX compilation cache the compile stage fills and the judges read "
                      "(default: a fresh folder per run; name a shared one with --scheduler)")
  p.add_argument("--git-commit", help="commit to record (default: the checkout's HEAD); for "
                                      "copies of the tree without .git")


def limits(args: argparse.Namespace, device: str) -> Limits:
  return Limits(timeout_s=args.timeout or DEFAULT_TIMEOUT_S[device],
                memory_bytes=default_memory_limit())


def cluster_options(args: argparse.Namespace, device: str) -> ClusterOptions:
  return ClusterOptions(
      plan=default_plan(device, args.gpus, args.cpu_workers), scheduler=args.scheduler,
      compile_budget_s=args.compile_budget or DEFAULT_COMPILE_BUDGET_S[device],
      compile_cache=args.compile_cache)
