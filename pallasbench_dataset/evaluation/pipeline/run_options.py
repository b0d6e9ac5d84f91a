"""The options every measuring command shares: the limits of an evaluation and where the
pipeline's stages run. `python -m builder.regenerate` and `python -m
pallasbench_dataset.population evaluate` both take them, with the same meaning and defaults.
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Final

from pallasbench_dataset.evaluate import DEFAULT_TIMEOUT_S
from pallasbench_dataset.evaluation.pipeline.cluster import default_plan
from pallasbench_dataset.evaluation.judge.process import Limits, default_memory_limit
from pallasbench_dataset.evaluation.pipeline.suite import ClusterOptions

DEFAULT_COMPILE_BUDGET_S: Final = {"gpu": 60.0, "cpu": 300.0}


class ListOption(argparse.Action):
  """A list option that takes its values separated by spaces, commas or both: `--tasks relu
  gelu`, `--tasks relu,gelu` and `--tasks relu, gelu` are the same. `choices` and `type` apply
  to each value."""

  def __init__(self, option_strings, dest, *, choices=None, type=str, **kwargs):  # pylint: disable=redefined-builtin
    self.allowed, self.convert = choices, type
    super().__init__(option_strings, dest, nargs="+", **kwargs)

  def __call__(self, parser, namespace, values, option_string=None):
    tokens = [t for value in values for t in value.replace(",", " ").split()]
    try:
      converted = [self.convert(t) for t in tokens]
    except ValueError:
      parser.error(f"argument {option_string}: {values} are not all {self.convert.__name__}s")
    bad = [t for t, v in zip(tokens, converted) if self.allowed is not None and v not in self.allowed]
    if not tokens:
      parser.error(f"argument {option_string}: expected at least one value")
    if bad:
      parser.error(f"argument {option_string}: invalid choice(s) {bad} (choose from "
                   f"{', '.join(map(str, self.allowed))}, separated by spaces or commas)")
    setattr(namespace, self.dest, converted)


def add_arguments(p: argparse.ArgumentParser) -> None:
  p.add_argument("--timeout", type=float,
                 help="seconds per export and per judge evaluation (default "
                      f"{DEFAULT_TIMEOUT_S['gpu']:.0f} GPU, {DEFAULT_TIMEOUT_S['cpu']:.0f} CPU)")
  p.add_argument("--compile-budget", type=float,
                 help="seconds per artifact in the compile stage; a compile that runs longer "
                      f"is a timeout record (default {DEFAULT_COMPILE_BUDGET_S['gpu']:.0f} GPU, "
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
