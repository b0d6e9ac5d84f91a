"""The runs' machines and software, their commands, and the GPUs' state as the judges
recorded it (L2, clocks, performance state, power, clock-event reasons)."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from pallasbench_dataset.schema import Environment, to_json_dict

from builder.records import Merged, Run
from builder.sections.inputs import CardInputs
from builder.tables import md_table

def _environment(run: Run) -> Environment | None:
  """The manifest's environment, else the first record's (a run that measured nothing: None)."""
  if run.manifest.environment is not None:
    return run.manifest.environment
  return run.records[0].environment if run.records else None


def _commits(run: Run) -> str | None:
  """The commit of each command of the run (a resumed run may have several), in order."""
  commits = [seg.git_commit[:12] for seg in (run.manifest, *run.manifest.resumes) if seg.git_commit]
  return ", ".join(dict.fromkeys(commits)) or None


def _runs_table(runs: Sequence[Run]) -> str:
  rows = []
  for run in runs:
    m, env = run.manifest, _environment(run)
    get = lambda field: getattr(env, field) if env is not None else None  # noqa: E731
    rows.append({"run": run.name, "device": get("device_kind"), "CC": get("compute_capability"),
                 "driver": get("driver"), "CUDA": get("cuda"), "jax": get("jax"),
                 "jaxlib": get("jaxlib"), "Python": get("python"),
                 "commit": _commits(run), "started": m.started_at,
                 "finished": m.finished_at, "sizes": ", ".join(m.sizes),
                 "variants": ", ".join(m.variants), "records": len(run.records)})
  return md_table(pd.DataFrame(rows))


def gpu_state(merged: Merged) -> pd.DataFrame:
  """Per run and GPU, what its judges recorded: L2 size and its source, clocks (whole MHz, as
  nvidia-smi reports them), performance state, power and the clock-event reasons (the bit mask
  and its meaning; nvidia-smi just after the ceilings were measured); one row per distinct
  state seen, with the number of records that carry it."""
  seen: collections.Counter = collections.Counter()
  for name, r in merged.published:
    env, gpu = r.environment, r.environment.gpu
    index = r.run.gpu_index if r.run is not None else None
    seen[(name, index, env.l2_bytes, env.l2_source,
          *(to_json_dict(gpu).get(k) if gpu else None for k in _GPU_COLUMNS))] += 1
  rows = []
  for key, n in sorted(seen.items(), key=lambda item: str(item[0])):
    state = dict(zip(_GPU_COLUMNS, key[4:]))
    for column in _MHZ:
      state[column] = None if state[column] is None else round(state[column])
    state["throttle_reasons"] = clock_event_reasons(state["throttle_reasons"])
    rows.append({"run": key[0], "GPU": key[1], "L2 MiB": key[2] / 2**20 if key[2] else None,
                 "L2 from": key[3], **{_GPU_HEADERS[c]: state[c] for c in _GPU_COLUMNS},
                 "records": n})
  return pd.DataFrame(rows)


_GPU_COLUMNS: Final = ("uuid", "sm_clock_mhz", "max_sm_clock_mhz", "memory_clock_mhz", "pstate",
                       "power_draw_w", "power_limit_w", "throttle_reasons")
_GPU_HEADERS: Final = dict(zip(_GPU_COLUMNS, (
    "UUID", "SM MHz", "max SM MHz", "memory MHz", "pstate", "power W", "power limit W",
    "clock event reasons")))
_MHZ: Final = ("sm_clock_mhz", "max_sm_clock_mhz", "memory_clock_mhz")
# NVML's clock-event reason bits (nvml.h, nvmlClocksEventReason*), as nvidia-smi's
# `clocks_event_reasons.active` prints their mask.
CLOCK_EVENT_REASONS: Final = ((0x1, "GPU idle"), (0x2, "applications clocks setting"),
                              (0x4, "SW power cap"), (0x8, "HW slowdown"), (0x10, "sync boost"),
                              (0x20, "SW thermal slowdown"), (0x40, "HW thermal slowdown"),
                              (0x80, "HW power brake slowdown"), (0x100, "display clock setting"))


def clock_event_reasons(mask: str | None) -> str | None:
  """nvidia-smi's clock-event mask with its reasons named: `0x4 (SW power cap)`; `0x0 (none)`;
  a text that is not a hexadecimal mask is returned as it is."""
  if mask is None:
    return None
  try:
    value = int(mask, 16)
  except ValueError:
    return mask
  names = [name for bit, name in CLOCK_EVENT_REASONS if value & bit]
  unknown = value & ~sum(bit for bit, _ in CLOCK_EVENT_REASONS)
  if unknown:
    names.append(f"other bits {unknown:#x}")
  return f"{value:#x} ({', '.join(names) or 'none'})"


def _commands(runs: Sequence[Run]) -> list[tuple[str, str, int]]:
  """(run, command, segments) for each distinct command of each run, in order: a run stopped
  and resumed with the same command several times is one line with its count of segments."""
  counts = collections.Counter((r.name, c) for r in runs for c in (
      r.manifest.command, *(x.command for x in r.manifest.resumes)))
  return [(name, command, n) for (name, command), n in counts.items()]


def context(card: CardInputs) -> Mapping[str, Any]:
  """The runs table, every command of every run (a resumed run has several), and the GPUs'
  states."""
  runs = card.runs
  return {"runs_table": _runs_table(runs), "commands": _commands(runs),
          "gpu_state_table": md_table(gpu_state(card.merged))}
