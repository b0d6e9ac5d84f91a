"""The fixed kernels' speed goals at float32 and at bfloat16, and the contraction goals, read from
one GPU run's records (kernel and XLA timed in that run).

    python -m benchmarks.speed_goals data/results/RUN [--before data/results/OLD_RUN]
    python -m benchmarks.speed_goals data/results/RUN --precision bfloat16
    python -m benchmarks.speed_goals data/results/RUN --contractions

Prints, for every GPU-fixed kernel, its speedup over XLA at `medium` and `large` at the
precision asked (float32 by default), then each goal. At float32 (and with the `--before`
run's speedups, and the memory-bound check against it): the geomean over the fixed
kernels >= 1.0 at both sizes, every contraction-family kernel >= 0.7 at `large`, every
latency-bound kernel >= 0.8 at both sizes, and no memory-bound kernel slower than before
(beyond RUN_TO_RUN, the spread two runs of one tree show). At bfloat16: the geomean >= 1.0 at
both sizes, every kernel of the bfloat16 contraction family (matmul*, linear, the GLUs,
batched matmul, gated MLP) >= 0.85 at `large`, every memory-bound kernel >= 0.95 at `large`,
and the matmul task at `large` (4096^3) >= 600 TFLOP/s: the judge's roofline
`achieved_tflops` of that record, the task's analytic 2*M*N*K FLOPs over the fixed kernel's
median time. With --contractions (both precisions of the run): each kernel of issue #37's
contraction family (the contractions above and qk_softmax) with its TFLOP/s (roofline
`achieved_tflops`), XLA's (`baseline_tflops`) and the ratio, per precision and size, then the
contraction goals: every contraction-family kernel >= 0.90 at `large` at each precision, the
bf16 matmul at 4096^3 >= 700 TFLOP/s, and the bfloat16 geomean over the fixed kernels >= 1.10
at both sizes. A kernel that did not pass (or was not measured at a size) counts as failing
every goal it is in.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pallasbench_dataset.precision import BFLOAT16, DEFAULT_PRECISION, PRECISIONS, precision_order

# The goals' families (the rest are memory-bound).
CONTRACTION: Final = ("matmul", "matmul_relu", "matmul_gelu", "matmul_silu", "linear_bias_relu",
                      "swiglu", "geglu", "batched_matmul", "gated_mlp", "transformer_block")
LATENCY_BOUND: Final = ("flash_attention", "qk_softmax", "pairwise_distance",
                        "multi_head_attention", "gated_mlp", "transformer_block")
SIZES: Final = ("medium", "large")
RUN_TO_RUN: Final = 0.05  # relative speedup change still read as "not slower"
# The bfloat16 goals' contraction family names no transformer block.
CONTRACTION_BF16: Final = tuple(t for t in CONTRACTION if t != "transformer_block")
CONTRACTION_FLOOR_BF16: Final = 0.85
MEMORY_FLOOR_BF16: Final = 0.95
MATMUL_TFLOPS_BF16: Final = 600.0
MATMUL_SHAPES: Final = ["(4096, 4096)", "(4096, 4096)"]  # the matmul task's `large` inputs
# The contraction goals: the contractions at cuBLAS speed, at both precisions. Their family is
# issue #37's table: the contractions above and qk_softmax (a QK^T dot with its softmax).
CONTRACTION_37: Final = (*CONTRACTION, "qk_softmax")
CONTRACTION_FLOOR_37: Final = 0.90
MATMUL_TFLOPS_37: Final = 700.0
GEOMEAN_BF16_37: Final = 1.10


def _fixed(run: pathlib.Path, precision: str) -> list[dict[str, Any]]:
  """The run's records of the GPU-fixed kernels at `medium` and `large` at `precision` (a
  record without a precision is float32)."""
  out = []
  for line in (run / "records.jsonl").read_text().splitlines():
    record = json.loads(line)
    if (record["variant"] == "gpu" and record["size"] in SIZES
        and record.get("precision", DEFAULT_PRECISION) == precision):
      out.append(record)
  return out


def _passed(record: Mapping[str, Any]) -> bool:
  return record["status"] == "pass" and bool(record["speedup"])


def speedups(run: pathlib.Path, precision: str = DEFAULT_PRECISION
             ) -> dict[tuple[str, str], float | None]:
  """(task, size) -> speedup over XLA of the GPU-fixed kernel at `precision` (float32 unless
  asked: a run's records of the other precision are not these goals'), None where it did not
  pass."""
  return {(r["task"], r["size"]): float(r["speedup"]) if _passed(r) else None
          for r in _fixed(run, precision)}


def matmul_tflops(run: pathlib.Path) -> tuple[float | None, str]:
  """The bfloat16 matmul task's rate at `large`, 4096^3 (TFLOP/s, None where it did not pass or
  was not measured there), and what was read: the record's roofline `achieved_tflops`."""
  found = [r for r in _fixed(run, BFLOAT16) if r["task"] == "matmul" and r["size"] == "large"]
  if not found:
    return None, "matmul large not measured at bfloat16"
  record = found[0]
  if list(record["input_shapes"]) != MATMUL_SHAPES:
    raise ValueError(f"matmul at large has inputs {record['input_shapes']}, not {MATMUL_SHAPES}: "
                     "the 4096^3 goal does not apply to it; fix MATMUL_SHAPES or the task")
  achieved = (record.get("roofline") or {}).get("achieved_tflops")
  if not _passed(record) or not achieved:
    return None, f"matmul large {record['status']}, no rate"
  return float(achieved), f"{float(achieved):.1f} (roofline achieved_tflops, 4096^3)"


