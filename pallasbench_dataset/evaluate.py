"""Evaluate a candidate Pallas kernel against a task, robustly, in a separate process.

    python -m pallasbench_dataset.evaluate --task softmax --kernel my_softmax.py --json

Exit status 0 when the kernel passes (correct, a real Pallas kernel, robust), 1 when it
does not, 2 for bad arguments (unknown task, missing file, no GPU for --device gpu), 130
when interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import math
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Final

from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, run_items
from pallasbench_dataset.evaluation.errors import inert
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import (
    DEFAULT_TIMEOUT_S, JudgeConfig, Limits, default_memory_limit, make_dump_dir)
from pallasbench_dataset.kernels import CANDIDATE_FRAME, KernelLoadError, Variant, read_source
from pallasbench_dataset.precision import DEFAULT_PRECISION, PRECISIONS
from pallasbench_dataset.schema import EvalRecord, Status, to_json_dict
from pallasbench_dataset.tasks import Size, get_task

logger = logging.getLogger(__name__)

# The size an evaluation runs at unless told: the headline size on a GPU; on a CPU, where
# Pallas runs in interpret mode, the small one.
DEFAULT_SIZE: Final[Mapping[str, str]] = {"gpu": Size.MEDIUM.value, "cpu": Size.SMALL.value}
PRINTED_LINES: Final = 5  # of what the kernel printed, in the summary
# What to do about an error whose message says only what went wrong: (its text, the advice).
ADVICE: Final = (
    ("unexpected keyword argument 'interpret'",
     "the entry point takes `interpret`: define `def kernel(..., interpret: bool = False)` and "
     "pass it on to `pl.pallas_call(..., interpret=interpret)`"),
)
CPU_OPTIONS = EvalOptions(timing_iterations=5, timing_rounds=1, warmup=1)


def _installed(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is not None
  except ModuleNotFoundError:  # a dotted name whose parent package is absent
    return False


def gpu_available() -> bool:
  """A CUDA plugin for jax is installed and nvidia-smi lists a GPU (without touching CUDA here)."""
  plugin = any(_installed(name) for name in ("jax_cuda13_plugin", "jax_cuda12_plugin",
                                             "jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"))
  if not plugin or shutil.which("nvidia-smi") is None:
    return False
  try:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return False
  return out.returncode == 0 and "GPU" in out.stdout


def resolve_device(device: str, *, from_python: bool = False) -> str:
  """'auto' -> 'gpu' when one is usable, else 'cpu'; a clear error for an unusable 'gpu', in
  the caller's words: a command's flags, or with `from_python` the function's argument."""
  if device not in ("auto", "gpu", "cpu"):
    raise ValueError(f"device must be auto, gpu or cpu, not {device!r}")
  if device == "auto":
    return "gpu" if gpu_available() else "cpu"
  if device == "gpu" and not gpu_available():
    asked, other = (("device='gpu'", "pass device='cpu'") if from_python
                    else ("--device gpu", "use --device cpu"))
    raise RuntimeError(f"{asked}, but no usable NVIDIA GPU with a jax CUDA plugin was found "
                       f"(install with `pip install -e .[cuda13]`, or {other})")
  return device


def default_options(device: str) -> EvalOptions:
  return EvalOptions() if device == "gpu" else CPU_OPTIONS


def evaluate(task: str, kernel: str | pathlib.Path | None = None, *, source: str | None = None,
             size: str | None = None, device: str = "auto", timeout_s: float | None = None,
             options: EvalOptions | None = None,
             precision: str = DEFAULT_PRECISION) -> EvalRecord:
  """Evaluates a candidate defining `kernel(*inputs, interpret=False)`: the file `kernel` (a
  `pathlib.Path`, or a one-line str, to a .py file), or its source text (`source=`, or a
  `kernel` str of several lines, as docs/design.md's contract has it: no path holds a newline).

  The kernel is imported only by a sandboxed exporter process, which hands back `jax.export`
  artifacts; a separate judge process runs and judges those, with a wall-clock and a memory
  limit on each. Works from a plain script (the processes are started as programs). The
  kernel's failures come back as the record's status (`pass`, `incorrect`, `rejected`,
  `error`, `timeout`), never as exceptions. `size` defaults to medium on a GPU, small on the
  CPU. `precision` poses the task at float32 (the default) or bfloat16: its floating inputs in
  that dtype, its output as its reference returns it on them, the tolerances of that output's
  dtype (`TaskSpec.at_precision`); the record says which. Raises only for bad arguments
  (unknown task, size or precision, a path that is not a .py file).
  """
  spec = get_task(task).at_precision(precision)
  if size is not None:
    Size(size)
  text, filename = _candidate(kernel, source)
  device = resolve_device(device, from_python=True)
  item = WorkItem(task=spec.name, variant=Variant.CANDIDATE.value, size=size or DEFAULT_SIZE[device],
                  source=text, filename=filename, options=options or default_options(device),
                  precision=spec.precision)
  limits = Limits(timeout_s=timeout_s or DEFAULT_TIMEOUT_S[device],
                  memory_bytes=default_memory_limit())
  records: list[EvalRecord] = []
  run_items([item], JudgeConfig(device=device, git_commit=None, dump_dir=make_dump_dir(device)),
            limits, on_result=lambda record, _: records.append(record))
  return records[0]


