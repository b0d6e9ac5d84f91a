"""benchmarks.speed_goals: the float32 goals read from run records."""
import json
import math

from benchmarks import speed_goals


def _run(tmp_path, name, speedups):
  folder = tmp_path / name
  folder.mkdir()
  lines = [json.dumps({"task": t, "variant": "gpu", "size": s, "status": status,
                       "speedup": v}) for (t, s), (status, v) in speedups.items()]
  lines.append(json.dumps({"task": "add", "variant": "tpu", "size": "large", "status": "error",
                           "speedup": None}))
  (folder / "records.jsonl").write_text("\n".join(lines) + "\n")
  return folder


def test_goals_flag_each_kind_of_miss(tmp_path):
  base = {("add", s): ("pass", 1.0) for s in ("medium", "large")}
  base |= {("matmul", s): ("pass", 1.2) for s in ("medium", "large")}
  base |= {("qk_softmax", s): ("pass", 1.1) for s in ("medium", "large")}
  before = speed_goals.speedups(_run(tmp_path, "before", base))
  assert before["add", "large"] == 1.0 and ("add", "small") not in before
  met = speed_goals.goals(before, before)
  assert all(ok for _, ok, _ in met) and len(met) == 5

  worse = dict(base)
  worse["matmul", "large"] = ("pass", 0.69)       # contraction below 0.7 at large
  worse["qk_softmax", "medium"] = ("error", None)  # a latency-bound kernel that did not pass
  worse["add", "medium"] = ("pass", 0.94)         # memory-bound, 6% slower
  now = speed_goals.speedups(_run(tmp_path, "now", worse))
  met = {goal.split(" >=")[0].split(" (")[0]: (ok, detail)
         for goal, ok, detail in speed_goals.goals(now, before)}
  assert met["geomean over 3 fixed kernels at medium"] == (False, "nan")
  assert met["geomean over 3 fixed kernels at large"][0] is False  # (1.0*0.69*1.1)^(1/3) < 1
  assert met["every contraction-family kernel"] == (False, "matmul large 0.69")
  assert met["every latency-bound kernel"] == (False, "qk_softmax medium fail")
  assert met["no memory-bound kernel slower than before"][0] is False


def test_a_memory_bound_kernel_within_run_to_run_spread_is_not_slower(tmp_path):
  before = {("add", "medium"): 1.0, ("add", "large"): 1.0}
  now = {("add", "medium"): 0.96, ("add", "large"): 1.0}
  assert speed_goals.goals(now, before)[-1][1] is True
  assert math.isclose(speed_goals.geomean([2.0, 0.5]), 1.0)
  assert math.isnan(speed_goals.geomean([2.0, None]))
