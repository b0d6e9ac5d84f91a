"""One call of a candidate's artifact under a device memory checker (compute-sanitizer memcheck).

    compute-sanitizer --tool memcheck ... python -m pallasbench_dataset.evaluation.judge.memcheck \
        --task T --size S --precision P --seed N < artifact

A Pallas kernel on a GPU is raw pointer arithmetic: a ref in `memory_space=ANY` indexed at a
negative or past-the-end offset reads or writes whatever the allocator placed beside it. The
timing round leaves nothing of value there (`timing.retire`), and this asks the question
itself: the judge runs one call of each candidate's artifact in a process of its own under
memcheck, with XLA's platform allocator (one cudaMalloc per buffer: inside XLA's pooled arena an
access past a buffer lands in another buffer, where memcheck sees nothing), and records what
memcheck reports. This program is trusted: it reads the artifact's bytes (the header first),
compiles and runs them, and imports no candidate code.

Where the host has no compute-sanitizer (a CPU judge, a GPU host without the CUDA tools) the
record says so and the verdict does not depend on it; errors that memcheck reports reject the
kernel. A checked call that fails or runs past its budget is the kernel's doing, and rejects
it, where the task's own XLA reference (same size and precision, exported by the judge) runs
clean under memcheck on this host: else a kernel could stall or crash only when watched (its
own clock tells it) and pass unwatched. Where the reference does not run clean either, the
host's memcheck is what failed: the check is inconclusive and says why.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Final

from pallasbench_dataset.evaluation.judge import budgets

MEMCHECK_TIMEOUT_S: Final = budgets.MEMCHECK_RUN_S / 2  # a stage runs at most two checks
# Red zones after every allocation (compute-sanitizer's --padding): an access that lands in the
# buffer XLA placed next would be a valid access to memcheck; in a red zone it is an error.
MIN_PADDING_BYTES: Final = 16 << 20
ERROR_EXIT: Final = 86       # memcheck's exit status when it found errors
PRINT_LIMIT: Final = 10      # errors memcheck prints
DETAIL_CHARS: Final = 600
_PROGRAM: Final = (sys.executable, "-m", "pallasbench_dataset.evaluation.judge.memcheck")
_TOOLKITS: Final = pathlib.Path("/usr/local")  # cuda, cuda-13.0, ...


class Outcome(enum.StrEnum):
  CLEAN = "clean"               # the call ran and memcheck found no error
  ERRORS = "errors"             # memcheck found accesses outside the call's buffers
  UNAVAILABLE = "unavailable"   # no memcheck on this host
  INCONCLUSIVE = "inconclusive"  # it ran past its budget, or the program failed on its own
  FAILED = "failed"             # inconclusive where the task's reference runs clean: rejects


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Result:
  outcome: Outcome
  detail: str


def sanitizer() -> str | None:
  """The compute-sanitizer executable: on the PATH, in a CUDA toolkit under /usr/local, or in
  the pip wheel `nvidia-cuda-sanitizer-api` (under the `nvidia` package); None when the host
  has none."""
  found = shutil.which("compute-sanitizer")
  if found is not None:
    return found
  candidates = sorted(_TOOLKITS.glob("cuda*/bin/compute-sanitizer"))
  try:
    spec = importlib.util.find_spec("nvidia")
  except (ImportError, ValueError):
    spec = None
  for location in (spec.submodule_search_locations or ()) if spec is not None else ():
    candidates += sorted(pathlib.Path(location).glob("*/**/compute-sanitizer"))
  return next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def _first_errors(output: str) -> str:
  """memcheck's error lines ('========= Invalid __global__ read ...'), then its summary."""
  lines = [line.removeprefix("=========").strip() for line in output.splitlines()
           if line.startswith("=========")]
  errors = [line for line in lines if line.startswith(("Invalid", "Out-of-range", "Misaligned",
                                                       "Malloc", "Program hit", "Address"))]
  summary = [line for line in lines if line.startswith("ERROR SUMMARY")]
  return "; ".join(dict.fromkeys(errors[:3] + summary))[:DETAIL_CHARS]


