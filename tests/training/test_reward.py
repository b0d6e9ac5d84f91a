"""pallasbench_dataset.reward: the sealed judge as TRL's GRPO reward function (CPU, small).

The reward is called as TRL 1.10.0.dev0's `GRPOTrainer._calculate_rewards` calls a custom
reward function (huggingface/trl@f2cd577, trl/trainer/grpo_trainer.py): keyword arguments
`prompts`, `completions`, `completion_ids`, every dataset column but `prompt`, `completion`
and `completion_ids` as a list, `trainer_state`, `log_extra` and `log_metric`; completions are
strings for standard prompts and `[{"role": "assistant", "content": ...}]` for conversational
ones. TRL itself is not installed (it pulls torch): `_trainer_call` builds those arguments.

One local Dask cluster judges a handful of small relu/exp kernels (each evaluation costs
~15 s on a loaded machine); the budget test reuses it through `scheduler=`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time

import distributed
import pytest

from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.pipeline import stages, suite
from pallasbench_dataset.schema import Status

from tests import runfixtures as rf
from tests.paths import CONTROLS

OPTIONS = EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1)
# The candidate's own relu: the shipped kernels_gpu/relu.py verbatim would be a copy, rejected
# by the reward's default `reject_copies`.
HONEST = (CONTROLS / "pos_calls_reference_relu.py").read_text()


def fenced(source: str, before: str = "Here is the kernel.\n\n") -> str:
  return f"{before}```python\n{source.rstrip()}\n```\n"


def _control(name: str) -> str:
  return (CONTROLS / name).read_text()


# (task, completion text, what it is)
BATCH = (
    ("relu", fenced(HONEST), "honest"),
    ("relu", fenced(_control("zeros_relu.py")), "zeros"),
    ("relu", fenced(_control("jnp_only_relu.py")), "no pallas: the work in XLA"),
    ("exp", fenced(_control("outside_exp.py")), "exp in XLA, copied by Pallas"),
    ("relu", fenced(HONEST, before="Again:\n```python\nx = 1\n```\nThe module:\n"), "duplicate"),
    ("relu", "I cannot write this kernel.", "no fenced block"),
    ("relu", fenced(HONEST + "NOTE = '\ud800'\n"), "a lone surrogate"),
    ("relu", fenced(HONEST).replace("```python", "```Python3"), "tagged Python3"),
)


def _trainer_call(reward, completions, tasks, logged):
  """What GRPOTrainer._calculate_rewards passes: the dataset's other columns (here those of
  the `sft` config), repeated per completion, and the trainer's state and loggers."""
  inputs = [{"prompt": f"write {t}", "completion": "ignored", "task": t, "task_id": 1, "level": 1,
             "prompt_kind": "write"} for t in tasks]
  keys = [k for k in inputs[0] if k not in ["prompt", "completion", "completion_ids"]]
  kwargs = {k: [x[k] for x in inputs] for k in keys}
  kwargs["trainer_state"] = object()
  kwargs["log_extra"] = lambda column, values: logged.setdefault(column, []).extend(values)
  kwargs["log_metric"] = lambda name, value: logged.setdefault(name, []).append(value)
  prompts = [x["prompt"] for x in inputs]
  return reward(prompts=prompts, completions=list(completions),
                completion_ids=[[1, 2, 3]] * len(completions), **kwargs)


def _judge_pid() -> int | None:
  """On a Dask worker: the pid of its judge process, if it keeps one."""
  worker = stages._PROCESSES.get(stages.JUDGE)  # pylint: disable=protected-access
  return None if worker is None else worker._proc.pid  # pylint: disable=protected-access


def _judge_pids(address: str) -> dict[str, int | None]:
  with distributed.Client(address, timeout="30s") as client:
    return client.run(_judge_pid)


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
  root = tmp_path_factory.mktemp("reward")
  reward = rw.KernelReward(device="cpu", size="small", options=OPTIONS, budget_s=300,
                           cpu_workers=1, cache_dir=root / "cache", runs_dir=root / "runs")
  tasks = [t for t, _, _ in BATCH]
  logged: dict = {}
  start = time.monotonic()
  plain = _trainer_call(reward, [c for _, c, _ in BATCH], tasks, logged)
  wall_s = time.monotonic() - start
  plain_feedback, evaluations = reward.last_feedback, reward.evaluations
  judges = [_judge_pids(reward.scheduler)]
  conversational = _trainer_call(
      reward, [[{"role": "assistant", "content": c}] for _, c, _ in BATCH], tasks, {})
  judges.append(_judge_pids(reward.scheduler))
  yield dict(reward=reward, root=root, plain=plain, conversational=conversational,
             feedback=plain_feedback, evaluations=evaluations, logged=logged, wall_s=wall_s,
             judges=judges)
  reward.close()


