"""How fast does the reward function score a GRPO batch, and does any cheat score above 0?

    python -m benchmarks.reward_throughput --out DIR [--count 256] [--size medium]
        [--device gpu] [--gpus N] [--tasks ...] [--format conversational|plain] [--json FILE]

Builds a batch of `--count` completions as a kernel-writing model would answer (prose, then
the module in a fenced python block), from the project's own kernels, populations and
controls, in fixed shares: broken 45% (the generator's `broken` mutations, answers cut off
before the block closes, syntax errors, another task's kernel), cheating 20% (the
generator's `cheat` mutations and the tests/controls/ cheats for relu and exp), honest 15%
(the fixed kernels and the generator's `tuning` mutations) and duplicates 20% (earlier
answers again, the same text or the same kernel after other prose). The batch is scored by
one call of `KernelReward` with the arguments TRL's GRPOTrainer passes, on a fresh verdict
cache (DIR/verdicts, which must be empty), so every distinct kernel is judged.

Prints the time to the last reward (from the call, on a cluster started just before: the
judges start within it, as in a trainer's first step), completions per GPU-minute
(completions / (wall minutes x judges)), the evaluations the judges ran, and the rewards by
kind. Exit status 0, or 1
when a cheat or a broken completion scored above 0 (a hole in the judge), 2 for bad arguments.

On the GPU machine (see benchmarks/population_throughput.py for installing the wheels):

    timeout --signal=TERM 580 python3 -m benchmarks.reward_throughput --out .devrun/reward \
        --git-commit SHA --json .devrun/reward.json

A CPU smoke check (small, interpret mode, minutes): `--device cpu --count 12 --tasks relu`.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import pathlib
import random
import sys
import time
from collections.abc import Sequence
from typing import Final

from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluate import resolve_device
from pallasbench_dataset.kernels import kernel_path
from pallasbench_dataset.population.candidates import PopulationError
from pallasbench_dataset.population.generate import generate
from pallasbench_dataset.tasks import Size, get_task, list_tasks

PROG: Final = "python -m benchmarks.reward_throughput"
CONTROLS: Final = pathlib.Path(__file__).resolve().parent.parent / "tests" / "controls"
SHARES: Final = {"broken": 0.45, "cheat": 0.20, "honest": 0.15, "duplicate": 0.20}
CONTROL_CHEATS: Final = {"relu": ("zeros_relu.py", "jnp_only_relu.py", "cached_relu.py",
                                  "identity_relu.py", "interpret_forced_relu.py"),
                         "exp": ("outside_exp.py",)}
MUST_SCORE_ZERO: Final = ("broken", "cheat")


def answer(source: str, rng: random.Random) -> str:
  """A model's answer around a kernel: prose, the fenced module, sometimes a closing remark."""
  intro = rng.choice(["Here is the kernel.", "The Pallas kernel below tiles the inputs.",
                      "Sure! This version masks the edges."])
  outro = rng.choice(["", "\nIt accumulates in float32.", "\nLet me know if it should be faster."])
  return f"{intro}\n\n```python\n{source.rstrip()}\n```\n{outro}"


