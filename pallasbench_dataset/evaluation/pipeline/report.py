"""A plain-text table of a run folder: outcome, error, time, rate and share of the ceilings.

    python -m pallasbench_dataset.evaluation.pipeline.report RUN_DIR [--variants gpu] [--sizes medium]
        [--precisions bfloat16]

A row's size names its precision where it is not float32 (`medium/bfloat16`).

Needs only the standard library and the project: it runs on the GPU machine right after a
measurement, so the command's output already holds the table.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys
from collections.abc import Sequence

from pallasbench_dataset.evaluation.errors import inert
from pallasbench_dataset.evaluation.pipeline.suite import MANIFEST, read_records
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.precision import (
    DEFAULT_PRECISION, PRECISIONS, get_precision, precision_order)
from pallasbench_dataset.schema import EvalRecord

MEMORY_BOUND_CATEGORIES = ("activation", "elementwise")


def _size(r: EvalRecord) -> str:
  return EvalKey.of(r).sized()


def _num(value: float | None, fmt: str) -> str:
  return "-" if value is None else format(value, fmt)


def _rate(r: EvalRecord) -> str:
  roof = r.roofline
  if roof is None or r.runtime_ms is None:
    return "-"
  if roof.frac_compute is not None and roof.frac_bandwidth is not None and \
      roof.frac_compute > roof.frac_bandwidth:
    return f"{roof.achieved_tflops:.1f} TFLOP/s ({roof.frac_compute:.0%})"
  share = "" if roof.frac_bandwidth is None else f" ({roof.frac_bandwidth:.0%})"
  return f"{roof.achieved_gbps:.0f} GB/s{share}"


def table(records: Sequence[EvalRecord]) -> str:
  header = (f"{'#':>2} {'task':<28} {'var':<3} {'size':<6} {'status':<9} {'rel_l2':>8} "
            f"{'kernel ms':>10} {'xla ms':>9} {'speedup':>7} {'eager ms':>9} {'vs eager':>8} "
            f"{'compile s':>9} {'gpu':>3}  rate (share of ceiling)")
  lines = [header, "-" * len(header)]
  for r in sorted(records, key=lambda r: (r.task_id, precision_order(r.precision), r.size,
                                          r.variant)):
    compile_s = r.compile.compile_s if r.compile else None
    gpu = r.run.gpu_index if r.run else None
    lines.append(
        f"{r.task_id:>2} {r.task:<28} {r.variant:<3} {_size(r):<6} {r.status.value:<9} "
        f"{_num(r.rel_l2_error, '8.1e')} {_num(r.runtime_ms, '10.4f')} {_num(r.baseline_ms, '9.4f')} "
        f"{_num(r.speedup, '7.2f')} {_num(r.eager_baseline_ms, '9.4f')} {_num(r.speedup_eager, '8.2f')} "
        f"{_num(compile_s, '9.2f')} {'-' if gpu is None else gpu:>3}  {_rate(r)}")
    if r.status.value != "pass":
      first = (r.reasons[0] if r.reasons else r.error or "").splitlines()
      lines.append(f"{'':>45}{(first[0] if first else '')[:150]}")
  return inert("\n".join(lines))


def _matmul_rates(ceilings: dict) -> str:
  """'410.3 TFLOP/s', the rate float32 is held against, then each other precision's where the
  run measured it: '410.3 TFLOP/s (bfloat16 820.5)'."""
  seed = get_precision(DEFAULT_PRECISION).ceiling
  others = [f"{p.name} {rate:.1f}" for p in PRECISIONS.values()
            if p.ceiling != seed and (rate := ceilings.get(p.ceiling))]
  text = f"{ceilings.get(seed) or 0:.1f} TFLOP/s"
  return f"{text} ({', '.join(others)})" if others else text


def summary(records: Sequence[EvalRecord], manifest: dict | None) -> str:
  counts = collections.Counter((r.variant, _size(r), r.status.value) for r in records)
  lines = [f"{v} {s}: " + ", ".join(f"{st} {n}" for (vv, ss, st), n in sorted(counts.items())
                                    if (vv, ss) == (v, s))
           for v, s in sorted({(r.variant, _size(r)) for r in records})]
  ceilings = (manifest or {}).get("ceilings") or {}
  copy = ceilings.get("copy_gbps")
  if copy:
    lines.append(f"ceilings: copy {copy:.0f} GB/s, read {ceilings.get('read_gbps') or 0:.0f} GB/s, "
                 f"matmul {_matmul_rates(ceilings)}")
    bound = [r for r in records if r.category in MEMORY_BOUND_CATEGORIES and r.level == 1
             and r.runtime_ms is not None and r.roofline is not None]
    for r in sorted(bound, key=lambda r: (r.variant, _size(r), r.task_id)):
      share = r.roofline.achieved_gbps / copy
      lines.append(f"  {r.variant} {_size(r)} {r.task}: {r.roofline.achieved_gbps:.0f} GB/s = "
                   f"{share:.0%} of copy{'' if share >= 0.5 else '  BELOW 50%'}")
  for entry in (manifest or {}).get("per_device") or ():
    c = entry.get("ceilings") or {}
    if c.get("copy_gbps"):
      lines.append(f"  device {entry['device']}: copy {c['copy_gbps']:.0f} GB/s, read "
                   f"{c.get('read_gbps') or 0:.0f} GB/s, matmul {_matmul_rates(c)}")
  for segment in [manifest or {}, *((manifest or {}).get("resumes") or ())]:
    if segment.get("pipeline"):
      lines.append(f"pipeline: {json.dumps(segment['pipeline'], sort_keys=True)}")
  env = (manifest or {}).get("environment") or {}
  if env:
    lines.append(f"environment: {env.get('device_kind')} (cc {env.get('compute_capability')}), "
                 f"driver {env.get('driver')}, CUDA {env.get('cuda')}, jax {env.get('jax')}, "
                 f"python {env.get('python')}, commit {env.get('git_commit')}")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m pallasbench_dataset.evaluation.pipeline.report")
  parser.add_argument("runs", type=pathlib.Path, nargs="+")
  parser.add_argument("--variants", nargs="+")
  parser.add_argument("--sizes", nargs="+")
  parser.add_argument("--precisions", nargs="+", choices=PRECISIONS)
  args = parser.parse_args(argv)
  for run in args.runs:
    records = [r for r in read_records(run)
               if (not args.variants or r.variant in args.variants)
               and (not args.sizes or r.size in args.sizes)
               and (not args.precisions or r.precision in args.precisions)]
    manifest_path = run / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    print(f"== {run}: {len(records)} records ==")
    print(table(records))
    print(summary(records, manifest))
  return 0


if __name__ == "__main__":
  sys.exit(main())