def test_an_honest_kernel_scores_above_zero_and_every_cheat_zero(judged):
  rewards, feedback = judged["plain"], judged["feedback"]
  assert len(rewards) == len(BATCH) and all(isinstance(r, float) for r in rewards)
  by_kind = {kind: (r, f) for (_, _, kind), r, f in zip(BATCH, rewards, feedback)}
  assert by_kind["honest"][1].status == "pass" and by_kind["honest"][0] == rw.PASS_FLOOR
  for kind in ("zeros", "no pallas: the work in XLA", "exp in XLA, copied by Pallas"):
    value, fb = by_kind[kind]
    assert value == 0.0 and fb.status == "rejected" and fb.reasons, (kind, fb)
  assert any("no Pallas kernel" in r for r in by_kind["no pallas: the work in XLA"][1].reasons)
  assert by_kind["no fenced block"] == (0.0, rw._no_kernel("relu"))
  assert "no closed fenced ```python block" in by_kind["no fenced block"][1].text()
  assert by_kind["exp in XLA, copied by Pallas"][1].task == "exp"
  assert by_kind["tagged Python3"][0] == rw.PASS_FLOOR


def test_an_unreadable_completion_scores_zero_with_its_reason_and_the_batch_goes_on(judged):
  value, fb = {kind: (r, f) for (_, _, kind), r, f in zip(BATCH, judged["plain"],
                                                           judged["feedback"])}["a lone surrogate"]
  assert (value, fb.status, fb.record) == (0.0, rw.UNREADABLE, None)
  assert fb.reasons == ("the kernel holds a character that is not text ('\\ud800' at character "
                        f"{len(HONEST.rstrip()) + 9}: surrogates not allowed)",)
  assert fb.text() == f"relu: the answer could not be read: {fb.reasons[0]}"


def test_conversational_completions_get_the_same_rewards_failures_from_the_cache(judged):
  """The same completions as messages: the same rewards. The failures come from the cache; the
  pass, drawn on fresh seeds, is judged again, once for its copies (test_cache_attacks.py)."""
  assert judged["conversational"] == judged["plain"]
  assert judged["reward"].evaluations == judged["evaluations"] + 1  # the honest kernel's pass
  assert [f.cached for f in judged["reward"].last_feedback][:4] == [False, True, True, True]


def test_the_judge_stays_warm_from_batch_to_batch(judged):
  """Each batch's run connects to the reward's cluster again: its judges are not restarted."""
  first, second = judged["judges"]
  assert [pid for pid in first.values() if pid is not None]  # the judge worker's process
  assert first == second


def test_duplicates_in_a_batch_are_judged_once(judged):
  assert judged["evaluations"] == 4  # 8: two twins, one without a kernel, one unreadable
  first = json.loads((judged["root"] / "runs" / "batch-000001" / suite.MANIFEST).read_text())
  assert (first["pipeline"]["evaluations"], first["pipeline"]["cached"]) == (4, 2)
  honest, duplicate = judged["feedback"][0], judged["feedback"][4]
  assert duplicate.cached and not honest.cached
  assert duplicate.kernel_sha256 == honest.kernel_sha256 and duplicate.reward == honest.reward


def test_the_trainer_s_loggers_get_the_verdicts(judged):
  assert judged["logged"]["judge_status"] == [f.status for f in judged["feedback"]]
  assert judged["logged"]["judge/pass_rate"] == [3 / 8]


def test_feedback_is_the_judge_s_for_a_multi_turn_loop(judged):
  zeros = judged["feedback"][1]
  assert zeros.record is not None and zeros.record.status is Status.REJECTED
  assert zeros.text().startswith("relu [small, cpu]: rejected")
  assert all(f"  - {reason}" in zeros.text() for reason in zeros.reasons)


