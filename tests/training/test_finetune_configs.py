"""The fine-tuning configs `sft` and `preference`: built into the folder, loaded with `datasets`,
in TRL's documented formats.

TRL is not installed (it pulls torch), so the columns are checked against what TRL 1.10.0.dev0
documents and its helpers test (huggingface/trl@f2cd577: docs/source/dataset_formats.md, the
conversational prompt-completion and preference types; `trl.data_utils.is_conversational`:
a supported key holding a list whose first item is a dict with a "role").
"""

from __future__ import annotations

import collections
import json
import pathlib

import datasets
import pytest

from builder import training
from builder.build import build_dataset
from pallasbench_dataset.population.candidates import CANDIDATES, Candidate, to_jsonl
from pallasbench_dataset.schema import CandidateRow, Status, to_json_dict
from pallasbench_dataset.tasks import TASKS, list_tasks

from tests import runfixtures as rf

# TRL 1.10.0.dev0: the columns of each conversational type, and the keys is_conversational reads.
TRL_PROMPT_COMPLETION = {"prompt", "completion"}
TRL_PREFERENCE = {"prompt", "chosen", "rejected"}
TRL_CONVERSATIONAL_KEYS = ("prompt", "chosen", "rejected", "completion", "messages")


def is_conversational(example: dict) -> bool:
  """trl.data_utils.is_conversational (TRL 1.10.0.dev0), for every supported key present."""
  keys = [k for k in TRL_CONVERSATIONAL_KEYS if k in example]
  return bool(keys) and all(
      isinstance(example[k], list) and isinstance(example[k][0], dict) and "role" in example[k][0]
      for k in keys)


def _population_run(folder: pathlib.Path, trees, judged) -> pathlib.Path:
  """A population run folder as `population evaluate` writes it: (candidate, record fields)."""
  folder.mkdir(parents=True)
  candidates = [c for c, _ in judged]
  (folder / "manifest.json").write_text(json.dumps({"command": "population evaluate"}))
  (folder / CANDIDATES).write_text(to_jsonl(candidates))
  records = [rf.record(trees, c.task, "candidate", "small", kernel_sha256=c.sha256,
                       candidate=c.id, **fields) for c, fields in judged]
  (folder / "records.jsonl").write_text(
      "".join(json.dumps(to_json_dict(r)) + "\n" for r in records))
  return folder


def _candidate(name: str, task: str = "relu") -> Candidate:
  return Candidate(id=f"{task}/{name}", task=task, source=f"# {name}\ndef kernel(x): ...\n")


FAILED = dict(status=Status.INCORRECT, correct=False, runtime_ms=None, baseline_ms=None)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  root = tmp_path_factory.mktemp("training")
  trees = rf.write_tree(root)
  records = rf.standard_records(trees)
  run = rf.write_run(root / "run", records, rf.artifacts_for(records))
  pop = _population_run(root / "pop", trees, [
      (_candidate("fast"), dict(runtime_ms=0.25)), (_candidate("slow"), dict(runtime_ms=1.0)),
      (_candidate("bad"), FAILED), (_candidate("gelu-bad", "gelu"), FAILED),
      (_candidate("gelu-ok", "gelu"), {})])
  summary = build_dataset([run], root / "out", kernel_trees=trees, candidate_runs=[pop])
  cache = root / "hf-cache"
  load = {c: datasets.load_dataset(str(summary.out_dir), c, cache_dir=str(cache))
          for c in ("sft", "preference")}
  return summary, trees, load


def test_the_held_out_tasks_are_the_rule_s_and_level_balanced():
  levels = collections.defaultdict(list)
  for spec in list_tasks():
    levels[spec.level].append(spec.name)
  assert training.held_out(levels) == training.TEST_TASKS
  per_level = collections.Counter(TASKS[t].level for t in training.TEST_TASKS)
  assert per_level == {1: 5, 2: 3, 3: 1}  # a fifth of 27, 13 and 5


def test_configs_load_with_trl_columns_and_conversational_rows(built):
  summary, _, load = built
  assert set(load["sft"]) == {"train"}  # gelu, the fixture's held-out task, has no passing fix
  assert set(load["preference"]) == {"train", "test"}
  assert summary.rows["sft"] == {"train": 6} and summary.rows["preference"]["test"] == 2
  for config, columns, answers in (("sft", TRL_PROMPT_COMPLETION, ("completion",)),
                                   ("preference", TRL_PREFERENCE, ("chosen", "rejected"))):
    for split in load[config].values():
      assert columns <= set(split.column_names)
      for row in split:
        assert is_conversational(row), (config, row["task"])
        assert [m["role"] for m in row["prompt"]] == ["user"]
        for key in answers:
          (message,) = row[key]
          assert message["role"] == "assistant"
          assert message["content"].startswith("```python\n")
          assert message["content"].endswith("\n```")


