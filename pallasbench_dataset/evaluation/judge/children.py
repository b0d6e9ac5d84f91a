"""What a parent reads of a child process it watches: its resident memory, and how it ended.

The judge's worker (process.py), the module analysis's helper (analysis_process.py) and the
driver's exporter runs each watch a child of their own; they share these two readings.
"""

from __future__ import annotations

import signal


def process_rss_bytes(pid: int) -> int:
  """The resident memory of process `pid`; 0 once it is gone."""
  try:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("VmRSS:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return 0


def death_message(returncode: int | None, what: str = "the judge process") -> str:
  if returncode is not None and returncode < 0:
    try:
      name = signal.Signals(-returncode).name
    except ValueError:
      name = f"signal {-returncode}"
    return f"{what} died with {name}"
  return f"{what} exited with code {returncode} without a result"