def contraction_rates(run: pathlib.Path) -> list[dict[str, Any]]:
  """One row per contraction-family kernel, precision and size measured in the run: its
  speedup over XLA, and its and XLA's TFLOP/s (the records' roofline `achieved_tflops` and
  `baseline_tflops`); None where the kernel did not pass."""
  rows = []
  for precision in PRECISIONS:
    for record in _fixed(run, precision):
      if record["task"] not in CONTRACTION_37:
        continue
      roofline = (record.get("roofline") or {}) if _passed(record) else {}
      rows.append({"task": record["task"], "precision": precision, "size": record["size"],
                   "speedup": float(record["speedup"]) if _passed(record) else None,
                   "tflops": roofline.get("achieved_tflops"),
                   "xla_tflops": roofline.get("baseline_tflops")})
  order = {name: n for n, name in enumerate(CONTRACTION_37)}
  return sorted(rows, key=lambda r: (order[r["task"]], precision_order(r["precision"]),
                                     SIZES.index(r["size"])))


def goals_contractions(run: pathlib.Path) -> list[tuple[str, bool, str]]:
  """(goal, met, detail) for each contraction goal, read from both precisions' records."""
  out = []
  for precision in PRECISIONS:
    now = speedups(run, precision)
    tasks = sorted({task for task, _ in now})
    below = _below(now, CONTRACTION_37, CONTRACTION_37, ("large",), CONTRACTION_FLOOR_37)
    out.append((f"every contraction-family kernel >= {CONTRACTION_FLOOR_37:.2f} at large, "
                f"{precision}", not below, ", ".join(below) or "all"))
    if precision == BFLOAT16:
      rate, detail = matmul_tflops(run)
      out.append((f"bf16 matmul at 4096^3 >= {MATMUL_TFLOPS_37:.0f} TFLOP/s",
                  rate is not None and rate >= MATMUL_TFLOPS_37, detail))
      for size in SIZES:
        value = geomean([now.get((t, size)) for t in tasks])
        out.append((f"geomean over {len(tasks)} fixed kernels, bfloat16, at {size} >= "
                    f"{GEOMEAN_BF16_37:.2f}", value >= GEOMEAN_BF16_37, f"{value:.3f}"))
  return out


def _fmt(value: float | None) -> str:
  return "  fail" if value is None else f"{value:6.2f}"


def _rate(value: float | None) -> str:
  return "fail" if value is None else f"{value:.1f}"


def geomean(values: Sequence[float | None]) -> float:
  """Geometric mean; a kernel that did not pass makes it NaN."""
  if not values or any(v is None or v <= 0 for v in values):
    return math.nan
  return math.exp(sum(math.log(v) for v in values) / len(values))


def _geomean_goals(now: Mapping[tuple[str, str], float | None],
                   tasks: Sequence[str]) -> list[tuple[str, bool, str]]:
  """The geomean goal at each size, the same at both precisions."""
  out = []
  for size in SIZES:
    value = geomean([now.get((t, size)) for t in tasks])
    out.append((f"geomean over {len(tasks)} fixed kernels at {size} >= 1.0", value >= 1.0,
                f"{value:.3f}"))
  return out


def _below(now: Mapping[tuple[str, str], float | None], tasks: Sequence[str],
           family: Sequence[str], sizes: Sequence[str], floor: float) -> list[str]:
  """'task size speedup' of each kernel of `family` missing or under `floor` at `sizes`."""
  return [f"{t} {s} {_fmt(now.get((t, s))).strip()}" for t in tasks if t in family
          for s in sizes if now.get((t, s)) is None or now[t, s] < floor]