def test_sft_completions_are_passing_fixed_kernels_with_write_and_fix_prompts(built):
  _, trees, load = built
  rows = list(load["sft"]["train"])
  assert collections.Counter((r["task"], r["prompt_kind"]) for r in rows) == {
      (t, k): 1 for t in ("relu", "matmul_relu", "flash_attention") for k in ("write", "fix")}
  for r in rows:
    assert r["status"] == "pass" and r["kernel"] == f"kernels_gpu/{r['task']}.py"
    fixed = trees.path("gpu", r["task"]).read_text()
    assert r["completion"][0]["content"] == training.fenced(fixed)
    prompt = r["prompt"][0]["content"]
    assert f"`{r['task']}`" in prompt and "```python\ndef reference" not in prompt
    assert TASKS[r["task"]].reference_source.strip() in prompt
    assert "2^20" in prompt and "(4096, 4096)" in prompt or r["task"] != "relu"
    original = trees.path("tpu", r["task"]).read_text().rstrip()
    assert (original in prompt) == (r["prompt_kind"] == "fix")
  fix = next(r for r in rows if r["task"] == "flash_attention" and r["prompt_kind"] == "fix")
  assert fix["original_status"] == "error"
  assert "Mosaic block shape (512, 512) exceeds the Triton limit" in fix["prompt"][0]["content"]


def test_preference_pairs_never_choose_a_failure_and_carry_both_verdicts(built):
  _, _, load = built
  pairs = {(r["pair_kind"], r["chosen_kernel"], r["rejected_kernel"]): r
           for split in load["preference"].values() for r in split}
  assert set(pairs) == {
      # gelu: the fixed kernel failed, the original passed; elsewhere the fix is 4x/3x faster...
      ("release", "kernels_tpu/gelu.py", "kernels_gpu/gelu.py"),
      ("release", "kernels_gpu/relu.py", "kernels_tpu/relu.py"),
      ("release", "kernels_gpu/matmul_relu.py", "kernels_tpu/matmul_relu.py"),
      ("release", "kernels_gpu/flash_attention.py", "kernels_tpu/flash_attention.py"),
      ("population", "pop/relu/fast", "pop/relu/bad"),
      ("population", "pop/relu/fast", "pop/relu/slow"),
      ("population", "pop/gelu/gelu-ok", "pop/gelu/gelu-bad")}
  for r in pairs.values():
    assert r["chosen_status"] == "pass", r
    assert r["rejected_status"] != "pass" or (
        r["timing_comparable"] and r["chosen_speedup"] >= 1.1 * r["rejected_speedup"])
  slow = pairs[("population", "pop/relu/fast", "pop/relu/slow")]
  assert (slow["chosen_speedup"], slow["rejected_speedup"]) == (4.0, 1.0)
  flash = pairs[("release", "kernels_gpu/flash_attention.py", "kernels_tpu/flash_attention.py")]
  assert (flash["rejected_status"], flash["rejected_speedup"]) == ("error", None)


def test_held_out_tasks_are_only_in_test_and_the_same_in_both_configs(built):
  _, _, load = built
  for config in load.values():
    for split, rows in config.items():
      assert {training.split_of(t) for t in rows["task"]} == {split}
  assert set(load["preference"]["test"]["task"]) == {"gelu"}


def test_card_describes_the_fine_tuning_configs(built):
  summary, _, _ = built
  text = (summary.out_dir / "README.md").read_text()
  assert "## Fine-tuning" in text and "config_name: sft" in text
  assert "config_name: preference" in text
  assert "Rows: train 6 (fix 3, write 3), test 0." in text
  assert "`gelu`, `tanh`, `batched_matmul`" in text


def _row(name: str, status: str, speedup: float | None, comparable: bool = True,
         sha: str | None = None) -> CandidateRow:
  return CandidateRow(
      candidate=name, run="r", task="relu", task_id=1, level=1, size="small", parent=None,
      kind=None, source=f"# {name}", kernel_sha256=sha or name, status=status,
      correct=status == "pass", speedup=speedup, speedup_eager=None, speedup_shipped=None,
      runtime_ms=None, baseline_ms=None, shipped_ms=None, reasons=(), error_type=None, error=None,
      cached=False, device="gpu",
      hardware="NVIDIA H200", timing_comparable=comparable, judge_version="2",
      measured_at="2026-11-20T10:00:00+00:00")


def test_population_pairs_rules():
  rows = [_row("a", "pass", 2.0), _row("b", "pass", 1.9), _row("c", "pass", 1.0),
          _row("d", "incorrect", None), _row("e", "rejected", None), _row("f", "timeout", None),
          _row("twin", "incorrect", None, sha="d")]
  pairs = [(p.chosen_kernel, p.rejected_kernel) for p in training.population_pairs(rows)]
  # b is within the 1.1x margin of a: no pair; the failures take the passing ones in turn;
  # twin has d's source and counts once.
  assert pairs == [("r/a", "r/c"), ("r/a", "r/d"), ("r/b", "r/e"), ("r/c", "r/f")]
  cpu = [_row("a", "pass", 2.0, comparable=False), _row("c", "pass", 1.0, comparable=False),
         _row("d", "incorrect", None, comparable=False)]
  assert [(p.chosen_kernel, p.rejected_kernel) for p in training.population_pairs(cpu)] == [
      ("r/a", "r/d")]  # CPU timings: no pair between two passes
  assert training.population_pairs([_row("d", "incorrect", None)]) == []