def test_a_slow_candidate_is_cut_at_its_budget_and_the_batch_goes_on(judged, tmp_path):
  """A second reward on the first one's cluster (`scheduler=`), with a 10 s budget: the hanging
  kernel is a timeout at 0, the honest one (the shared verdict cache) still scores."""
  budget = rw.KernelReward(device="cpu", size="small", options=OPTIONS, budget_s=10,
                           scheduler=judged["reward"].scheduler,
                           cache_dir=judged["root"] / "cache")
  start = time.monotonic()
  rewards = budget(completions=[fenced(_control("hangs_relu.py")), fenced(HONEST)],
                   task=["relu", "relu"])
  wall_s = time.monotonic() - start
  hang, honest = budget.last_feedback
  assert (hang.status, rewards[0]) == ("timeout", 0.0)
  assert "longer than 10 s" in hang.error
  assert honest.status == "pass" and rewards[1] == rw.PASS_FLOOR
  assert wall_s < 10 + 40, wall_s  # the budget, plus connecting and one export process
  budget.close()


# ---------------------------------------------------------------------------------------------
# Without a judge.

def test_the_kernel_is_the_last_closed_python_block():
  assert rw.extract_kernel("```python\na = 1\n```\ntext\n```python\nb = 2\n```") == "b = 2\n"
  assert rw.extract_kernel("```py\nc = 3\n```") == "c = 3\n"
  assert rw.extract_kernel("```\nd = 4\n```") == "d = 4\n"
  assert rw.extract_kernel("```python\ne = 5\n```\n```text\nnot code\n```") == "e = 5\n"
  assert rw.extract_kernel("```python\nf = 6\n") is None  # cut off mid-block
  assert rw.extract_kernel("no code") is None
  for tag in ("Python", "py3", "python3", "PY", "python title=kernel.py"):
    assert rw.extract_kernel(f"```{tag}\ng = 7\n```") == "g = 7\n", tag
  assert rw.extract_kernel("~~~python\nh = 8\n~~~") == "h = 8\n"
  # An indented fence (a list item), CRLF lines; a longer fence holds a shorter one.
  assert rw.extract_kernel("1. code:\r\n   ```python\r\n   def f():\r\n     pass\r\n   ```\r\n"
                           ) == "def f():\n  pass\n"
  assert rw.extract_kernel("````python\ns = '```'\n```\n````") == "s = '```'\n```\n"
  assert rw.extract_kernel("```text\n```python\nnot = 1\n```\n") is None
  assert rw.completion_text([{"role": "assistant", "content": "x"}]) == "x"
  assert rw.completion_text([{"role": "user", "content": "u"},
                             {"role": "assistant", "content": "a"}]) == "a"