def _candidate(kernel: str | pathlib.Path | None, source: str | None) -> tuple[str, str]:
  """(source text, display name) of the kernel given as a path or as source text."""
  if (kernel is None) == (source is None):
    raise ValueError("pass the kernel either as a path to its .py file (kernel=...) or as its "
                     "source text (source=...)")
  if source is not None:
    return source, "<kernel source>"
  if not isinstance(kernel, (str, pathlib.Path)):
    raise ValueError(f"kernel= is a path (pathlib.Path or str), not {type(kernel).__name__}")
  if isinstance(kernel, str) and "\n" in kernel:
    return kernel, "<kernel source>"
  return read_source(kernel)


def measurable(speedup: float) -> bool:
  """Whether `speedup` is a ratio two timings can give (finite and positive): a score or a
  reward pays no other (red team round 17: an infinite one would outrank every kernel)."""
  return math.isfinite(speedup) and speedup > 0


def summary_text(record: EvalRecord) -> str:
  def ms(v):
    return "-" if v is None else f"{v:.4g} ms"
  where = ", ".join([record.size] + [record.precision] * (record.precision != DEFAULT_PRECISION)
                    + [record.device])
  lines = [f"{record.task} [{where}]: {record.status.value}",
           f"  correct={record.correct} robust={record.robust} "
           f"general_shapes={record.general_shapes} max_abs_error={record.max_abs_error}",
           f"  kernel {ms(record.runtime_ms)}  baseline {ms(record.baseline_ms)}  "
           f"speedup {'-' if record.speedup is None else f'{record.speedup:.3g}x'}"
           + ("" if record.timing_comparable else "  (CPU interpret mode: not comparable)")]
  first, *rest = record.error.splitlines() if record.error else [None]
  # Said once: a failure's reason often quotes its error, which is printed below with its frame.
  lines += [f"  - {reason}" for reason in record.reasons if reason != first]
  if record.error:
    lines.append("  error: " + first)
    lines += [f"    {line}" for line in rest if line.startswith(CANDIDATE_FRAME)]
    lines += [f"  to fix: {advice}" for text, advice in ADVICE if text in record.error]
  if record.exporter_output:
    printed = record.exporter_output.splitlines()
    lines.append(f"  the kernel printed ({len(printed)} line(s)"
                 + (f", the last {PRINTED_LINES}" if len(printed) > PRINTED_LINES else "") + "):")
    lines += [f"    | {line}" for line in printed[-PRINTED_LINES:]]
  return inert("\n".join(lines))


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="python -m pallasbench_dataset.evaluate", description=__doc__.split("\n\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--task", required=True, help="task name, e.g. softmax")
  parser.add_argument("--kernel", required=True, type=pathlib.Path,
                      help="file defining kernel(*inputs, interpret=False)")
  parser.add_argument("--size", choices=[s.value for s in Size],
                      help="default: medium on a GPU, small on the CPU")
  parser.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"])
  parser.add_argument("--precision", default=DEFAULT_PRECISION, choices=PRECISIONS,
                      help="the dtype of the task's floating inputs (default float32)")
  parser.add_argument("--timeout", type=float, default=None, help="seconds (default 300 GPU, 900 CPU)")
  parser.add_argument("--seeds", type=int, nargs="+", default=None,
                      help="fixed seeds (default: 5 fresh random seeds)")
  parser.add_argument("--json", action="store_true", help="print the full record as JSON")
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  args = build_parser().parse_args(argv)
  logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
  try:
    device = resolve_device(args.device)
    options = default_options(device)
    if args.seeds:
      options = dataclasses.replace(options, seeds=tuple(args.seeds))
    record = evaluate(args.task, args.kernel, size=args.size, device=device,
                      timeout_s=args.timeout, options=options, precision=args.precision)
  except (KeyError, ValueError, RuntimeError, KernelLoadError) as e:
    print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print(f"interrupted: nothing was recorded; run the same command again to evaluate "
          f"{args.kernel}", file=sys.stderr)
    return 130
  print(json.dumps(to_json_dict(record), indent=1) if args.json else summary_text(record))
  return 0 if record.status is Status.PASS else 1


if __name__ == "__main__":
  sys.exit(main())