def check(blob: bytes, *, task: str, size: str, precision: str, seed: int,
          padding_bytes: int = MIN_PADDING_BYTES, cache_dir: str | None = None,
          timeout_s: float = MEMCHECK_TIMEOUT_S) -> Result:
  """One call of the artifact on this host's GPU under memcheck (the judge's own GPU: the
  environment's CUDA_VISIBLE_DEVICES is inherited), every allocation followed by a red zone of
  `padding_bytes` (at least MIN_PADDING_BYTES), compiled from the judge's persistent
  compilation cache `cache_dir` where it has one."""
  tool = sanitizer()
  if tool is None:
    return Result(outcome=Outcome.UNAVAILABLE, detail="no compute-sanitizer on this host")
  # No Mosaic GPU dump in the checked process: its PTX would only fill the captured output.
  env = {**{k: v for k, v in os.environ.items() if not k.startswith("MOSAIC_GPU_DUMP")},
         "JAX_PLATFORMS": "cuda", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
         "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "CUDA_MODULE_LOADING": "LAZY",
         **({"JAX_COMPILATION_CACHE_DIR": cache_dir} if cache_dir else {})}
  command = [tool, "--tool", "memcheck", "--error-exitcode", str(ERROR_EXIT),
             "--print-limit", str(PRINT_LIMIT), "--report-api-errors", "no",
             "--padding", str(max(padding_bytes, MIN_PADDING_BYTES)), *_PROGRAM,
             "--task", task, "--size", size, "--precision", precision, "--seed", str(seed)]
  try:
    done = subprocess.run(command, input=blob, capture_output=True, env=env, timeout=timeout_s,
                          check=False)
  except subprocess.TimeoutExpired:
    return Result(outcome=Outcome.INCONCLUSIVE,
                  detail=f"memcheck ran past its budget of {timeout_s:g} s")
  output = (done.stdout + done.stderr).decode("utf-8", "replace")
  if done.returncode == ERROR_EXIT:
    return Result(outcome=Outcome.ERRORS, detail=_first_errors(output) or output[-DETAIL_CHARS:])
  if done.returncode != 0:
    return Result(outcome=Outcome.INCONCLUSIVE, detail=f"the checked call exited with "
                  f"{done.returncode}: {output.strip()[-DETAIL_CHARS:]}")
  return Result(outcome=Outcome.CLEAN, detail=_first_errors(output) or "no error")


def reference_blob(task: str, size: str, precision: str) -> bytes:
  """The task's XLA reference at (size, precision), exported for CUDA as candidates' artifacts
  are (`lowering.export_for`)."""
  from pallasbench_dataset.lowering import export_for  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.tasks import get_task  # pylint: disable=import-outside-toplevel
  spec = get_task(task).at_precision(precision)
  return bytes(export_for("cuda", spec.reference, *spec.input_structs(size)).serialize())


@functools.lru_cache(maxsize=64)
def control(task: str, size: str, precision: str, padding_bytes: int,
            cache_dir: str | None) -> Result:
  """The task's own reference through the same check: whether memcheck runs a trusted call of
  this task, size and precision cleanly on this host (once a judge process)."""
  return check(reference_blob(task, size, precision), task=task, size=size,
               precision=precision, seed=0, padding_bytes=padding_bytes, cache_dir=cache_dir)


def settle(found: Result, reference: Callable[[], Result]) -> Result:
  """`found` for a kernel, with an inconclusive check settled by `reference` (the task's own
  reference checked alike): FAILED where it runs clean, else inconclusive, saying why."""
  if found.outcome is not Outcome.INCONCLUSIVE:
    return found
  ref = reference()
  if ref.outcome is Outcome.CLEAN:
    return Result(outcome=Outcome.FAILED, detail=f"{found.detail}; the task's XLA reference "
                  "runs clean under memcheck on this host")
  return Result(outcome=Outcome.INCONCLUSIVE, detail=f"{found.detail}; the task's XLA reference "
                f"under memcheck: {ref.outcome}: {ref.detail}"[:2 * DETAIL_CHARS])


def main(argv: Sequence[str] | None = None) -> int:
  """The checked process: one call of the artifact on stdin, on the inputs of `--seed`."""
  p = argparse.ArgumentParser(prog=" ".join(_PROGRAM[1:]))
  p.add_argument("--task", required=True)
  p.add_argument("--size", required=True)
  p.add_argument("--precision", required=True)
  p.add_argument("--seed", type=int, required=True)
  args = p.parse_args(argv)
  import jax  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.judge.compile_profile import compile_exported  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.judge.artifact_header import check_header  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.tasks import get_task  # pylint: disable=import-outside-toplevel
  spec = get_task(args.task).at_precision(args.precision)
  dims = spec.dims(args.size)
  blob = sys.stdin.buffer.read()
  check_header(blob)  # the judge admitted this artifact; its header is read first all the same
  exported = jax.export.deserialize(bytearray(blob))
  compiled = compile_exported(exported, spec.input_structs(dims), None)
  jax.block_until_ready(compiled.executable(*spec.make_inputs(dims, args.seed)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