def _broken_extras(tasks: Sequence[str], rng: random.Random) -> list[tuple[str, str]]:
  """Answers that break before the judge's checks: cut off, not Python, another task's kernel."""
  out = []
  for task in tasks:
    fixed = kernel_path("gpu", task).read_text()
    out.append((task, answer(fixed, rng)[: len(fixed) // 2]))                 # cut off mid-block
    out.append((task, answer(fixed + "\n  return ((\n", rng)))                   # not Python
    other = rng.choice([t.name for t in list_tasks() if t.name != task])
    out.append((task, answer(kernel_path("gpu", other).read_text(), rng)))      # wrong task
  return out


def _generated(count: int, tasks: Sequence[str], seed: int) -> list:
  """The generator's population of `count` candidates, or of fewer when these tasks give fewer."""
  while True:
    try:
      return generate(count, seed=seed, tasks=list(tasks))
    except PopulationError:
      if count == 1:
        raise
      count //= 2


def batch(count: int, tasks: Sequence[str], seed: int = 0) -> list[tuple[str, str, str]]:
  """(task, completion, kind) for `count` completions in SHARES, deterministic for a seed."""
  rng = random.Random(seed)
  population = _generated(count, tasks, seed)
  pools: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
  for c in population:
    pools["honest" if c.kind == "tuning" else c.kind].append((c.task, answer(c.source, rng)))
  pools["honest"] += [(t, answer(kernel_path("gpu", t).read_text(), rng)) for t in tasks]
  pools["cheat"] += [(t, answer((CONTROLS / name).read_text(), rng))
                     for t, names in CONTROL_CHEATS.items() if t in tasks for name in names]
  pools["broken"] += _broken_extras(tasks, rng)
  want = {kind: int(round(share * count)) for kind, share in SHARES.items()}
  want["broken"] += count - sum(want.values())
  out = []
  for kind in ("broken", "cheat", "honest"):
    pool = pools[kind]
    rng.shuffle(pool)
    out += [(task, text, kind) for task, text in (pool * (want[kind] // max(len(pool), 1) + 1))
            [:want[kind]]]
  originals = list(out)
  for _ in range(want["duplicate"]):
    task, text, kind = rng.choice(originals)
    kernel = rw.extract_kernel(text)
    again = text if kernel is None or rng.random() < 0.5 else answer(kernel, rng)
    out.append((task, again, f"duplicate {kind}"))
  rng.shuffle(out)
  return out


def run(args, device: str) -> dict:
  cache = args.out / "verdicts"
  if cache.exists() and any(cache.iterdir()):
    raise ValueError(f"{cache} is not empty: its verdicts would be reused; use another --out")
  completions = batch(args.count, args.tasks, args.seed)
  texts = [text if args.format == "plain" else [{"role": "assistant", "content": text}]
           for _, text, _ in completions]
  with rw.KernelReward(device=device, size=args.size, scheduler=args.scheduler, gpus=args.gpus,
                       cpu_workers=args.cpu_workers, cache_dir=cache, runs_dir=args.out / "runs",
                       git_commit=args.git_commit) as reward:
    start = time.monotonic()
    reward.start()
    cluster_s = time.monotonic() - start
    start = time.monotonic()
    rewards = reward(prompts=[None] * len(texts), completions=texts, completion_ids=None,
                     task=[task for task, _, _ in completions], trainer_state=None)
    wall_s = time.monotonic() - start
    judges = max(len(reward.plan.gpus), 1)
    feedback, evaluations = reward.last_feedback, reward.evaluations
  by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  above_zero = collections.defaultdict(list)
  for (task, _, kind), value, fb in zip(completions, rewards, feedback):
    by_kind[kind][fb.status] += 1
    if value > 0 and kind.split()[-1] in MUST_SCORE_ZERO:
      above_zero[kind].append(task)
  return {"completions": len(completions), "device": device, "size": reward.size,
          "judges": judges, "evaluations": evaluations, "cluster_start_s": round(cluster_s, 1),
          "wall_s_to_last_reward": round(wall_s, 1),
          "completions_per_gpu_minute": round(len(completions) / (wall_s / 60 * judges), 2),
          "evaluations_per_gpu_minute": round(evaluations / (wall_s / 60 * judges), 2),
          "mean_reward": {k: round(sum(v for (_, _, kk), v in zip(completions, rewards) if kk == k)
                                   / sum(n.values()), 4) for k, n in sorted(by_kind.items())},
          "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
          "scored_above_zero": dict(above_zero)}


def _print(data: dict) -> None:
  print(f"{data['completions']} completions on {data['device']} at {data['size']}, "
        f"{data['judges']} judge(s): {data['evaluations']} evaluations, last reward after "
        f"{data['wall_s_to_last_reward']:.1f} s (the cluster started in "
        f"{data['cluster_start_s']:.1f} s before; the judges start within the batch)")
  print(f"  {data['completions_per_gpu_minute']} completions per GPU-minute "
        f"({data['evaluations_per_gpu_minute']} evaluations per GPU-minute)")
  for kind, statuses in data["by_kind"].items():
    print(f"  {kind}: mean reward {data['mean_reward'][kind]}; "
          + ", ".join(f"{s} {n}" for s, n in statuses.items()))
  holes = data["scored_above_zero"]
  print("broken or cheating completions scored above 0: "
        + (", ".join(f"{k}: {', '.join(v)}" for k, v in holes.items()) or "none"))


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
  p.add_argument("--out", type=pathlib.Path, required=True,
                 help="the benchmark's folder (verdict cache, the batch's run folder)")
  p.add_argument("--count", type=int, default=256, help="completions (default 256)")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--tasks", nargs="+", default=[t.name for t in list_tasks()],
                 help="task names (default: all)")
  p.add_argument("--size", choices=[s.value for s in Size],
                 help="default: medium on a GPU, small on the CPU")
  p.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"])
  p.add_argument("--format", default="conversational", choices=["conversational", "plain"])
  p.add_argument("--scheduler", help="a Dask scheduler address (default: a local cluster)")
  p.add_argument("--gpus", type=int, help="judges of the local cluster (default: all GPUs)")
  p.add_argument("--cpu-workers", type=int, help="export/compile workers of the local cluster")
  p.add_argument("--git-commit", help="the commit to record (default: the checkout's HEAD)")
  p.add_argument("--json", type=pathlib.Path, help="also write the numbers as JSON")
  args = p.parse_args(argv)
  logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
  try:
    for task in args.tasks:
      get_task(task)
    device = resolve_device(args.device)
    data = run(args, device)
  except (KeyError, ValueError, RuntimeError) as e:
    print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
    return 2
  _print(data)
  if args.json:
    args.json.write_text(json.dumps(data, indent=1) + "\n")
  return 1 if data["scored_above_zero"] else 0


if __name__ == "__main__":
  sys.exit(main())
