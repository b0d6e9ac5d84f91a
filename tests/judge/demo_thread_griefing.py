"""Red team round 15, class 16: an exporter holding the sandboxed user's task slots decides its
neighbours' verdicts (adv_thread_hog_relu). A measurement, not a test (pytest does not collect
it): run as root, where the sandboxed processes run as nobody,

    PYTHONPATH=. python tests/judge/demo_thread_griefing.py

The pool the hog empties is scaled down so that the demonstration is inert: this process sets
RLIMIT_NPROC to POOL before anything starts, every sandboxed process inherits it, and the
kernel then lets nobody hold at most POOL tasks (root, the driver and the judges, is exempt).
On a real host the pool is the same user's RLIMIT_NPROC (threads-max / 2 by default) or
pid_max, whichever a hog of 64 KiB stacks reaches first (the exporter's RLIMIT_AS allows tens
of thousands); pid_max is shared with root, so there the judges and the driver fail too.

Two neighbours, both the honest adv_pos_eager_setup_relu, judged by the evaluator's own
`run_items` while a hog (adv_thread_hog_relu with no cap, holding HOLD_S) runs beside them in
a separate `evaluate` process:
  A. the neighbour is exported while the hog holds the pool;
  B. the neighbour is exported first, and the hog fills the pool before the judge analyses the
     neighbour's module (this script waits for the pool to be full in between: deterministic).
For B it also asks the reward's verdict cache whether it would keep and serve the verdict.
"""

from __future__ import annotations

import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

from pallasbench_dataset.evaluate import CPU_OPTIONS
from pallasbench_dataset.evaluation.judge.process import JudgeConfig, Limits, default_memory_limit, make_dump_dir
from pallasbench_dataset.evaluation.pipeline import driver, verdicts
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, run_items

REPO = pathlib.Path(__file__).resolve().parents[2]
CONTROLS = REPO / "tests" / "controls"
POOL = 24       # tasks the user nobody may hold at once, here
HOLD_S = 45.0
NOBODY = 65534


def nobody_tasks() -> int:
  total = 0
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
      continue
    if int(fields.get("Uid", "0").split()[0]) == NOBODY:
      total += int(fields.get("Threads", "0"))
  return total


def start_hog(folder: pathlib.Path) -> subprocess.Popen:
  hog = folder / "hog.py"
  hog.write_text((CONTROLS / "adv_thread_hog_relu.py").read_text()
                 .replace("CAP = 256 ", "CAP = 1 << 20 ").replace("HOLD_S = 3.0 ", f"HOLD_S = {HOLD_S} "))
  return subprocess.Popen([sys.executable, "-m", "pallasbench_dataset.evaluate", "--task", "relu",
                           "--kernel", str(hog), "--device", "cpu", "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def await_full(deadline_s: float = 60.0) -> int:
  end = time.monotonic() + deadline_s
  while time.monotonic() < end:
    if (n := nobody_tasks()) >= POOL:
      return n
    time.sleep(0.05)
  raise RuntimeError(f"the hog did not fill the pool of {POOL} in {deadline_s} s")


def neighbour(name: str) -> tuple[WorkItem, object]:
  item = WorkItem(task="relu", variant="candidate", size="small",
                  source=(CONTROLS / "adv_pos_eager_setup_relu.py").read_text(),
                  filename="adv_pos_eager_setup_relu.py", options=CPU_OPTIONS, candidate=name)
  out = []
  run_items([item], JudgeConfig(device="cpu", git_commit=None, dump_dir=make_dump_dir("cpu")),
            Limits(timeout_s=900, memory_bytes=default_memory_limit()),
            on_result=lambda record, artifacts: out.append((record, artifacts)))
  return item, out[0]


def show(tag: str, record) -> None:
  print(f"{tag}: status={record.status.value} error_type={record.error_type} "
        f"reasons={list(record.reasons)} error={(record.error or '')[:200]!r}", flush=True)


def main() -> int:
  if os.geteuid() != 0:
    print("run as root: the pool is nobody's, and root is exempt from it")
    return 2
  resource.setrlimit(resource.RLIMIT_NPROC, (POOL, POOL))
  folder = pathlib.Path(tempfile.mkdtemp(prefix="rt15-hog-"))
  _, (alone, _) = neighbour("alone")
  show("no hog", alone)

  hog = start_hog(folder)
  print(f"A: the pool is full ({await_full()} tasks of nobody)", flush=True)
  _, (a, _) = neighbour("A")
  show("A, exported while the hog holds the pool", a)
  hog.wait()
  show("   the hog itself", driver_record(hog))

  original = driver.export
  def export_then_hog(item, device, limits):
    outcome = original(item, device, limits)
    export_then_hog.hog = start_hog(folder)
    print(f"B: neighbour exported; the pool is full ({await_full()} tasks of nobody)", flush=True)
    return outcome
  driver.export = export_then_hog
  try:
    item, (b, artifacts) = neighbour("B")
  finally:
    driver.export = original
  show("B, analysed while the hog holds the pool", b)
  export_then_hog.hog.wait()
  show("   the hog itself", driver_record(export_then_hog.hog))
  cache = verdicts.VerdictCache(folder / "cache", serve_fresh_passes=False)
  cache.put(item, b, artifacts)
  stored = list(cache.folder.rglob("*.json"))
  print(f"B's verdict: load_decided={verdicts.load_decided(b)}, stored by the reward's cache: "
        f"{bool(stored)}, served again: {bool(stored) and cache.serves(b, item)}")
  return 0


def driver_record(process: subprocess.Popen):
  from pallasbench_dataset.schema import EvalRecord, from_json_dict  # pylint: disable=import-outside-toplevel
  return from_json_dict(EvalRecord, json.loads(process.stdout.read()))


if __name__ == "__main__":
  sys.exit(main())
