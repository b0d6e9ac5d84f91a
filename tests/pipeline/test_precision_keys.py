"""Precision as part of every key that names an evaluation: a float32 and a
bfloat16 evaluation of one kernel and size never share a run folder's key, a resume's skip, a
verdict-cache entry or a measurement; float32 records that name no precision (no
`precision` field) have the same keys as those that do. And `--precisions` from the command line
and the release script to the plan and the manifest."""
# pylint: disable=protected-access  (the pipeline's keys and bookkeeping are what these check)

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import types

import pytest

from benchmarks import speed_goals
from builder import regenerate
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.pipeline import driver, report, stages, suite, verdicts
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.kernels import sha256
from pallasbench_dataset.schema import Artifacts, EvalRecord, Status, from_json_dict, to_json_dict
from pallasbench_dataset.tasks import get_task

from tests import runfixtures as rf
from tests.pipeline.test_in_process import (  # noqa: F401  (fixtures, and the stand-in judge)
    SETTINGS, _judge_stand_in, _lines_of, _options, _outcome, _run_suite, dask_cluster, processes,
    stand_ins)
from tests.paths import REPO

OPTIONS = EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1)


def _item(precision="float32", variant="gpu", task="relu", size="medium"):
  return driver.WorkItem(task=task, variant=variant, size=size, source="the same source",
                         filename=f"kernels_{variant}/{task}.py", options=OPTIONS,
                         precision=precision)


def _record(precision="float32", **overrides):
  return rf.record(types.SimpleNamespace(), "relu", kernel_sha256=sha256("the same source"),
                   precision=precision, **overrides)


def _artifacts(precision="float32"):
  return Artifacts(task="relu", variant="gpu", size="medium", jaxpr="j", stablehlo=None,
                   triton_ir=None, ptx=None, precision=precision)


def _old_line(obj) -> str:
  """A line that names no precision: no `precision` field."""
  data = to_json_dict(obj)
  assert data.pop("precision") == "float32"
  return json.dumps(data)


def _line(obj) -> str:
  return json.dumps(to_json_dict(obj))


def _write(run_dir, records, artifacts):
  run_dir.mkdir(parents=True, exist_ok=True)
  (run_dir / suite.RECORDS).write_text("".join(line + "\n" for line in records))
  (run_dir / suite.ARTIFACTS).write_text("".join(line + "\n" for line in artifacts))

# ---------------------------------------------------------------------------------------------
# The run folder's keys: reconcile, resume, the run's Dask keys.


def test_float32_keys_are_as_they_were_and_bfloat16_keys_differ():
  assert EvalKey.of(_item()).parts() == ("relu", "gpu", "medium")
  assert EvalKey.of(_item("bfloat16")).parts() == ("relu", "gpu", "medium", "bfloat16")
  old = from_json_dict(EvalRecord, json.loads(_old_line(_record())))
  assert EvalKey.of(old) == EvalKey.of(_item()) == EvalKey.of(_artifacts())
  assert suite._slug(_item("bfloat16")) == "relu-gpu-medium-bfloat16"
  candidate = dataclasses.replace(_item("bfloat16", "candidate"), candidate="relu/a")
  assert EvalKey.of(candidate).parts() == ("relu", "candidate", "medium", "bfloat16", "relu/a")


def test_reconcile_keeps_both_precisions_of_one_kernel_and_size(tmp_path):
  """An old float32 record (no precision field) and a bfloat16 record of the same kernel and
  size are two evaluations; a bfloat16 record whose only artifacts line is float32's has lost
  its own and is measured again."""
  _write(tmp_path, [_old_line(_record()), _line(_record("bfloat16"))],
         [_old_line(_artifacts()), _line(_artifacts("bfloat16"))])
  before = (tmp_path / suite.RECORDS).read_text()
  assert {k.parts() for k in suite.reconcile(tmp_path)} == {
      ("relu", "gpu", "medium"), ("relu", "gpu", "medium", "bfloat16")}
  assert (tmp_path / suite.RECORDS).read_text() == before  # nothing dropped: no rewrite
  _write(tmp_path, [_old_line(_record()), _line(_record("bfloat16"))], [_old_line(_artifacts())])
  assert {k.parts() for k in suite.reconcile(tmp_path)} == {("relu", "gpu", "medium")}
  assert [json.loads(line).get("precision") for line in
          (tmp_path / suite.RECORDS).read_text().splitlines()] == [None]


def _judge_at_the_items_precision(item, exported, notes, settings):
  """The stand-in judge stage, answering at the item's precision as the real one does."""
  record, artifacts = _judge_stand_in(item, exported, notes, settings)
  return (dataclasses.replace(record, precision=item.precision),
          dataclasses.replace(artifacts, precision=item.precision))


