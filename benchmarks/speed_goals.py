"""Issue #12's speed goals, read from one GPU run's records (kernel and XLA timed in that run).

    python -m benchmarks.speed_goals data/results/RUN [--before data/results/OLD_RUN]

Prints, for every GPU-fixed kernel, its speedup over XLA at `medium` and `large` (and the
`--before` run's, with the memory-bound check against it), then each goal: the geomean over
the 45 fixed kernels >= 1.0 at both sizes, every contraction-family kernel >= 0.7 at `large`,
every latency-bound kernel >= 0.8 at both sizes, and no memory-bound kernel slower than
before (beyond RUN_TO_RUN, the spread two runs of one tree show). A kernel that did not pass
(or was not measured at a size) counts as failing every goal it is in.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Final

# The families (the rest are memory-bound).
CONTRACTION: Final = ("matmul", "matmul_relu", "matmul_gelu", "matmul_silu", "linear_bias_relu",
                      "swiglu", "geglu", "batched_matmul", "gated_mlp", "transformer_block")
LATENCY_BOUND: Final = ("flash_attention", "qk_softmax", "pairwise_distance",
                        "multi_head_attention", "gated_mlp", "transformer_block")
SIZES: Final = ("medium", "large")
RUN_TO_RUN: Final = 0.05  # relative speedup change still read as "not slower"


def speedups(run: pathlib.Path) -> dict[tuple[str, str], float | None]:
  """(task, size) -> speedup over XLA of the GPU-fixed kernel at float32 (a record without a
  precision is float32; a run's bfloat16 records are not these goals'), None where it did not
  pass."""
  out = {}
  for line in (run / "records.jsonl").read_text().splitlines():
    record = json.loads(line)
    float32 = record.get("precision", "float32") == "float32"
    if record["variant"] == "gpu" and record["size"] in SIZES and float32:
      ok = record["status"] == "pass" and record["speedup"]
      out[record["task"], record["size"]] = float(record["speedup"]) if ok else None
  return out


def _fmt(value: float | None) -> str:
  return "  fail" if value is None else f"{value:6.2f}"


def geomean(values: Sequence[float | None]) -> float:
  """Geometric mean; a kernel that did not pass makes it NaN."""
  if not values or any(v is None or v <= 0 for v in values):
    return math.nan
  return math.exp(sum(math.log(v) for v in values) / len(values))


def goals(now: Mapping[tuple[str, str], float | None],
          before: Mapping[tuple[str, str], float | None] | None) -> list[tuple[str, bool, str]]:
  """(goal, met, detail) for each of the issue's goals."""
  tasks = sorted({task for task, _ in now})
  out = []
  for size in SIZES:
    value = geomean([now.get((t, size)) for t in tasks])
    out.append((f"geomean over {len(tasks)} fixed kernels at {size} >= 1.0", value >= 1.0,
                f"{value:.3f}"))

  def low(family, sizes, floor):
    return [f"{t} {s} {_fmt(now.get((t, s))).strip()}" for t in tasks if t in family
            for s in sizes if now.get((t, s)) is None or now[t, s] < floor]

  below = low(CONTRACTION, ("large",), 0.7)
  out.append(("every contraction-family kernel >= 0.7 at large", not below,
              ", ".join(below) or "all"))
  below = low(LATENCY_BOUND, SIZES, 0.8)
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


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("run", type=pathlib.Path, help="a run folder (records.jsonl)")
  p.add_argument("--before", type=pathlib.Path, help="an earlier run folder to compare with")
  args = p.parse_args(argv)
  try:
    now = speedups(args.run)
    before = speedups(args.before) if args.before else None
  except (OSError, KeyError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"{'task':28} " + " ".join(f"{s:>14}" for s in SIZES))
  for task in sorted({t for t, _ in now}):
    cells = [(f"{_fmt(before.get((task, s)))} ->" if before else "") + _fmt(now.get((task, s)))
             for s in SIZES]
    print(f"{task:28} " + " ".join(f"{c:>14}" for c in cells))
  met = goals(now, before)
  for goal, ok, detail in met:
    print(f"{'met ' if ok else 'NOT '} {goal}: {detail}")
  return 0 if all(ok for _, ok, _ in met) else 1


if __name__ == "__main__":
  sys.exit(main())
