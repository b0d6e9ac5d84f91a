"""Which `--xla_dump_emitter_re` value leaves a Pallas Triton kernel's PTX in XLA's dump, at
what cost in files, bytes and compile seconds.

Run on a GPU machine (the device tool): `python3 scripts/ptx_dump_probe.py`. For each candidate
value (none, names an emitter of XLA's LLVM/PTX path might carry, everything, and everything
but the emitters whose names start with "tr": the Triton kernel's per-pass MLIR snapshots), a
fresh process compiles the fixed relu and flash_attention kernels (Pallas Triton) at `medium`
under the judge's own dump flags plus that value. The probe prints every file the dump holds
with its size, the `.entry` names of its `.ptx` files (a Pallas Triton kernel's entry is its
`pallas_call` name), and the compile's seconds. The judge keeps the value that captures the
kernel's entry without per-pass snapshots; docs/measurements.md logs the output.
(2026-12-02, first version: the compiled executable's serialized form held no PTX, and of
none, triton-fusion, triton-to-llvm, triton and .*, only .* left a `.ptx` file.)
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

EMITTER_VALUES = (None, "llvm", "ptx", "nvptx", "llvm-ir", "^([^t]|t[^r])", ".*")
TASKS = ("relu", "flash_attention")

_CHILD = r"""
import importlib, sys, time, jax
from pallasbench_dataset.tasks import get_task
from pallasbench_dataset.evaluation.judge.compile_profile import ENTRY_NAME
task = sys.argv[1]
module = importlib.import_module(f"kernels_gpu.{task}")
spec = get_task(task)
def entry(*args):
  return module.kernel(*args)
entry.__name__ = ENTRY_NAME
lowered = jax.jit(entry).trace(*spec.input_structs("medium")).lower()
start = time.perf_counter()
lowered.compile()
print("COMPILE_S", round(time.perf_counter() - start, 3))
"""
_ENTRY = re.compile(r"\.entry\s+([\w$]+)")


def _probe(value: str | None, task: str) -> dict:
  from pallasbench_dataset.evaluation.judge.compile_profile import xla_dump_flags
  with tempfile.TemporaryDirectory() as tmp:
    dump = pathlib.Path(tmp)
    flags = xla_dump_flags(dump) + (f" --xla_dump_emitter_re={value}" if value else "")
    env = {**os.environ, "XLA_FLAGS": flags}
    done = subprocess.run([sys.executable, "-c", _CHILD, task], env=env, capture_output=True,
                          text=True, timeout=300)
    files = {p.name: p.stat().st_size for p in sorted(dump.iterdir()) if p.is_file()}
    entries = {p.name: _ENTRY.findall(p.read_text(errors="replace"))
               for p in sorted(dump.glob("*.ptx"))}
  seconds = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("COMPILE_S")]
  return {"emitter_re": value, "task": task, "rc": done.returncode,
          "compile_s": float(seconds[0]) if seconds else None, "ptx_entries": entries,
          "stderr_tail": done.stderr[-400:] if done.returncode else "",
          "files": files, "bytes": sum(files.values())}


def main() -> None:
  for value in EMITTER_VALUES:
    for task in TASKS:
      print(json.dumps(_probe(value, task)), flush=True)


if __name__ == "__main__":
  main()