def test_a_resume_measures_the_bfloat16_half_a_float32_run_lacks(stand_ins, dask_cluster,
                                                                  tmp_path, monkeypatch):
  """A folder of float32 records that name no precision, resumed with both
  precisions planned: only the bfloat16 half is measured, each artifacts line carries its
  record's precision, and the resume's manifest entry names both precisions."""
  monkeypatch.setattr(stages, "judge_stage", _judge_at_the_items_precision)
  run_dir = tmp_path / "run"
  float32 = [_item(variant=v) for v in ("gpu", "tpu")]
  old = [dataclasses.replace(_record(), variant=v) for v in ("gpu", "tpu")]
  _write(run_dir, [_old_line(r) for r in old],
         [_old_line(dataclasses.replace(_artifacts(), variant=v)) for v in ("gpu", "tpu")])
  (run_dir / suite.MANIFEST).write_text(json.dumps({"command": "old", "sizes": ["medium"]}))
  both = float32 + [dataclasses.replace(i, precision="bfloat16") for i in float32]
  _run_suite(run_dir, both, _options(dask_cluster), resume=True)
  assert sorted(slug for stage, slug in stand_ins.events if stage == "judge") == [
      "relu-gpu-medium-bfloat16", "relu-tpu-medium-bfloat16"]
  records = _lines_of(run_dir / suite.RECORDS)
  assert [(r["variant"], r.get("precision")) for r in records] == [
      ("gpu", None), ("tpu", None), ("gpu", "bfloat16"), ("tpu", "bfloat16")]
  assert [a.get("precision") for a in _lines_of(run_dir / suite.ARTIFACTS)] == [
      None, None, "bfloat16", "bfloat16"]
  manifest = json.loads((run_dir / suite.MANIFEST).read_text())
  assert manifest["resumes"][0]["precisions"] == ["float32", "bfloat16"]
  assert (manifest["resumes"][0]["resumed_with"], "precisions" in manifest) == (2, False)


def test_a_new_run_records_its_precisions(stand_ins, dask_cluster, tmp_path):
  _run_suite(tmp_path / "a", [_item()], _options(dask_cluster))
  assert json.loads((tmp_path / "a" / suite.MANIFEST).read_text())["precisions"] == ["float32"]


def test_a_plain_rerun_continues_only_a_run_of_its_own_precisions(tmp_path):
  runs = tmp_path / "runs"

  def unfinished(name, **manifest):
    (runs / name).mkdir(parents=True)
    (runs / name / suite.MANIFEST).write_text(json.dumps(
        {"finished_at": None, "device": "cpu", "tasks": ["relu"], "sizes": ["medium"],
         "variants": ["gpu"], **manifest}))
  unfinished("cpu-1")  # names no precision: float32
  float32, bfloat16 = [_item()], [_item("bfloat16")]
  assert suite.unfinished_run(runs, float32, "cpu") == runs / "cpu-1"
  assert suite.unfinished_run(runs, bfloat16, "cpu") is None
  assert suite.unfinished_run(runs, float32 + bfloat16, "cpu") is None
  unfinished("cpu-2", precisions=["bfloat16"])
  assert suite.unfinished_run(runs, bfloat16, "cpu") == runs / "cpu-2"
  assert suite.unfinished_run(runs, float32, "cpu") == runs / "cpu-1"


def test_the_plan_is_the_same_tasks_variants_and_sizes_at_each_precision():
  specs = [get_task("relu"), get_task("gelu")]
  items = suite.plan(specs, ["tpu", "gpu"], ["small", "medium"], OPTIONS, ["float32", "bfloat16"])
  half = len(items) // 2
  assert [i.precision for i in items] == ["float32"] * half + ["bfloat16"] * half
  assert [dataclasses.replace(i, precision="float32") for i in items[half:]] == items[:half]
  assert suite.plan(specs, ["gpu"], ["small"], OPTIONS) == [
      i for i in items[:half] if i.variant == "gpu" and i.size == "small"]

# ---------------------------------------------------------------------------------------------
# The verdict cache and its twins.


def test_a_verdict_is_cached_under_its_precision_and_float32_entries_keep_their_names(tmp_path):
  cache = verdicts.VerdictCache(tmp_path)
  float32, bfloat16 = _item(), _item("bfloat16")
  key = verdicts.key_for(float32, rf.ENV)
  fields = {k: v for k, v in dataclasses.asdict(key).items() if k != "precision"}
  named = {k: v for k, v in fields.items() if k != "judge_code"}  # the code is in the entry
  before = json.dumps({"format": verdicts.FORMAT, **named}, sort_keys=True)
  assert key.digest() == hashlib.sha256(before.encode()).hexdigest()  # the name it always had
  cache.put(float32, _record(judge_version=key.judge_version), _artifacts())
  (entry,) = tmp_path.rglob("*.json")
  assert json.loads(entry.read_text())["key"] == fields
  assert cache.get(key) is not None
  assert cache.get(verdicts.key_for(bfloat16, rf.ENV)) is None
  cache.put(bfloat16, _record("bfloat16", judge_version=key.judge_version),
            _artifacts("bfloat16"))
  record, artifacts = cache.get(verdicts.key_for(bfloat16, rf.ENV))
  assert (record.precision, artifacts.precision) == ("bfloat16", "bfloat16")
  assert cache.get(key)[0].precision == "float32"