def goals(now: Mapping[tuple[str, str], float | None],
          before: Mapping[tuple[str, str], float | None] | None) -> list[tuple[str, bool, str]]:
  """(goal, met, detail) for each float32 goal."""
  tasks = sorted({task for task, _ in now})
  out = _geomean_goals(now, tasks)
  below = _below(now, tasks, CONTRACTION, ("large",), 0.7)
  out.append(("every contraction-family kernel >= 0.7 at large", not below,
              ", ".join(below) or "all"))
  below = _below(now, tasks, LATENCY_BOUND, SIZES, 0.8)
  out.append(("every latency-bound kernel >= 0.8", not below, ", ".join(below) or "all"))
  if before is not None:
    memory = [t for t in tasks if t not in CONTRACTION + LATENCY_BOUND]
    slower = [f"{t} {s} {before[t, s]:.2f} -> {_fmt(now.get((t, s))).strip()}"
              for t in memory for s in SIZES
              if before.get((t, s)) and (now.get((t, s)) is None
                                         or now[t, s] < before[t, s] * (1 - RUN_TO_RUN))]
    out.append((f"no memory-bound kernel slower than before (by more than {RUN_TO_RUN:.0%})",
                not slower, ", ".join(slower) or f"all {len(memory)}"))
  return out


def goals_bf16(now: Mapping[tuple[str, str], float | None],
               tflops: tuple[float | None, str]) -> list[tuple[str, bool, str]]:
  """(goal, met, detail) for each bfloat16 goal; `tflops` as `matmul_tflops` gives it."""
  tasks = sorted({task for task, _ in now})
  out = _geomean_goals(now, tasks)
  below = _below(now, tasks, CONTRACTION_BF16, ("large",), CONTRACTION_FLOOR_BF16)
  out.append((f"every contraction-family kernel >= {CONTRACTION_FLOOR_BF16} at large", not below,
              ", ".join(below) or "all"))
  memory = [t for t in tasks if t not in CONTRACTION + LATENCY_BOUND]
  below = _below(now, tasks, memory, ("large",), MEMORY_FLOOR_BF16)
  out.append((f"every memory-bound kernel >= {MEMORY_FLOOR_BF16} at large", not below,
              ", ".join(below) or f"all {len(memory)}"))
  rate, detail = tflops
  out.append((f"bf16 matmul at 4096^3 >= {MATMUL_TFLOPS_BF16:.0f} TFLOP/s",
              rate is not None and rate >= MATMUL_TFLOPS_BF16, detail))
  return out


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("run", type=pathlib.Path, help="a run folder (records.jsonl)")
  p.add_argument("--before", type=pathlib.Path,
                 help="an earlier run folder to compare with (float32 goals only)")
  p.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                 help="the precision whose goals to check (default: float32)")
  p.add_argument("--contractions", action="store_true",
                 help="the contraction kernels' TFLOP/s and x XLA at both precisions, and "
                      "the contraction goals")
  args = p.parse_args(argv)
  if args.before and args.precision != DEFAULT_PRECISION:
    p.error("--before compares float32 runs; the bfloat16 goals read one run")
  if args.contractions:
    if args.before or args.precision != DEFAULT_PRECISION:
      p.error("--contractions reads both precisions of one run; drop --before and --precision")
    return _main_contractions(args.run)
  try:
    now = speedups(args.run, args.precision)
    before = speedups(args.before) if args.before else None
    bf16 = args.precision == BFLOAT16
    if bf16 and not now:
      raise ValueError(f"{args.run} holds no bfloat16 record of the fixed kernels at "
                       f"{' or '.join(SIZES)}; measure with --precisions bfloat16")
    rate = matmul_tflops(args.run) if bf16 else None
  except (OSError, KeyError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"{'task':28} " + " ".join(f"{s:>14}" for s in SIZES))
  for task in sorted({t for t, _ in now}):
    cells = [(f"{_fmt(before.get((task, s)))} ->" if before else "") + _fmt(now.get((task, s)))
             for s in SIZES]
    print(f"{task:28} " + " ".join(f"{c:>14}" for c in cells))
  met = goals_bf16(now, rate) if rate is not None else goals(now, before)
  for goal, ok, detail in met:
    print(f"{'met ' if ok else 'NOT '} {goal}: {detail}")
  return 0 if all(ok for _, ok, _ in met) else 1


def _main_contractions(run: pathlib.Path) -> int:
  try:
    rows = contraction_rates(run)
    if not rows:
      raise ValueError(f"{run} holds no record of the GPU-fixed contraction kernels at "
                       f"{' or '.join(SIZES)}")
    met = goals_contractions(run)
  except (OSError, KeyError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"{'task':18} {'precision':9} {'size':6} {'TFLOP/s':>8} {'XLA':>8} {'x XLA':>6}")
  for r in rows:
    print(f"{r['task']:18} {r['precision']:9} {r['size']:6} {_rate(r['tflops']):>8} "
          f"{_rate(r['xla_tflops']):>8} {_fmt(r['speedup'])}")
  for goal, ok, detail in met:
    print(f"{'met ' if ok else 'NOT '} {goal}: {detail}")
  return 0 if all(ok for _, ok, _ in met) else 1


if __name__ == "__main__":
  sys.exit(main())
