"""Stand-in stages for the pipeline's fault tests, imported by the Dask workers by name.

Each wraps the real stage and misbehaves as the environment variable FAULT says, keeping
its state in the folder FAULT_DIR (workers are separate processes).
"""

import os
import pathlib
import time

from pallasbench_dataset.evaluation.pipeline import stages

export_stage = stages.export_stage
compile_stage = stages.compile_stage


def _first_time(name: str) -> bool:
  marker = pathlib.Path(os.environ["FAULT_DIR"]) / name
  if marker.exists():
    return False
  marker.write_text("seen")
  return True


class _SlowToClose:
  """A stage process that takes longer to end than a nanny waits for its worker (4 s)."""

  def alive(self) -> bool:
    return True

  def close(self) -> None:
    time.sleep(5)


def judge_stage(item, exported, notes, settings):
  fault = os.environ.get("FAULT", "")
  if fault == "slow_close":
    stages._PROCESSES["slow"] = _SlowToClose()  # pylint: disable=protected-access
  if fault == "die_once" and _first_time(f"died-{item.variant}"):
    os._exit(1)  # the worker is lost mid-evaluation, once
  if fault == "die_always" and item.variant == "tpu":
    os._exit(1)
  if fault == "raise" and item.variant == "tpu":
    raise RuntimeError("a bug in a stage")
  return stages.judge_stage(item, exported, notes, settings)
