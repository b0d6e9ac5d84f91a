"""Which XLA dump flags leave a Pallas Triton kernel's PTX in the dump folder, and at what cost.

Run on a GPU machine (the device tool): `python3 scripts/ptx_dump_probe.py`. For each candidate
value of `--xla_dump_emitter_re` (none, each emitter name of XLA's Triton path, everything), a
fresh process compiles the fixed relu and matmul kernels at `medium` under the judge's own dump
flags plus that value, and the probe prints every file the dump holds with its size, and
whether a `.ptx` file holds the kernel's entry; and how many PTX texts (with an entry) the
compiled executable's serialized form holds (`compile_profile.ptx_in_executable`, which needs
no dump at all). The judge keeps whichever captures the PTX without per-pass snapshots;
docs/measurements.md logs the output.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

EMITTER_VALUES = (None, "triton-fusion", "triton-to-llvm", "triton", ".*")
TASKS = ("relu", "matmul")

_CHILD = r"""
import importlib, sys, jax
from pallasbench_dataset.tasks import get_task
from pallasbench_dataset.evaluation.judge.compile_profile import ENTRY_NAME
task = sys.argv[1]
module = importlib.import_module(f"kernels_gpu.{task}")
spec = get_task(task)
def entry(*args):
  return module.kernel(*args)
entry.__name__ = ENTRY_NAME
compiled = jax.jit(entry).trace(*spec.input_structs("medium")).lower().compile()
from pallasbench_dataset.evaluation.judge.compile_profile import ptx_in_executable
texts = ptx_in_executable(compiled.runtime_executable().serialize())
print("EXECUTABLE_PTX", len(texts), sum(map(len, texts)), sum(".entry" in t for t in texts))
"""


def _probe(value: str | None, task: str) -> dict:
  from pallasbench_dataset.evaluation.judge.compile_profile import xla_dump_flags
  with tempfile.TemporaryDirectory() as tmp:
    dump = pathlib.Path(tmp)
    flags = xla_dump_flags(dump) + (f" --xla_dump_emitter_re={value}" if value else "")
    env = {**os.environ, "XLA_FLAGS": flags}
    done = subprocess.run([sys.executable, "-c", _CHILD, task], env=env, capture_output=True,
                          text=True, timeout=300)
    files = {p.name: p.stat().st_size for p in sorted(dump.iterdir()) if p.is_file()}
    ptx_entry = any(".entry" in p.read_text(errors="replace")
                    for p in dump.glob("*.ptx"))
  executable = [line for line in done.stdout.splitlines() if line.startswith("EXECUTABLE_PTX")]
  return {"emitter_re": value, "task": task, "rc": done.returncode,
          "executable_ptx": executable[0] if executable else None,
          "stderr_tail": done.stderr[-400:] if done.returncode else "",
          "files": files, "ptx_with_entry": ptx_entry, "bytes": sum(files.values())}


def main() -> None:
  for value in EMITTER_VALUES:
    for task in TASKS:
      print(json.dumps(_probe(value, task)), flush=True)


if __name__ == "__main__":
  main()