def test_any_completion_is_read_in_linear_time_or_refused_with_its_reason():
  """Completions of MAX_COMPLETION_CHARS (1 MiB) shaped to make a backtracking scan quadratic
  are read in a second or so (a loaded machine: 10 s allowed); a quadratic scan takes 12 s at
  20 KB (a fence, then spaces) and hours at 1 MiB. Anything longer, or not text, is refused at
  once with its reason."""
  n = rw.MAX_COMPLETION_CHARS
  shapes = {"spaces after a fence": "```" + " " * (n - 4) + "\n",
            "openings without a close": "```python\n" * (n // 10),
            "backticks": "`" * n, "short blocks": "```\nx\n" * (n // 6)}
  for name, text in shapes.items():
    start = time.perf_counter()
    rw.read_kernel(text)
    assert time.perf_counter() - start < 10.0, name
  for completion, reason in (
      ("x" * (n + 1), f"the completion has {n + 1} characters; at most {n} are read"),
      (b"```python\n\xff\n```", "the completion's bytes are not UTF-8 (invalid start byte at byte 10)"),
      (None, "a completion is a string or a list of message dicts, not NoneType"),
      ([{"role": "assistant", "content": 3}, "text"], "a completion is a string or a list of "
                                                       "message dicts, not list")):
    with pytest.raises(rw.UnreadableCompletion) as info:
      rw.read_kernel(completion)
    assert str(info.value) == reason
  assert rw.read_kernel(b"```python\nx = 1\n```") == "x = 1\n"
  assert rw.read_kernel([{"role": "assistant", "content": [
      {"type": "text", "text": "```py\ny = 2\n```"}, {"type": "image"}]}]) == "y = 2\n"


def _record(trees, status=Status.PASS, runtime_ms=0.5, comparable=True, shipped_ms=None):
  shipped = {} if shipped_ms is None else dict(
      shipped_ms=shipped_ms, shipped_samples_ms=(shipped_ms,) * 3,
      speedup_shipped=shipped_ms / runtime_ms)
  return rf.record(trees, "relu", "candidate", "small", status=status, runtime_ms=runtime_ms,
                   baseline_ms=1.0, comparable=comparable, candidate="c", kernel_sha256="0" * 64,
                   **shipped)


def test_the_reward_is_zero_unless_pass_and_bounded_monotone_in_the_speedup(tmp_path):
  trees = rf.write_tree(tmp_path)
  for status in (Status.INCORRECT, Status.REJECTED, Status.ERROR, Status.TIMEOUT):
    assert rw.reward_of(_record(trees, status)) == 0.0
  speedups = [1 / 64, 0.5, 1.0, 2.0, 4.0, 64.0]
  values = [rw.reward_of(_record(trees, runtime_ms=1.0 / s)) for s in speedups]
  assert values == sorted(values) and len(set(values)) == len(values)
  assert all(rw.PASS_FLOOR < v < 1.0 for v in values)
  assert math.isclose(values[2], rw.PASS_FLOOR + (1 - rw.PASS_FLOOR) / 2)  # parity
  assert math.isclose(values[1] - rw.PASS_FLOOR, (1 - rw.PASS_FLOOR) - (values[3] - rw.PASS_FLOOR))
  assert rw.reward_of(_record(trees, runtime_ms=0.1, comparable=False)) == rw.PASS_FLOOR


def test_a_pass_is_paid_its_speedup_over_the_faster_of_xla_and_the_shipped_kernel(tmp_path):
  """The shipped kernel twice XLA's speed: a copy of it (as fast as it) is paid parity, no more
  than an original kernel as fast; beating it pays above parity, and a shipped kernel slower
  than XLA changes nothing. A shipped timing that is not a positive number pays the floor."""
  trees = rf.write_tree(tmp_path)
  parity = rw.PASS_FLOOR + (1 - rw.PASS_FLOOR) / 2
  copy = _record(trees, runtime_ms=0.5, shipped_ms=0.5)   # 2x XLA, 1x the shipped kernel
  assert rw.paid_speedup(copy) == 1.0 and math.isclose(rw.reward_of(copy), parity)
  assert rw.reward_of(_record(trees, runtime_ms=0.5)) > parity   # no shipped timing: vs XLA
  faster = _record(trees, runtime_ms=0.25, shipped_ms=0.5)
  assert rw.paid_speedup(faster) == 2.0
  assert rw.reward_of(faster) == rw.reward_of(_record(trees, runtime_ms=0.5))
  slow_shipped = _record(trees, runtime_ms=0.5, shipped_ms=4.0)
  assert rw.paid_speedup(slow_shipped) == 2.0
  for bad in (float("nan"), float("inf"), 0.0, -1.0):
    record = dataclasses.replace(copy, speedup_shipped=bad)
    assert rw.paid_speedup(record) is None and rw.reward_of(record) == rw.PASS_FLOOR
  assert rw.reward_of(_record(trees, runtime_ms=0.5, shipped_ms=0.5, comparable=False)
                      ) == rw.PASS_FLOOR


def test_bad_arguments_raise_instead_of_scoring_zero():
  reward = rw.KernelReward(device="cpu", options=OPTIONS)
  with pytest.raises(KeyError):
    reward(completions=["```python\nx\n```"], task=["no_such_task"])
  with pytest.raises(ValueError, match="2 completions but 1 task names"):
    reward.judge(["a", "b"], ["relu"])
  assert reward(completions=["no code"], task="relu") == [0.0]  # nothing to judge: no cluster
  assert reward(completions=[None, fenced("'\udfff'")], task="relu") == [0.0, 0.0]
  assert [f.status for f in reward.last_feedback] == [rw.UNREADABLE] * 2
  assert reward.scheduler is None
  with pytest.raises(RuntimeError, match=r"^device='gpu', but no usable NVIDIA GPU .* or pass "
                                         r"device='cpu'\)$"):
    rw.KernelReward(device="gpu")
  reward.close()
