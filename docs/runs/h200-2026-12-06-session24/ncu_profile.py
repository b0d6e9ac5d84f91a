"""What limits the contraction kernels that miss #37's 0.90x goal: one ncu profile of each
kernel's launches and of its jitted XLA baseline's, on the H200, at the tuned config.

    PYTHONPATH=. python3 docs/runs/h200-2026-12-06-session24/ncu_profile.py OUT [task:precision ...]

For each case a child process runs the fixed kernel and the task's reference (jitted, XLA) on
the `large` inputs, three calls each (the first compiles), under
`ncu --clock-control none` (METHOD.md: leave the clocks alone) with the sections that answer
"what bounds it": SpeedOfLight (compute and memory throughput against peak), Occupancy,
LaunchStats (registers, shared memory, grid), WarpStateStats (the stall that dominates).
Only the third call of each is profiled: the child brackets it with cudaProfilerStart/Stop
(ncu runs with --profile-from-start off), so XLA's own autotuning launches at compile time
are left out and every kernel of that call is in. Writes
OUT/ncu-<task>-<precision>.csv (ncu --csv --page details) and OUT/ncu-<task>-<precision>.log.
"""
import os
import pathlib
import shutil
import subprocess
import sys

DEFAULT = ("qk_softmax:bfloat16", "batched_matmul:float32", "linear_bias_relu:float32",
           "matmul:float32")
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "MemoryWorkloadAnalysis")


def child(task: str, precision: str) -> None:
  import ctypes
  import jax
  from pallasbench_dataset.kernels import load_kernel
  from pallasbench_dataset.tasks import get_task

  spec = get_task(task).at_precision(precision)
  inputs = spec.make_inputs("large", 0)
  module = load_kernel("gpu", task)
  cudart = _cudart()
  for name, fn in (("kernel", jax.jit(module.kernel)), ("xla", jax.jit(spec.reference))):
    for call in range(3):
      if call == 2:
        cudart.cudaProfilerStart()
      jax.block_until_ready(fn(*inputs))
      if call == 2:
        cudart.cudaProfilerStop()
    print(f"{name} done", flush=True)


def _cudart():
  """The CUDA runtime: on the loader's path, else from the nvidia-* wheels beside jax."""
  import ctypes
  import importlib.util
  names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
  spec = importlib.util.find_spec("nvidia")
  for location in (spec.submodule_search_locations or ()) if spec else ():
    names += [str(p) for p in sorted(pathlib.Path(location).glob("**/libcudart.so*"))]
  for name in names:
    try:
      return ctypes.CDLL(name)
    except OSError:
      continue
  sys.exit("no libcudart")


def ncu() -> str:
  found = shutil.which("ncu")
  if found:
    return found
  roots = sorted(pathlib.Path("/opt/nvidia").glob("nsight-compute/*/ncu"))
  roots += sorted(pathlib.Path("/usr/local").glob("cuda*/bin/ncu"))
  if not roots:
    sys.exit("no ncu on this host")
  return str(roots[-1])


def main() -> None:
  if sys.argv[1] == "--child":
    child(*sys.argv[2].split(":"))
    return
  out = pathlib.Path(sys.argv[1])
  cases = sys.argv[2:] or DEFAULT
  tool = ncu()
  print("ncu:", tool, flush=True)
  for case in cases:
    task, precision = case.split(":")
    stem = out / f"ncu-{task}-{precision}"
    command = [tool, "--clock-control", "none", "--profile-from-start", "off", "--csv",
               "--page", "details", *(a for s in SECTIONS for a in ("--section", s)),
               sys.executable, __file__, "--child", case]
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240,
                          check=False)
    stem.with_suffix(".csv").write_text(done.stdout)
    stem.with_suffix(".log").write_text(done.stderr)
    print(case, "rc", done.returncode, "csv lines", done.stdout.count("\n"), flush=True)
    print(done.stderr[-800:], flush=True)


if __name__ == "__main__":
  main()