def test_one_source_at_two_precisions_is_measured_twice(tmp_path):
  measured = []

  def measure(items):
    measured.extend(i.precision for i in items)
    return [(i, _record(i.precision), _artifacts(i.precision)) for i in items]
  out = list(verdicts.evaluate([_item(), _item("bfloat16")], verdicts.VerdictCache(tmp_path),
                               None, measure))
  assert sorted(measured) == ["bfloat16", "float32"]
  assert sorted((r.precision, r.cached) for r, _ in out) == [("bfloat16", False),
                                                            ("float32", False)]

# ---------------------------------------------------------------------------------------------
# The judge's artifacts carry the item's precision.


def test_an_empty_artifacts_line_carries_the_items_precision():
  """A judge that never reported back still leaves its line under the item's key (the judge's
  own lines carry it: tests/judge/test_building_blocks.py::
  test_the_judge_s_artifacts_carry_the_item_s_precision)."""
  assert driver.empty_artifacts(_item("bfloat16")).precision == "bfloat16"

# ---------------------------------------------------------------------------------------------
# --precisions: the command line and the release script.


def test_regenerate_plans_each_precision_it_is_given(monkeypatch, tmp_path):
  runs = []
  monkeypatch.setattr(regenerate, "run_suite", lambda items, run_dir, **kw: runs.append(items))
  monkeypatch.setattr(regenerate, "git_commit", lambda: "c0ffee")
  parse = regenerate.build_parser().parse_args
  assert parse([]).precisions == ["float32"]
  assert parse(["--precisions", "float32,bfloat16"]).precisions == ["float32", "bfloat16"]
  with pytest.raises(SystemExit):
    parse(["--precisions", "float16"])
  argv = ["--tasks", "relu", "--variants", "gpu", "--results", str(tmp_path / "r"),
          "--precisions", "float32", "bfloat16"]
  regenerate._measure(parse(argv), "cpu", argv)
  regenerate._measure(parse(argv[:-3]), "cpu", argv[:-3])
  both, default = runs
  assert [(i.task, i.size, i.precision) for i in both] == [("relu", "small", "float32"),
                                                           ("relu", "small", "bfloat16")]
  assert default == both[:1]


def _release_run(tmp_path, **env):
  """scripts/release_run.sh in a copy of scripts/ whose gpu_run.sh prints its arguments."""
  scripts = tmp_path / "scripts"
  scripts.mkdir(exist_ok=True)
  shutil.copy(REPO / "scripts" / "release_run.sh", scripts)
  (scripts / "gpu_run.sh").write_text('printf "%s\\n" "$@"\n')
  run_env = {k: v for k, v in os.environ.items() if k != "PRECISIONS"}
  run_env.update(OUT=str(tmp_path), GIT_COMMIT="abc", **env)
  proc = subprocess.run(["bash", "scripts/release_run.sh", "h200-abc-run1"], cwd=tmp_path,
                        env=run_env, capture_output=True, text=True, timeout=30, check=True)
  return proc.stdout.split()


def test_the_release_script_passes_precisions_through_and_its_default_is_unchanged(tmp_path):
  default = ["h200-abc-run1", "--sizes", "medium", "large", "--variants", "tpu,gpu",
             "--git-commit", "abc"]
  assert _release_run(tmp_path) == default
  assert _release_run(tmp_path, PRECISIONS="float32 bfloat16") == [
      *default, "--precisions", "float32", "bfloat16"]
  assert regenerate.build_parser().parse_args(
      ["--precisions", "float32", "bfloat16"]).precisions == ["float32", "bfloat16"]


# ---------------------------------------------------------------------------------------------
# What reads a run folder: the report, and the speed goals (float32's).


def test_the_report_names_a_rows_precision_and_counts_each_apart(tmp_path, capsys):
  records = [_record(), _record("bfloat16", status=Status.INCORRECT, correct=False)]
  table = report.table(records).splitlines()
  assert " gpu medium pass " in " ".join(table[2].split()) and "medium/bfloat16" in table[3]
  assert report.summary(records, None).splitlines() == ["gpu medium: pass 1",
                                                        "gpu medium/bfloat16: incorrect 1"]
  _write(tmp_path, [_line(r) for r in records], [])
  assert report.main([str(tmp_path), "--precisions", "bfloat16"]) == 0
  printed = capsys.readouterr().out
  assert "medium/bfloat16" in printed and "gpu medium: pass" not in printed


def test_the_speed_goals_read_the_float32_records_of_a_run(tmp_path):
  slower = dataclasses.replace(_record("bfloat16"), speedup=0.25)
  _write(tmp_path, [_old_line(_record()), _line(slower)], [])
  assert speed_goals.speedups(tmp_path) == {("relu", "medium"): 2.0}
