"""Red team round 20, findings 1 and 2, measured end to end: the real reward (KernelReward on a CPU,
a local Dask cluster, the sandboxed exporter, the judge) on batches of [a coin control, two
honest relus], a fresh verdict cache each batch; every measurement is logged (suite._schedule
wrapped). Run as root only inside a throwaway namespace:

  unshare --mount --propagation private --pid --fork --mount-proc --ipc env PYTHONPATH=$PWD \
    HOME=/tmp/rt20/home XDG_CACHE_HOME=/tmp/rt20/home/.cache .venv/bin/python \
    docs/red-team/round20_reward_coin.py tests/controls/adv_r20_export_coin_relu.py /tmp/rt20/rr 6

(finding 2: the same with adv_r20_timing_spin_relu.py's threshold 1.0 changed to 1.4, 14 batches)
"""
import pathlib, time, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluation.pipeline import verdicts, suite
original = suite._schedule
def logged(client, todo, settings, git_commit):
  for item, record, artifacts in original(client, todo, settings, git_commit):
    print(f"   measured {item.candidate} {record.status.value} export_s={record.stages.export_s!r} "
          f"printed={record.exporter_output!r} reasons={[r[:80] for r in record.reasons]}", flush=True)
    yield item, record, artifacts
suite._schedule = logged
def fenced(p):
  return "Here it is.\n```python\n" + pathlib.Path(p).read_text() + "```\n"
completions = [fenced(sys.argv[1]), fenced(str(pathlib.Path(__file__).resolve().parents[2] / "tests/controls") + "/adv_pos_dataclass_relu.py"),
               fenced(str(pathlib.Path(__file__).resolve().parents[2] / "tests/controls") + "/adv_pos_chunked_calls_relu.py")]
root = pathlib.Path(sys.argv[2]); root.mkdir(parents=True, exist_ok=True)
with rw.KernelReward(device="cpu", size="small", budget_s=30, cache_dir=root / "cache0",
                     runs_dir=root / "runs", cpu_workers=1) as reward:
  reward.start()
  for attempt in range(1, int(sys.argv[3]) + 1):
    reward.cache = verdicts.VerdictCache(root / f"cache{attempt}", serve_fresh_passes=False,
                                         judge_limits_again=True)
    t0 = time.monotonic()
    paid = reward(completions=completions, task="relu")
    fb = reward.last_feedback[0]
    print(f"attempt {attempt}: {time.monotonic() - t0:.0f} s, coin text {fb.status}, paid {[round(p, 2) for p in paid]}", flush=True)
