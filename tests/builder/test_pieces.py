"""The builder's pieces, called directly: run folders read and merged, kernel trees, rows,
card sections, plots, the folder's checks and writing, and the push against a stand-in Hub
client. Fast (a few small builds), so that mutation testing can use them;
`builder/test_build.py`, `builder/test_disk_faults.py` and `builder/test_push.py` run the whole
build and push.
"""
# pylint: disable=protected-access  (the builder's internals are what these tests call)

import argparse
import dataclasses
import errno
import inspect
import json
import logging
import lzma
import os
import pathlib
import re
import shutil
import struct
import tempfile
import time
import types

import datasets
import httpx2
import matplotlib
import matplotlib.colors as mcolors
import jinja2
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from huggingface_hub import DatasetCard

from builder import build, card, plots, push, regenerate, validate
from builder import candidates as bc
from builder import records as rec
from builder import release, repeats, rows, sections, tables
from builder.sections.inputs import CardInputs
from builder.records import BuildError
from builder.trees import KernelTrees, check_sha256, fix_patch, gpu_fix
from builder.trees import _lines as trees_lines
from pallasbench_dataset import inputs, kernels, schema
from pallasbench_dataset.evaluation.pipeline import run_options
from pallasbench_dataset.evaluation.pipeline import stages as stages_module
from pallasbench_dataset.evaluation.pipeline import suite as suite_module
from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.evaluation.pipeline.suite import ClusterOptions
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.population.candidates import CANDIDATES, Candidate, to_jsonl
from pallasbench_dataset.schema import (
    Artifacts, Environment, ErrorType, FilterResult, Status, SummaryRow, to_json_dict)
from pallasbench_dataset.tasks import TASKS, get_task

from tests import runfixtures as rf


@pytest.fixture
def trees(tmp_path):
  return rf.write_tree(tmp_path / "src")


def _write_lines(path: pathlib.Path, items) -> None:
  path.write_text("".join(json.dumps(to_json_dict(i)) + "\n" for i in items))


def _edit(path: pathlib.Path, line: int, **changes) -> None:
  """Changes fields of the JSON object on one line (0-based) of a JSON Lines file."""
  lines = path.read_text().splitlines()
  data = json.loads(lines[line])
  data.update(changes)
  lines[line] = json.dumps(data)
  path.write_text("\n".join(lines) + "\n")


def _raises(match_exactly: str, function, *args, **kwargs):
  with pytest.raises(BuildError) as info:
    function(*args, **kwargs)
  assert str(info.value) == match_exactly
  return info.value

# ---------------------------------------------------------------------------------------------
# records: reading a run folder


def test_read_run_reads_every_file(trees, tmp_path):
  records = rf.standard_records(trees)
  path = rf.write_run(tmp_path / "runs" / "h200-a", records, rf.artifacts_for(records))
  run = rec.read_run(path)
  assert (run.name, run.path) == ("h200-a", path)
  assert run.records == tuple(records) and run.artifacts == tuple(rf.artifacts_for(records))
  assert run.records_artifacts is True
  assert run.manifest.command == "python -m builder.regenerate --device gpu --out data"
  assert run.manifest.sizes == ("medium",) and run.manifest.variants == ("tpu", "gpu")
  assert run.manifest.tasks == rf.TASKS and run.manifest.device == "gpu"
  assert run.manifest.environment == rf.ENV and run.manifest.git_commit == rf.ENV.git_commit
  assert run.manifest.ceilings == rec.Ceilings(copy_gbps=3900.0, read_gbps=4000.0,
                                               bandwidth_gbps=4000.0, matmul_tflops=400.0,
                                               method="cupti: 1 GiB copy and read-only sum")
  assert run.manifest.per_device == (
      rec.DeviceCeilings(device="0", ceilings=run.manifest.ceilings),)
  assert (run.manifest.started_at, run.manifest.finished_at) == (
      "2026-11-20T09:00:00+00:00", "2026-11-20T11:00:00+00:00")
  assert run.manifest.resumes == ()


def test_read_run_without_artifacts_and_by_a_relative_name(trees, tmp_path, monkeypatch):
  path = rf.write_run(tmp_path / "run", rf.standard_records(trees))
  monkeypatch.chdir(path)
  run = rec.read_run(".")
  assert run.name == "run" and run.path == pathlib.Path(".")
  assert run.artifacts == () and run.records_artifacts is False

def test_a_packed_run_reads_as_the_run_it_was_packed_from(trees, tmp_path):
  """A release's results/<run>/ holds artifacts.jsonl.xz: read as the plain file was, and
  packed again byte for byte (the card's rebuild starts from it)."""
  records = rf.standard_records(trees)
  plain = rf.write_run(tmp_path / "plain" / "run", records, rf.artifacts_for(records))
  packed = tmp_path / "packed" / "run"
  shutil.copytree(plain, packed)
  (packed / "artifacts.jsonl").unlink()
  rec.pack_artifacts(plain / "artifacts.jsonl", packed)
  assert len((packed / "artifacts.jsonl.xz").read_bytes()) < len(
      (plain / "artifacts.jsonl").read_bytes())
  a, b = rec.read_run(plain), rec.read_run(packed)
  assert (b.records, b.artifacts, b.records_artifacts) == (a.records, a.artifacts, True)
  again = tmp_path / "again"
  again.mkdir()
  rec.pack_artifacts(packed / "artifacts.jsonl.xz", again)
  assert (again / "artifacts.jsonl.xz").read_bytes() == (packed / "artifacts.jsonl.xz").read_bytes()


def test_a_run_with_two_artifacts_files_or_a_broken_pack_is_refused(trees, tmp_path):
  records = rf.standard_records(trees)
  path = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  rec.pack_artifacts(path / "artifacts.jsonl", path)
  _raises(f"{path} holds both artifacts.jsonl and artifacts.jsonl.xz; keep the one the run "
          "wrote", rec.read_run, path)
  (path / "artifacts.jsonl").unlink()
  (path / "artifacts.jsonl.xz").write_bytes(b"not xz")
  with pytest.raises(BuildError, match=re.escape(f"{path / 'artifacts.jsonl.xz'} is not a "
                                                 "readable xz file")):
    rec.read_run(path)



def test_read_run_refuses_missing_files(trees, tmp_path):
  _raises(f"run folder {str(tmp_path / 'absent')!r} does not exist", rec.read_run,
          tmp_path / "absent")
  (tmp_path / "file").write_text("")
  _raises(f"run folder {str(tmp_path / 'file')!r} does not exist", rec.read_run, tmp_path / "file")
  path = rf.write_run(tmp_path / "run", rf.standard_records(trees))
  (path / "records.jsonl").unlink()
  _raises(f"{path / 'records.jsonl'} is missing: a run folder needs manifest.json and "
          "records.jsonl", rec.read_run, path)
  (path / "records.jsonl").mkdir()
  _raises(f"{path / 'records.jsonl'} is missing: a run folder needs manifest.json and "
          "records.jsonl", rec.read_run, path)
  (path / "manifest.json").unlink()
  _raises(f"{path / 'manifest.json'} is missing: a run folder needs manifest.json and "
          "records.jsonl", rec.read_run, path)


def test_read_run_names_the_item_and_file_at_fault(trees, tmp_path):
  records = rf.standard_records(trees)
  path = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  where = path / "records.jsonl"
  _edit(where, 1, task="nope")
  known = ", ".join(TASKS)
  _raises(f"{where} (nope/tpu/medium): unknown task 'nope'; known tasks: {known}",
          rec.read_run, path)
  _write_lines(where, records)
  _edit(path / "artifacts.jsonl", 2, variant="candidate")
  _raises(f"{path / 'artifacts.jsonl'} (gelu/candidate/medium): variant 'candidate' is not one "
          "of ('tpu', 'gpu'); candidate evaluations do not belong in the dataset",
          rec.read_run, path)
  _write_lines(path / "artifacts.jsonl", rf.artifacts_for(records))
  _edit(where, 0, size="huge")
  _raises(f"{where} (relu/gpu/huge): unknown size 'huge'; sizes: "
          "['small', 'medium', 'large', 'edge']", rec.read_run, path)
  _write_lines(where, records)
  _edit(where, 3, level=3)
  _raises(f"{where}: record 'gelu' says task_id 2, level 3; the registry says 2, 1",
          rec.read_run, path)
  _write_lines(where, records)
  _edit(where, 2, task_id=5)
  _raises(f"{where}: record 'gelu' says task_id 5, level 1; the registry says 2, 1",
          rec.read_run, path)
  _write_lines(where, records + [records[4]])
  _raises(f"{where}: matmul_relu/gpu/medium appears twice; a run holds one evaluation per "
          "(task, variant, size) at each precision: remove the stale line", rec.read_run, path)
  _write_lines(where, records)
  _write_lines(path / "artifacts.jsonl", rf.artifacts_for(records) + rf.artifacts_for(records[7:]))
  _raises(f"{path / 'artifacts.jsonl'}: flash_attention/tpu/medium appears twice; a run holds "
          "one evaluation per (task, variant, size) at each precision: remove the stale line",
          rec.read_run, path)


def test_read_run_checks_every_speedup(trees, tmp_path):
  path = tmp_path / "run"

  def refused(record, message):
    rf.write_run(path, [record], tasks=("relu",))
    _raises(f"{path / 'records.jsonl'}: relu/gpu/medium {message}", rec.read_run, path)
  refused(rf.record(trees, "relu", speedup=2.5),
          "speedup 2.5 is not baseline_ms / runtime_ms = 2.0; fix the evaluator")
  refused(rf.record(trees, "relu", eager_ms=3.0, speedup_eager=2.0),
          "speedup_eager 2.0 is not eager_baseline_ms / runtime_ms = 6.0; fix the evaluator")
  refused(rf.record(trees, "relu", runtime_ms=None, speedup=2.0),
          "has a speedup but no baseline_ms or runtime_ms")
  refused(rf.record(trees, "relu", baseline_ms=None, speedup=2.0),
          "has a speedup but no baseline_ms or runtime_ms")
  refused(dataclasses.replace(rf.record(trees, "relu"), runtime_ms=0.0),
          "has a speedup but no baseline_ms or runtime_ms")
  refused(rf.record(trees, "relu", speedup_eager=2.0),
          "has a speedup_eager but no eager_baseline_ms or runtime_ms")
  refused(rf.record(trees, "relu", baseline_ms=None, eager_ms=3.0, speedup_eager=2.0),
          "speedup_eager 2.0 is not eager_baseline_ms / runtime_ms = 6.0; fix the evaluator")
  refused(rf.record(trees, "relu", shipped_ms=1.5, speedup_shipped=2.0),
          "speedup_shipped 2.0 is not shipped_ms / runtime_ms = 3.0; fix the evaluator")
  refused(rf.record(trees, "relu", speedup_shipped=2.0),
          "has a speedup_shipped but no shipped_ms or runtime_ms")
  # within a relative 1e-6 of the quotient: accepted, either side
  for speedup in (2.0 * (1 + 0.9e-6), 2.0 * (1 - 0.9e-6)):
    rf.write_run(path, [rf.record(trees, "relu", speedup=speedup)], tasks=("relu",))
    assert rec.read_run(path).records[0].speedup == speedup
  refused(rf.record(trees, "relu", speedup=2.0 * (1 - 1.1e-6)),
          f"speedup {2.0 * (1 - 1.1e-6)!r} is not baseline_ms / runtime_ms = 2.0; fix the "
          "evaluator")
  # an eager speedup alone, and no speedup at all, are fine
  rf.write_run(path, [rf.record(trees, "relu", runtime_ms=0.5, baseline_ms=None, eager_ms=1.0)],
               tasks=("relu",))
  assert rec.read_run(path).records[0].speedup_eager == 2.0
  rf.write_run(path, [rf.record(trees, "relu", runtime_ms=None, baseline_ms=None)],
               tasks=("relu",))
  assert rec.read_run(path).records[0].speedup is None


def test_read_jsonl_skips_torn_and_blank_lines_and_refuses_bad_ones(trees, tmp_path, caplog):
  records = rf.standard_records(trees)[:2]
  path = tmp_path / "records.jsonl"
  good = [json.dumps(to_json_dict(r)) for r in records]
  path.write_text(good[0] + "\n\n   \n" + good[1][:50] + "\n" + good[1] + "\n")
  with caplog.at_level(logging.WARNING, logger=rec.__name__):
    assert list(rec.read_jsonl(path, rec.EvalRecord)) == records
  (warning,) = [r.getMessage() for r in caplog.records if r.name == rec.__name__]
  assert warning == (f"{path}:4 is not JSON (a torn write?), skipped: Unterminated string "
                     "starting at: line 1 column 44 (char 43)")  # where the line broke off
  path.write_text(good[0] + "\n[1, 2]\n")
  _raises(f"{path}:2: not a valid EvalRecord: a line must hold one JSON object",
          list, rec.read_jsonl(path, rec.EvalRecord))
  path.write_text('{"task": "relu"}\n')
  error = _raises(str(_error_of(path, rec.Artifacts)), list,
                  rec.read_jsonl(path, rec.Artifacts))
  assert str(error).startswith(f"{path}:1: not a valid Artifacts: Artifacts: unknown keys [], "
                               "missing keys ['jaxpr', ")
  data = to_json_dict(rf.artifacts_for(records)[0])
  path.write_text(json.dumps({**data, "jaxpr": 5}) + "\n")
  assert str(_error_of(path, rec.Artifacts)).startswith(f"{path}:1: not a valid Artifacts: ")


def _error_of(path, cls):
  with pytest.raises(BuildError) as info:
    list(rec.read_jsonl(path, cls))
  return info.value


def test_load_json_refuses_what_is_not_a_json_object(tmp_path):
  path = tmp_path / "manifest.json"
  path.write_text("{not json")
  error = _raises(str(_load_error(path)), rec._load_json, path)
  assert str(error).startswith(f"{path} is not valid JSON: Expecting property name")
  path.write_text("[1]")
  _raises(f"{path} must hold a JSON object", rec._load_json, path)
  path.write_text('{"a": 1}')
  assert rec._load_json(path) == {"a": 1}


def _load_error(path):
  with pytest.raises(BuildError) as info:
    rec._load_json(path)
  return info.value


def test_read_manifest_picks_the_known_keys(tmp_path):
  path = tmp_path / "manifest.json"
  resume = {"command": "regen --resume", "started_at": "s", "finished_at": None,
            "git_commit": "c2", "sizes": ["large"], "variants": ["gpu"], "tasks": ["relu"],
            "argv": ["x"], "resumed_with": 3,
            "per_device": [{"device": 1, "ceilings": {"copy_gbps": 1.0, "read_gbps": 2.0,
                                                      "matmul_tflops": 3.0, "extra": 4}}]}
  path.write_text(json.dumps(rf.manifest(resumes=[resume], per_device=[
      {"device": 0, "ceilings": None, "environment": {}}])))
  manifest = rec.read_manifest(path)
  assert manifest.per_device == (rec.DeviceCeilings(device="0", ceilings=None),)
  (segment,) = manifest.resumes
  assert segment == rec.Resume(
      command="regen --resume", started_at="s", finished_at=None, git_commit="c2",
      sizes=("large",), variants=("gpu",), tasks=("relu",),
      per_device=(rec.DeviceCeilings(device="1", ceilings=rec.Ceilings(
          copy_gbps=1.0, read_gbps=2.0, bandwidth_gbps=None, matmul_tflops=3.0, method=None)),))
  assert {k.parts() for k in manifest.planned()} == (
      {(t, v, "medium") for t in rf.TASKS for v in ("tpu", "gpu")} | {("relu", "gpu", "large")})
  # a resume without per_device entries, a manifest without resumes
  data = rf.manifest(resumes=[{k: v for k, v in resume.items() if k != "per_device"}])
  path.write_text(json.dumps(data))
  assert rec.read_manifest(path).resumes[0].per_device == ()
  del data["resumes"]
  path.write_text(json.dumps(data))
  assert rec.read_manifest(path).resumes == ()
  del data["per_device"]  # every manifest the suite writes has it
  path.write_text(json.dumps(data))
  _raises(f"{path} lacks the keys ['per_device']; it must be written by the evaluator",
          rec.read_manifest, path)


def test_read_manifest_refuses_incomplete_or_invalid_manifests(tmp_path):
  path = tmp_path / "manifest.json"
  data = rf.manifest()
  for key in ("command", "tasks", "environment"):
    del data[key]
  path.write_text(json.dumps(data))
  _raises(f"{path} lacks the keys ['command', 'environment', 'tasks']; it must be written by the "
          "evaluator", rec.read_manifest, path)
  path.write_text(json.dumps(rf.manifest(command=5)))
  error = _raises(str(_manifest_error(path)), rec.read_manifest, path)
  assert str(error).startswith(f"{path} is not a valid run manifest: ")
  for bad in (5, [5], {"device": "0", "ceilings": 5}):
    path.write_text(json.dumps(rf.manifest(per_device=bad if isinstance(bad, (int, list))
                                           else [bad])))
    assert str(_manifest_error(path)).startswith(f"{path} is not a valid run manifest: ")
  path.write_text(json.dumps(rf.manifest(resumes=[5])))
  assert str(_manifest_error(path)).startswith(f"{path} is not a valid run manifest: ")
  path.write_text(json.dumps(rf.manifest(ceilings=7)))
  assert str(_manifest_error(path)).startswith(f"{path} is not a valid run manifest: ")
  path.write_text(json.dumps(rf.manifest(tasks=["nope"])))
  _raises(f"{path}: unknown task 'nope'; known tasks: {', '.join(TASKS)}", rec.read_manifest,
          path)


def _manifest_error(path):
  with pytest.raises(BuildError) as info:
    rec.read_manifest(path)
  return info.value


def test_pick_helpers_pass_other_values_through():
  assert rec._pick_ceilings(None) is None
  assert rec._pick_ceilings({"copy_gbps": 1.0, "x": 2}) == {
      "copy_gbps": 1.0, "read_gbps": None, "bandwidth_gbps": None, "matmul_tflops": None,
      "method": None}
  assert rec._pick_devices("x") == "x"
  assert rec._pick_devices([7, {"ceilings": None}]) == [
      7, {"device": "None", "ceilings": None}]
  assert rec._pick_segment("x") == "x"

# ---------------------------------------------------------------------------------------------
# records: merging runs and what is missing


def _run(trees, tmp_path, name, records, artifacts=None, **manifest):
  path = rf.write_run(tmp_path / name, records, artifacts or (), **manifest)
  if artifacts is not None and not artifacts:
    (path / "artifacts.jsonl").write_text("")
  return rec.read_run(path)


def test_merge_runs_first_run_wins_and_later_ones_are_repeats(trees, tmp_path):
  first = [rf.record(trees, "gelu", "gpu"), rf.record(trees, "relu", "gpu")]
  second = [rf.record(trees, "relu", "gpu", runtime_ms=0.25),
            rf.record(trees, "relu", "tpu"), rf.record(trees, "gelu", "gpu", runtime_ms=0.4)]
  third = [rf.record(trees, "relu", "tpu", runtime_ms=0.3)]
  runs = [_run(trees, tmp_path, "a", first, rf.artifacts_for(first)),
          _run(trees, tmp_path, "b", second, rf.artifacts_for(second)),
          _run(trees, tmp_path, "c", third)]
  merged = rec.merge_runs(runs)
  assert merged.records == (first[1], second[1], first[0])  # task id, then variant
  assert [EvalKey.of(a).parts() for a in merged.artifacts] == [
      ("relu", "gpu", "medium"), ("relu", "tpu", "medium"), ("gelu", "gpu", "medium")]
  assert merged.artifacts[0] == rf.artifacts_for(first)[1]  # the row's run gives the artifacts
  assert {k.parts(): run for k, run in merged.source_run.items()} == {
      ("gelu", "gpu", "medium"): "a", ("relu", "gpu", "medium"): "a", ("relu", "tpu", "medium"): "b"}
  assert merged.repeats == (("b", (second[0], second[2])), ("c", (third[0],)))
  assert rec.merge_runs(runs[:1]).repeats == ()


def test_sort_key_is_task_id_variant_size():
  items = [Artifacts(task=t, variant=v, size=s, jaxpr=None, stablehlo=None, triton_ir=None,
                     ptx=None)
           for t, v, s in [("gelu", "gpu", "large"), ("relu", "tpu", "medium"),
                           ("gelu", "gpu", "edge"), ("relu", "gpu", "small")]]
  assert [EvalKey.of(i).parts() for i in sorted(items, key=rec.sort_key)] == [
      ("relu", "gpu", "small"), ("relu", "tpu", "medium"), ("gelu", "gpu", "edge"),
      ("gelu", "gpu", "large")]


def _named(missing):
  """(run, key) pairs with each key as its parts."""
  return [(run, key.parts()) for run, key in missing]


def test_missing_artifacts_names_records_without_their_line(trees, tmp_path):
  records = [rf.record(trees, "relu"), rf.record(trees, "relu", "tpu"),
             rf.record(trees, "gelu", status=Status.TIMEOUT, error_type=ErrorType.TIMEOUT,
                       runtime_ms=None, baseline_ms=None),
             rf.record(trees, "silu", status=Status.ERROR, error_type=ErrorType.COMPILE,
                       runtime_ms=None, baseline_ms=None, kernel_sha256="0" * 64)]
  for error_type in rec.NO_ARTIFACTS:
    records.append(rf.record(trees, "tanh", status=Status.ERROR, error_type=error_type,
                             runtime_ms=None, baseline_ms=None, kernel_sha256="0" * 64))
    run = _run(trees, tmp_path, "a", records, rf.artifacts_for(records[:1]),
               tasks=("relu", "gelu", "silu", "tanh"))
    assert _named(rec.missing_artifacts([run])) == [("a", ("relu", "tpu", "medium")),
                                            ("a", ("silu", "gpu", "medium"))]
    records.pop()
  without = _run(trees, tmp_path, "b", records)  # no artifacts.jsonl: nothing expected
  assert rec.missing_artifacts([without]) == []
  empty = _run(trees, tmp_path, "c", records[:1], [])
  assert _named(rec.missing_artifacts([without, empty])) == [("c", ("relu", "gpu", "medium"))]
  also = _run(trees, tmp_path, "d", records[1:2], [])
  assert _named(rec.missing_artifacts([empty, without, also])) == [
      ("c", ("relu", "gpu", "medium")), ("d", ("relu", "tpu", "medium"))]


def test_check_artifacts_lists_each_lost_line():
  rec.check_artifacts([], allow_partial=False)
  lost = [("a", EvalKey("relu", "gpu", "medium")), ("b", EvalKey("gelu", "tpu", "large"))]
  rec.check_artifacts(lost, allow_partial=True)
  _raises("2 record(s) have no line in their run's artifacts.jsonl: a: relu/gpu/medium, "
          "b: gelu/tpu/large. Re-measure them (remove their lines from records.jsonl, then "
          "regenerate --resume --results RUN), or build with --allow-partial (the card then "
          "lists every missing artifact)", rec.check_artifacts, lost, allow_partial=False)


def test_pick_headline(trees, tmp_path):
  def runs(*sizes_records, planned=(("medium",),)):
    out = []
    for i, (records, sizes) in enumerate(zip(sizes_records, planned)):
      out.append(_run(trees, tmp_path, f"r{i}", records, sizes=sizes))
    return out
  gpu = lambda size, variant="gpu": rf.record(trees, "relu", variant, size)  # noqa: E731
  both = runs([gpu("large"), gpu("medium")], planned=[("large", "medium")])
  assert rec.pick_headline(both, rec.merge_runs(both)) == "medium"
  planned = runs([gpu("large"), gpu("small")], planned=[("small", "large")])
  assert rec.pick_headline(planned, rec.merge_runs(planned)) == "small"
  resumed = [_run(trees, tmp_path, "s", [gpu("large"), gpu("small")], sizes=["edge"], resumes=[
      {"command": "c", "started_at": "s", "finished_at": None, "git_commit": None,
       "sizes": ["large"], "variants": ["gpu"], "tasks": ["relu"]}])]
  assert rec.pick_headline(resumed, rec.merge_runs(resumed)) == "large"
  unplanned = runs([gpu("large"), gpu("edge"), gpu("medium", "tpu")], planned=[("small",)])
  assert rec.pick_headline(unplanned, rec.merge_runs(unplanned)) == "large"
  bfloat16 = runs([gpu("large"), dataclasses.replace(gpu("medium"), precision="bfloat16")],
                  planned=[("large", "medium")])
  assert rec.pick_headline(bfloat16, rec.merge_runs(bfloat16)) == "large"  # the default's: float32
  originals = runs([gpu("medium", "tpu")])
  _raises("the runs hold no record of the fixed kernels (variant gpu) at float32 at any size: "
          "nothing to build (the default config is float32); measure with --variants gpu (or "
          "tpu,gpu) at float32 (--precisions float32, the default)", rec.pick_headline, originals,
          rec.merge_runs(originals))


def test_check_headline_measured_names_the_sizes_measured(trees, tmp_path):
  run = _run(trees, tmp_path, "a", [rf.record(trees, "relu", "gpu", s)
                                    for s in ("large", "edge", "small")]
             + [rf.record(trees, "relu", "tpu", "medium")])
  merged = rec.merge_runs([run])
  rec.check_headline_measured(merged, "large")
  _raises("the headline size 'medium' lacks records for every task: the runs measured the "
          "fixed kernels at small, large, edge; pass --headline-size small (or leave it out: "
          "medium when measured, else the first size measured)",
          rec.check_headline_measured, merged, "medium")
  nothing = rec.merge_runs([_run(trees, tmp_path, "b", [rf.record(trees, "relu", "tpu")])])
  _raises("the headline size 'medium' lacks records for every task: the runs measured the "
          "fixed kernels at no size; pass --headline-size SIZE (or leave it out: medium when "
          "measured, else the first size measured)", rec.check_headline_measured, nothing,
          "medium")


def test_unmeasured_lists_planned_and_headline_rows_missing(trees, tmp_path):
  run = _run(trees, tmp_path, "a", [rf.record(trees, "relu", "gpu"),
                                    rf.record(trees, "silu", "tpu", "large",
                                              kernel_sha256="0" * 64)],
             tasks=("relu", "gelu"), sizes=("medium", "large"), variants=("tpu", "gpu"))
  merged = rec.merge_runs([run])
  assert [k.parts() for k in rec.unmeasured([run], merged, "medium")] == [
      ("relu", "tpu", "medium"), ("gelu", "gpu", "medium"), ("gelu", "tpu", "medium"),
      ("silu", "gpu", "medium"),                                   # the headline row of silu
      ("relu", "gpu", "large"), ("relu", "tpu", "large"), ("gelu", "gpu", "large"),
      ("gelu", "tpu", "large")]
  assert [k.parts() for k in rec.unmeasured([run], merged, "large")[:3]] == [
      ("relu", "gpu", "large"), ("relu", "tpu", "large"), ("gelu", "gpu", "large")]


def test_check_headline_refuses_only_missing_headline_rows():
  missing = [EvalKey("relu", "tpu", "medium"), EvalKey("gelu", "gpu", "medium"),
             EvalKey("relu", "gpu", "large")]
  rec.check_headline(missing[2:], "medium", allow_partial=False)
  rec.check_headline(missing, "medium", allow_partial=True)
  _raises("the headline size 'medium' lacks records for 2 evaluation(s): relu (tpu), gelu "
          "(gpu). To build what was measured, pass --allow-partial (the card then lists every "
          "evaluation that was not measured); or finish the run (regenerate --resume), or add a "
          "run folder that measured them", rec.check_headline, missing, "medium",
          allow_partial=False)

# ---------------------------------------------------------------------------------------------
# trees


def test_shipped_trees_and_paths(tmp_path):
  shipped = KernelTrees.shipped()
  assert shipped == KernelTrees(tpu=kernels.tree_dir("tpu"), gpu=kernels.tree_dir("gpu"))
  assert (shipped.tpu.name, shipped.gpu.name) == ("kernels_tpu", "kernels_gpu")
  trees = KernelTrees(tpu=tmp_path / "t", gpu=tmp_path / "g")
  assert (trees.dir("tpu"), trees.dir("gpu")) == (tmp_path / "t", tmp_path / "g")
  assert trees.path("gpu", "relu") == tmp_path / "g" / "relu.py"
  with pytest.raises(KeyError):
    trees.dir("candidate")


def test_tree_sources_and_files(trees):
  (trees.gpu / "notes.py").write_text("")       # not a task
  (trees.gpu / "relu.txt").write_text("")       # not a module
  assert trees.files("gpu") == tuple(trees.gpu / f"{t}.py" for t in sorted(rf.TASKS))
  assert trees.files("tpu") == tuple(trees.tpu / f"{t}.py" for t in sorted(rf.TASKS))
  assert trees.source("tpu", "relu") == trees.path("tpu", "relu").read_text()
  assert trees.source("gpu", "relu") != trees.source("tpu", "relu")
  _raises(f"{trees.path('gpu', 'silu')} does not exist, but the records measured it: restore "
          "the kernel file or drop its records", trees.source, "gpu", "silu")
  trees.path("gpu", "silu").mkdir()
  with pytest.raises(BuildError, match="does not exist"):
    trees.source("gpu", "silu")


def test_check_sha256_names_every_stale_record(trees):
  fresh = [rf.record(trees, "relu", "gpu"), rf.record(trees, "relu", "tpu")]
  check_sha256(fresh, trees)
  stale = [rf.record(trees, "gelu", "tpu", "large", kernel_sha256="0" * 64),
           fresh[0], rf.record(trees, "relu", "tpu", kernel_sha256=rf.sha(trees, "gpu", "relu"))]
  _raises("2 record(s) measured a kernel that differs from the file in the trees "
          "(gelu/tpu/large, relu/tpu/medium): the rows would publish code that was not measured. "
          "To rebuild a released folder, pass --kernel-trees with it (e.g. --kernel-trees data: "
          "it holds the kernels its rows measured); else re-measure them (regenerate --tasks ...) "
          "or restore the measured kernel files",
          check_sha256, stale, trees)


def test_gpu_fix_reads_the_constants_by_loading_the_module(trees):
  assert gpu_fix(trees, "relu") == ("tile_relu", "blocks of relu exceeded the Triton limit; tiled")
  path = trees.path("gpu", "gelu")
  text = path.read_text()
  for broken in (text.replace('FIX_REASON = "', 'FIX_REASON = "" and "'),
                 text.replace('FIX_APPLIED = "tile_gelu"', "FIX_APPLIED = 3"),
                 text.replace("FIX_APPLIED", "FIX"), text.replace("FIX_REASON", "WHY")):
    path.write_text(broken)
    _raises(f"{path} must define FIX_APPLIED and FIX_REASON as non-empty strings", gpu_fix,
            trees, "gelu")
  path.write_text(text + "\ndef broken(:\n")
  _raises(f"cannot load {path}: syntax error in {path}, line 11: invalid syntax", gpu_fix,
          trees, "gelu")
  assert _gpu_fix_error(trees, "gelu").__cause__ is None


def _gpu_fix_error(trees, task):
  with pytest.raises(BuildError) as info:
    gpu_fix(trees, task)
  return info.value


def test_fix_patch_text(tmp_path):
  """Copies with the fix's hunks, an unchanged copy, a new file, a missing final newline."""
  trees = KernelTrees(tpu=tmp_path / "kernels_tpu", gpu=tmp_path / "kernels_gpu")
  files = {"tpu": {"relu": "a\nb\n", "gelu": "same\n", "tanh": "x\n"},
           "gpu": {"relu": "a\nc\n", "gelu": "same\n", "silu": "new\n", "tanh": "x"}}
  for variant, sources in files.items():
    trees.dir(variant).mkdir()
    (trees.dir(variant) / "__init__.py").write_text("")
    for task, text in sources.items():
      trees.path(variant, task).write_text(text)
  assert fix_patch(trees) == (
      "diff --git a/kernels_tpu/gelu.py b/kernels_gpu/gelu.py\n"
      "similarity index 100%\n"
      "copy from kernels_tpu/gelu.py\n"
      "copy to kernels_gpu/gelu.py\n"
      "diff --git a/kernels_tpu/relu.py b/kernels_gpu/relu.py\n"
      "copy from kernels_tpu/relu.py\n"
      "copy to kernels_gpu/relu.py\n"
      "--- a/kernels_tpu/relu.py\n"
      "+++ b/kernels_gpu/relu.py\n"
      "@@ -1,2 +1,2 @@\n"
      " a\n-b\n+c\n"
      "diff --git a/kernels_gpu/silu.py b/kernels_gpu/silu.py\n"
      "new file mode 100644\n"
      "--- /dev/null\n"
      "+++ b/kernels_gpu/silu.py\n"
      "@@ -0,0 +1 @@\n"
      "+new\n"
      "diff --git a/kernels_tpu/tanh.py b/kernels_gpu/tanh.py\n"
      "copy from kernels_tpu/tanh.py\n"
      "copy to kernels_gpu/tanh.py\n"
      "--- a/kernels_tpu/tanh.py\n"
      "+++ b/kernels_gpu/tanh.py\n"
      "@@ -1 +1 @@\n"
      "-x\n"
      "+x\n"
      "\\ No newline at end of file\n")
  assert trees_lines(tmp_path / "absent.py") == []
  (tmp_path / "empty.py").write_text("")
  assert trees_lines(tmp_path / "empty.py") == []

# ---------------------------------------------------------------------------------------------
# rows


def test_backend_kernel_name_compile_time_and_roofline_fraction(trees):
  record = rf.record(trees, "relu")
  assert rows.backend(record) == "triton"
  assert rows.backend(dataclasses.replace(record, interpret=True)) == "interpret (CPU)"
  assert rows.backend(dataclasses.replace(record, device="cpu", interpret=False)) == (
      "interpret (CPU)")
  assert rows.kernel_name("relu") == "relu_gpu_fixed"
  profile = record.compile
  assert rows.compile_time_s(record) == pytest.approx(1.0)
  assert rows.compile_time_s(dataclasses.replace(record, compile=dataclasses.replace(
      profile, trace_s=None, lower_s=0.25))) == pytest.approx(0.95)
  assert rows.compile_time_s(dataclasses.replace(record, compile=dataclasses.replace(
      profile, lower_s=None))) == pytest.approx(0.8)
  assert rows.compile_time_s(dataclasses.replace(record, compile=dataclasses.replace(
      profile, compile_s=None))) is None
  assert rows.compile_time_s(dataclasses.replace(record, compile=None)) is None
  roof = record.roofline
  assert rows.roofline_fraction(record) == 0.5
  assert rows.roofline_fraction(dataclasses.replace(record, roofline=dataclasses.replace(
      roof, frac_compute=0.75))) == 0.75
  assert rows.roofline_fraction(dataclasses.replace(record, roofline=dataclasses.replace(
      roof, frac_bandwidth=None))) == 0.1
  assert rows.roofline_fraction(dataclasses.replace(record, roofline=dataclasses.replace(
      roof, frac_bandwidth=None, frac_compute=None))) is None
  assert rows.roofline_fraction(dataclasses.replace(record, roofline=None)) is None


def test_inputs_module_source_drops_only_the_future_import():
  source = rows._inputs_module_source()
  original = inspect.getsource(inputs)
  assert "from __future__ import annotations\n" in original
  assert source == original.replace("from __future__ import annotations\n", "")
  assert "__future__" not in source


@pytest.mark.parametrize("source, missing", [
    ("import jax\n", ["import jax.numpy as jnp"]),
    ("import jax.numpy as jnp\n", ["import jax"]),
    ("from jax import numpy as jnp\nimport jax\n", []),
    ("import numpy as np\n\ndef f():\n  import jax\n", ["import jax", "import jax.numpy as jnp"]),
])
def test_missing_imports(source, missing):
  assert rows._missing_imports(source) == missing


@pytest.mark.parametrize("source, expected", [
    ('"""doc\nstring."""\nimport numpy as np\nfrom jax import lax\n\nX = 1\n',
     '"""doc\nstring."""\nimport numpy as np\nfrom jax import lax\nimport jax\n\nX = 1\n'),
    ('"""doc\nstring."""\n\nX = 1\n', '"""doc\nstring."""\nimport jax\n\nX = 1\n'),
    ("X = 1\nY = 2\n", "import jax\nX = 1\nY = 2\n"),
    ("import os\nimport sys as s, re\nX = 1\n",
     "import os\nimport sys as s, re\nimport jax\nX = 1\n"),
])
def test_with_imports_puts_them_after_the_last_top_level_import(source, expected):
  assert rows._with_imports(source, ["import jax"]) == expected
  assert rows._with_imports(source, []) == source


def test_functional_source_is_the_reference_and_the_task_inputs():
  spec = get_task("layernorm_residual")
  source = rows.functional_source(spec, "small")
  reference, footer = source.split("\n\n\n# The inputs of task ", 1)
  assert reference == spec.reference_source.rstrip("\n")
  dims = spec.dims("small")
  described = [f"#   {item.name}: {item.dtype} {item.concrete_shape(dims)}, {item.dist.describe()}"
               for item in spec.inputs]
  assert footer.splitlines()[:len(described) + 2] == [
      f"{spec.task_id} at the 'small' size, drawn as PallasBench-Robust draws them for a seed:",
      *described, ""]
  assert (f"\nINPUTS = {spec.inputs!r}\nDIMS = {dict(dims)!r}\n\n\n"
          "def get_inputs(seed=0):\n") in footer
  assert (f"  key = jax.random.fold_in(jax.random.key(seed), {spec.task_id})\n"
          "  return tuple(item.sample(jax.random.fold_in(key, i), DIMS) for i, item in "
          "enumerate(INPUTS))\n\n\nif __name__ == \"__main__\":\n  out = jax.jit(reference)"
          "(*get_inputs())\n  print(out.shape, out.dtype)\n") in footer
  assert source.endswith("  print(out.shape, out.dtype)\n")
  module = rows._inputs_module_source().rstrip()
  assert f"{module}\n\n\nINPUTS = " in source  # two blank lines, as between definitions
  namespace = {"__name__": "functional"}
  exec(compile(source, "functional", "exec"), namespace)  # pylint: disable=exec-used
  for got, want in zip(namespace["get_inputs"](3), spec.make_inputs("small", 3), strict=True):
    assert got.shape == want.shape and bool((got == want).all())


def test_functional_source_adds_the_imports_a_reference_lacks(monkeypatch):
  spec = get_task("relu")
  monkeypatch.setattr(type(spec), "reference_source", property(
      lambda self: '"""relu."""\n\n\ndef reference(x):\n  return jnp.maximum(x, 0)\n\n\n'))
  source = rows.functional_source(spec, "small")
  assert source.startswith(
      '"""relu."""\nimport jax\nimport jax.numpy as jnp\n\n\ndef reference(x):\n'
      "  return jnp.maximum(x, 0)\n\n\n# The inputs of task 1 at the 'small'")


def _row_records(trees):
  gpu = rf.record(trees, "gelu", runtime_ms=0.5, baseline_ms=1.5, eager_ms=4.0,
                  status=Status.INCORRECT, correct=False, error="not close",
                  max_abs_error=0.25, rel_l2_error=0.125, general_shapes=False,
                  measured_at="2026-11-21T10:00:00+00:00",
                  environment=dataclasses.replace(rf.ENV, jax="0.11.3"))
  tpu = rf.record(trees, "gelu", "tpu", runtime_ms=2.0, baseline_ms=1.0, eager_ms=3.0,
                  status=Status.ERROR, error="Mosaic", correct=False)
  return gpu, tpu


def test_summary_row_takes_each_column_from_its_record(trees):
  gpu, tpu = _row_records(trees)
  spec = get_task("gelu")
  row = rows.summary_row(gpu, tpu, trees)
  assert to_json_dict(row) == to_json_dict(SummaryRow(
      Op_Name="gelu", Level_ID=1, Task_ID=2, Kernel_Name="gelu_gpu_fixed",
      Category=spec.category, Pallas_Runtime=0.5, JAX_Baseline_Runtime=1.5,
      JAX_Native_Runtime=4.0, Pallas_Speedup=3.0, Pallas_Speedup_Native=8.0,
      Pallas_Speedup_Compiled=3.0, Pallas_Code=trees.source("gpu", "gelu"),
      Pallas_Code_Original=trees.source("tpu", "gelu"), JAX_Baseline_Code=spec.reference_source,
      JAX_Code_Functional=rows.functional_source(spec, "medium"), Correct=False,
      Error="not close", Target_Hardware="NVIDIA H200", Framework="JAX 0.11.3 / Pallas",
      Backend="triton", Fix_Applied="tile_gelu",
      Fix_Reason="blocks of gelu exceeded the Triton limit; tiled", Status="incorrect",
      Robust=False, General_Shapes=False, Max_Abs_Error=0.25, Rel_L2_Error=0.125,
      Tolerance=spec.tolerance.kind.value, Compile_Time_s=pytest.approx(1.0),
      Roofline_Fraction=0.5, Timing_Method="cupti", Timing_L2_Resident=None,
      Original_Status="error", Original_Error="Mosaic", Original_Runtime=2.0, Original_Speedup_Native=1.5,
      Original_Speedup_Compiled=0.5, Size="medium", Input_Shapes=gpu.input_shapes,
      Corrections=spec.notes, JAX_Version="0.11.3", Measured_At="2026-11-21T10:00:00+00:00"))
  alone = rows.summary_row(gpu, None, trees)
  assert (alone.Original_Status, alone.Original_Error, alone.Original_Runtime,
          alone.Original_Speedup_Native, alone.Original_Speedup_Compiled) == (
              "not_measured", None, None, None, None)


def test_summary_rows_one_per_fixed_kernel_at_the_headline(trees, tmp_path):
  gpu, tpu = _row_records(trees)
  records = [rf.record(trees, "relu", "gpu", "large"), rf.record(trees, "relu", "tpu", "large"),
             tpu, gpu, rf.record(trees, "relu", "gpu"),
             rf.record(trees, "flash_attention", "gpu")]
  run = rec.read_run(rf.write_run(tmp_path / "run", records))
  merged = rec.merge_runs([run])
  got = rows.summary_rows(merged, trees, "medium")
  assert [(r.Op_Name, r.Size, r.Original_Status) for r in got] == [
      ("relu", "medium", "not_measured"), ("gelu", "medium", "error"),
      ("flash_attention", "medium", "not_measured")]
  large = rows.summary_rows(merged, trees, "large")
  assert [(r.Op_Name, r.Size, r.Original_Status, r.Original_Runtime) for r in large] == [
      ("relu", "large", "pass", 0.5)]

# ---------------------------------------------------------------------------------------------
# card: markdown helpers


@pytest.mark.parametrize("value, fmt, text", [
    (None, None, "–"), (float("nan"), ".1f", "–"), (True, ".1f", "yes"), (False, None, "no"),
    (3, ".1f", "3.0"), (0.123456, ".2%", "12.35%"), (0.123456, None, "0.123"),
    (12345.0, None, "1.23e+04"),
    (7, None, "7"), ("a | b", None, "a \\| b"), ("a\n  b\tc ", None, "a b c"),
    ("x" * 160, None, "x" * 160), ("x" * 161, None, "x" * 159 + "…"),
    ("bytes \\x00\\x01\\x02\\x03\\x04 here", None, "&lt;serialised IR bytes>"),
    ("a" * 60 + " \\x00\\x01\\x02\\x03 then", None, "a" * 60 + " &lt;bytes> then"),
    ("x `y` <!-- z", None, "x \\`y\\` &lt;\\!-- z"),  # inert in the card (md_inline)
    ("![i](https://e.x/p.png) [a](www.e.x) &#8238;", None,  # no image, link or reference
     "\\!\\[i\\](https\\://e.x/p.png) \\[a\\](www\\.e.x) \\&#8238;"),
])
def test_cell(value, fmt, text):
  assert tables._cell(value, fmt) == text


def test_md_table():
  assert tables.md_table(pd.DataFrame()) == "(none)"
  assert tables.md_table(pd.DataFrame(columns=["a"])) == "(none)"
  df = pd.DataFrame([{"name": "relu", "x": 0.5, "ok": True},
                     {"name": "gelu", "x": None, "ok": False}])
  assert tables.md_table(df) == ("| name | x | ok |\n|---|---|---|\n| relu | 0.5 | yes |\n"
                               "| gelu | – | no |")
  assert tables.md_table(df, {"x": ".2f"}) == ("| name | x | ok |\n|---|---|---|\n"
                                             "| relu | 0.50 | yes |\n| gelu | – | no |")


def _card_run(trees, tmp_path, name="run-a", records=None, **manifest):
  records = rf.standard_records(trees) if records is None else records
  return rec.read_run(rf.write_run(tmp_path / name, records, **manifest))


def test_environment_of_a_run(trees, tmp_path):
  run = _card_run(trees, tmp_path)
  assert sections.hardware._environment(run) == rf.ENV
  other = dataclasses.replace(rf.ENV, device_kind="NVIDIA B200")
  late = _card_run(trees, tmp_path, "b", [rf.record(trees, "relu", environment=other)],
                   environment=None)
  assert sections.hardware._environment(late) == other
  empty = _card_run(trees, tmp_path, "c", [], environment=None)
  assert sections.hardware._environment(empty) is None


def test_commits_of_every_segment():
  segment = lambda commit: types.SimpleNamespace(git_commit=commit)  # noqa: E731
  run = types.SimpleNamespace(manifest=types.SimpleNamespace(
      git_commit="a" * 40, resumes=(segment("b" * 40), segment("a" * 40), segment(None))))
  assert sections.hardware._commits(run) == "aaaaaaaaaaaa, bbbbbbbbbbbb"
  run = types.SimpleNamespace(manifest=types.SimpleNamespace(git_commit=None,
                                                             resumes=(segment("c" * 40),)))
  assert sections.hardware._commits(run) == "cccccccccccc"
  run = types.SimpleNamespace(manifest=types.SimpleNamespace(git_commit=None, resumes=()))
  assert sections.hardware._commits(run) is None


def test_a_command_repeated_by_resumes_is_one_line_with_its_segments():
  """Release 6 run 1 was resumed three times with one command: the card listed it four times."""
  segment = lambda command: types.SimpleNamespace(command=command)  # noqa: E731
  run = lambda name, first, *rest: types.SimpleNamespace(  # noqa: E731
      name=name, manifest=types.SimpleNamespace(command=first, resumes=tuple(map(segment, rest))))
  runs = [run("r1", "measure", "resume", "resume", "resume"), run("r2", "measure"),
          run("r3", "measure", "resume", "measure")]
  assert sections.hardware._commands(runs) == [
      ("r1", "measure", 1), ("r1", "resume", 3), ("r2", "measure", 1), ("r3", "measure", 2),
      ("r3", "resume", 1)]


def test_runs_table(trees, tmp_path):
  env = Environment(platform="gpu", device_kind="NVIDIA B200", hardware="b200",
                    compute_capability="10.0", driver="580.1", cuda="13.0", jax="0.11.3",
                    jaxlib="0.11.4", python="3.12.9", git_commit="f" * 40)
  runs = [_card_run(trees, tmp_path, "a", environment=to_json_dict(env), sizes=["medium", "large"]),
          _card_run(trees, tmp_path, "b", [], environment=None, finished_at=None,
                    git_commit=None, variants=["gpu"])]
  assert sections.hardware._runs_table(runs) == (
      "| run | device | CC | driver | CUDA | jax | jaxlib | Python | commit | started | "
      "finished | sizes | variants | records |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
      "| a | NVIDIA B200 | 10.0 | 580.1 | 13.0 | 0.11.3 | 0.11.4 | 3.12.9 | 0123456789ab | "
      "2026-11-20T09:00:00+00:00 | 2026-11-20T11:00:00+00:00 | medium, large | tpu, gpu | 8 |\n"
      "| b | – | – | – | – | – | – | – | – | 2026-11-20T09:00:00+00:00 | – | medium | gpu "
      "| 0 |")


def _resume(**overrides):
  return {"command": "regen --resume", "started_at": "s", "finished_at": None, "git_commit": None,
          "sizes": ["medium"], "variants": ["gpu"], "tasks": ["relu"], **overrides}


def test_ceiling_rows_from_records_then_manifest_devices_then_manifest(trees, tmp_path):
  gpus = [(1, 3800.0), (0, 3900.0), (None, 3700.0), (1, 3800.0), (0, 3900.0), None,
          (1, 3800.0), (1, 3800.0)]
  records = [dataclasses.replace(r, run=gpu and rf.run_info(gpu_index=gpu[0], copy=gpu[1]))
             for r, gpu in zip(rf.standard_records(trees), gpus)]
  by_records = _card_run(trees, tmp_path, "r", records)
  assert sections.protocol._ceiling_rows(by_records) == [
      {"run": "r", "GPU": 0, "copy GB/s": 3900.0, "read GB/s": 4000.0, "matmul TFLOP/s": 400.0,
       "evaluations": 2, "from": "records"},
      {"run": "r", "GPU": 1, "copy GB/s": 3800.0, "read GB/s": 4000.0, "matmul TFLOP/s": 400.0,
       "evaluations": 4, "from": "records"},
      {"run": "r", "GPU": None, "copy GB/s": 3700.0, "read GB/s": 4000.0,
       "matmul TFLOP/s": 400.0, "evaluations": 1, "from": "records"}]
  ceilings = {"copy_gbps": 1.0, "read_gbps": 2.0, "matmul_tflops": 3.0, "method": "m1"}
  devices = _card_run(trees, tmp_path, "d", per_device=[{"device": "0", "ceilings": ceilings},
                                                        {"device": "1", "ceilings": None}],
                      resumes=[_resume(per_device=[{"device": 2, "ceilings": {
                          **ceilings, "copy_gbps": 5.0, "method": "m2"}}])])
  assert sections.protocol._ceiling_rows(devices) == [
      {"run": "d", "GPU": "0", "copy GB/s": 1.0, "read GB/s": 2.0, "matmul TFLOP/s": 3.0,
       "evaluations": None, "from": "manifest"},
      {"run": "d", "GPU": "1", "copy GB/s": None, "read GB/s": None, "matmul TFLOP/s": None,
       "evaluations": None, "from": "not recorded"},
      {"run": "d", "GPU": "2", "copy GB/s": 5.0, "read GB/s": 2.0, "matmul TFLOP/s": 3.0,
       "evaluations": None, "from": "manifest"}]
  assert (sections.protocol.ceiling_methods([devices], [])
          == "cupti: 1 GiB copy and read-only sum; m1; m2")
  single = _card_run(trees, tmp_path, "s", per_device=[])
  assert sections.protocol._ceiling_rows(single) == [
      {"run": "s", "GPU": None, "copy GB/s": 3900.0, "read GB/s": 4000.0,
       "matmul TFLOP/s": 400.0, "evaluations": None, "from": "manifest"}]
  bare = _card_run(trees, tmp_path, "n", per_device=[], ceilings=None)
  assert sections.protocol._ceiling_rows(bare) == [
      {"run": "n", "GPU": None, "copy GB/s": None, "read GB/s": None, "matmul TFLOP/s": None,
       "evaluations": None, "from": "not recorded"}]
  assert sections.protocol.ceiling_methods([bare], []) == "not recorded"
  no_method = _card_run(trees, tmp_path, "m", per_device=[], ceilings={**ceilings, "method": ""})
  assert sections.protocol.ceiling_methods([no_method, bare], []) == "not recorded"
  measured = rf.record(trees, "relu", run=dataclasses.replace(rf.run_info(), ceiling_method="r"))
  # the records' word, release 5 on
  assert sections.protocol.ceiling_methods([bare], [measured]) == "r"
  assert sections.protocol._ceilings_table([single, bare]) == (
      "| run | GPU | copy GB/s | read GB/s | matmul TFLOP/s | evaluations | from |\n"
      "|---|---|---|---|---|---|---|\n"
      "| s | – | 3900.0 | 4000.0 | 400.0 | – | manifest |\n"
      "| n | – | – | – | – | – | not recorded |")


def test_tolerance_and_filters_tables(trees):
  records = [rf.record(trees, "relu"), rf.record(trees, "gelu"), rf.record(trees, "relu", "tpu"),
             rf.record(trees, "matmul_relu", filters=(
                 FilterResult(name="output_std", passed=False, value=0.0, threshold=1e-5,
                              detail="constant"),
                 FilterResult(name="input_impact", passed=True, value=1.0, threshold=0.5,
                              detail="ok")))]
  assert sections.protocol._tolerance_table(records) == (
      "| precision | output | class | rtol | atol | max relative L2 | evaluations |\n"
      "|---|---|---|---|---|---|---|\n"
      "| float32 | float32 | exact | 1e-05 | 1e-06 | – | 2 |\n"
      "| float32 | float32 | matmul | 0.01 | 0.01 | 0.001 | 1 |\n"
      "| float32 | float32 | transcendental | 0.0001 | 1e-05 | – | 1 |")
  assert sections.protocol._filters_table(records) == (
      "| filter | evaluations | failed |\n|---|---|---|\n| input_impact | 1 | 0 |\n"
      "| output_std | 4 | 1 |")
  assert sections.protocol._filters_table([]) == "(none)"


def test_tolerance_table_of_unusual_tolerances(trees):
  """Tolerances in full (not cut to 3 digits), and classes that differ only where one has no
  relative-L2 bound (None beside a number: sorted as text, not compared)."""
  base = rf.record(trees, "relu")
  records = [dataclasses.replace(base, rtol=2.5625e-05, max_rel_l2=None),
             dataclasses.replace(base, rtol=2.5625e-05, max_rel_l2=2.5e-05),
             dataclasses.replace(base, rtol=2.5625e-05, max_rel_l2=2.5e-05)]
  assert sections.protocol._tolerance_table(records) == (
      "| precision | output | class | rtol | atol | max relative L2 | evaluations |\n"
      "|---|---|---|---|---|---|---|\n"
      "| float32 | float32 | exact | 2.5625e-05 | 1e-06 | 2.5e-05 | 2 |\n"
      "| float32 | float32 | exact | 2.5625e-05 | 1e-06 | – | 1 |")


def test_tolerance_table_names_the_output_dtype_whose_limits_apply(trees):
  """At bfloat16 a task whose output stays float32 (one_hot's) keeps float32's limits: the row
  says so, where the table showed two bfloat16 `exact` rows with different limits and no why."""
  def at_bf16(task):
    spec = get_task(task).at_precision("bfloat16")
    tol = spec.tolerance
    return rf.record(trees, task, precision="bfloat16", kernel_sha256="0" * 64,
                     tolerance=tol.kind.value, rtol=tol.rtol, atol=tol.atol,
                     max_rel_l2=tol.max_rel_l2)
  table = sections.protocol._tolerance_table([at_bf16("relu"), at_bf16("one_hot")])
  assert table.splitlines()[2:] == [
      "| bfloat16 | bfloat16 | exact | 0.008 | 0.001 | – | 1 |",
      "| bfloat16 | float32 | exact | 1e-05 | 1e-06 | – | 1 |"]


def test_timing_facts_and_judge_text(trees):
  records = [rf.record(trees, "relu", judge_version="2"),
             rf.record(trees, "gelu", timing_iterations=20, seeds=(1, 2), judge_version="2"),
             rf.record(trees, "relu", "tpu", device="cpu", comparable=False,
                       timing_input_sets=None),
             rf.record(trees, "gelu", "tpu", timing_method=None, timing_iterations=None)]
  facts = sections.protocol._timing_facts(records)
  assert {k: v for k, v in facts.items() if k != "judge_text"} == {
      "methods": "cupti (2), wallclock (1)", "iterations": "20 (1), 100 (2)",
      "input_sets": "4 (3)", "seeds": "2 seeds (1), 5 seeds (3)", "not_comparable": "1"}
  assert facts["judge_text"] == (
      sections.protocol._JUDGE_TEXT["2"].format(n=2) + "\n"
      + sections.protocol._JUDGE_TEXT["1"].format(n=2))
  assert facts["judge_text"].startswith("- **Judge** (`judge_version` 2, 2 evaluation(s)): ")
  assert ("\n- **Evaluator** (`judge_version` 1, release 1, 2 evaluation(s)): "
          in facts["judge_text"])
  newest = sections.protocol._timing_facts([rf.record(trees, "relu", judge_version="4")])
  assert newest["judge_text"].startswith("- **Judge** (`judge_version` 4, 1 evaluation(s)): as "
                                         "judge 3 below, and: each timed call's inputs are\n")
  assert "checked and freed after it" in newest["judge_text"]
  assert sections.protocol._timing_facts([]) == {
      "methods": "none", "iterations": "none", "input_sets": "none", "seeds": "none",
      "not_comparable": "0", "judge_text": ""}

# ---------------------------------------------------------------------------------------------
# card: sections


def _frames(trees, tmp_path, records=None, headline="medium"):
  run = _card_run(trees, tmp_path, records=records)
  merged = rec.merge_runs([run])
  summary = rows.summary_rows(merged, trees, headline)
  return (run, merged, summary, pd.DataFrame([to_json_dict(r) for r in summary]),
          pd.DataFrame([to_json_dict(r) for r in merged.records]))


_LEVELS_HEADER = ("| level | tasks | passed | fast_0 | fast_1 | fast_2 | geomean_speedup |\n"
                  "|---|---|---|---|---|---|---|\n")


def test_results_of_the_fixed_and_original_kernels(trees, tmp_path):
  *_, runs_df = _frames(trees, tmp_path)
  (results,) = sections.results.results_by_size(runs_df, ["medium"])
  assert results == {
      "size": "medium", "n_fixed": 4,
      "fixed": _LEVELS_HEADER + (
          "| 1 | 2 | 1 | 50% | 50% | 0% | 2.000 |\n| 2 | 1 | 1 | 100% | 100% | 0% | 1.429 |\n"
          "| 3 | 1 | 1 | 100% | 100% | 0% | 1.250 |\n| all | 4 | 3 | 75% | 75% | 0% | 1.529 |"),
      "eager": None,
      "original": _LEVELS_HEADER + (
          "| 1 | 2 | 2 | 100% | 0% | 0% | 0.500 |\n| 2 | 1 | 1 | 100% | 0% | 0% | 0.500 |\n"
          "| 3 | 1 | 0 | 0% | 0% | 0% | – |\n| all | 4 | 3 | 75% | 0% | 0% | 0.500 |"),
      "failures": ("| task | level | status | error |\n|---|---|---|---|\n"
                   "| gelu | 1 | incorrect | not allclose at (3, 4) |"),
      "original_status": "error: 1, pass: 3",
      "original_failures": (
          "| task | status | error_type | error |\n|---|---|---|---|\n"
          "| flash_attention | error | compile_error | Mosaic block shape (512, 512) exceeds the "
          "Triton limit |")}
  # the originals at another size are not this size's; each size has its own section
  large = runs_df.assign(size=["medium" if v == "gpu" else "large" for v in runs_df["variant"]])
  medium, other = sections.results.results_by_size(large, ["medium", "large"])
  assert medium["original"] == "(the original kernels were not measured)"
  assert (medium["original_status"], medium["original_failures"]) == ("none", "(none)")
  assert other["size"] == "large" and other["n_fixed"] == 0
  assert other["original"].endswith("| all | 4 | 3 | 75% | 0% | 0% | 0.500 |")


def test_a_verdict_without_an_error_shows_the_judges_reasons(trees, tmp_path):
  """A `rejected` record has no error, only reasons (release 6's originals that ran past the
  compile budget): the failure tables show them where a bare "–" said nothing."""
  budget = "compile stage: the compile stage ran past its 60 s budget; its process was killed"
  records = [r if r.task != "gelu" else dataclasses.replace(
      r, status=Status.REJECTED, error=None, error_type=None, correct=False, robust=False,
      reasons=(budget, "and a second reason")) for r in rf.standard_records(trees)]
  *_, runs_df = _frames(trees, tmp_path, records)
  (results,) = sections.results.results_by_size(runs_df, ["medium"])
  assert (f"| gelu | 1 | rejected | {budget}; and a second reason |"
          in results["failures"].splitlines())
  assert (f"| gelu | rejected | – | {budget}; and a second reason |"
          in results["original_failures"].splitlines())
  assert ("| flash_attention | error | compile_error | Mosaic block shape (512, 512) exceeds "
          "the Triton limit |" in results["original_failures"].splitlines())  # errors as before


def test_eager_tables_only_with_eager_timings(trees, tmp_path):
  records = [rf.record(trees, r.task, r.variant, runtime_ms=r.runtime_ms,
                       baseline_ms=r.baseline_ms, eager_ms=3.0 if r.runtime_ms else None,
                       status=r.status, correct=r.correct, error=r.error)
             for r in rf.standard_records(trees)]
  *_, runs_df = _frames(trees, tmp_path, records)
  (results,) = sections.results.results_by_size(runs_df, ["medium"])
  assert results["eager"] == _LEVELS_HEADER + (
      "| 1 | 2 | 1 | 50% | 50% | 50% | 6.000 |\n| 2 | 1 | 1 | 100% | 100% | 100% | 4.286 |\n"
      "| 3 | 1 | 1 | 100% | 100% | 100% | 3.750 |\n| all | 4 | 3 | 75% | 75% | 75% | 4.586 |")


def test_compile_table_of_the_fixed_kernels(trees, tmp_path):
  records = rf.standard_records(trees)
  records[0] = rf.record(trees, "relu", compile=dataclasses.replace(
      records[0].compile, trace_s=1.2345, lower_s=0.5, compile_s=2.0625, triton_ir_bytes=7))
  *_, runs_df = _frames(trees, tmp_path, records)
  table = sections.compile_time._compile_table(runs_df)
  assert table.splitlines()[:3] == [
      "| task | size | trace_s | lower_s | compile_s | total_s | triton_ir_bytes | ptx_bytes |",
      "|---|---|---|---|---|---|---|---|",
      "| relu | medium | 1.234 | 0.500 | 2.062 | 3.797 | 7 | 3000 |"]  # 3 decimals, not 3 digits
  assert len(table.splitlines()) == 6  # the four fixed kernels, no originals


def _repro_table(rows_):
  """A repeats.pairs table from (task, variant, size, run_a, run_b, runtime_a, runtime_b,
  rel_diff, above_threshold); the baseline is 1 ms in both runs, on GPU 0 in both."""
  table = []
  for task, variant, size, run_a, run_b, a, b, diff, above in rows_:
    table.append({"task": task, "variant": variant, "size": size, "run_a": run_a, "run_b": run_b,
                  "gpu_a": "index 0", "gpu_b": "index 0", "same_gpu": True,
                  "runtime_a_ms": a, "runtime_b_ms": b, "rel_diff": diff,
                  "above_threshold": above, "baseline_a_ms": 1.0, "baseline_b_ms": 1.0,
                  "baseline_diff": 0.0, "speedup_a": 1 / a, "speedup_b": 1 / b,
                  "speedup_diff": abs(a / b - 1), "crosses_one": (a < 1) != (b < 1)})
  return pd.DataFrame(table, columns=list(repeats.COLUMNS))


def test_repro_section():
  assert sections.reproducibility._repro(None, None, ()) is None
  assert sections.reproducibility._repro(_repro_table([]), None, ()) == {
      "n": 0, "n_changed": 0, "changed": None, "reasons": False}
  table = _repro_table([
      ("relu", "gpu", "medium", "a", "b", 0.5, 0.56, 0.12, True),
      ("gelu", "tpu", "medium", "a", "c", 2.0, 1.76, 0.12, True),
      ("gelu", "gpu", "medium", "a", "b", 0.4, 0.4, 0.0, False),
      ("silu", "gpu", "large", "a", "b", 1.0, 1.07, 0.07, True),
      ("tanh", "gpu", "large", "a", "b", 1.0, 1.004, 0.004, False)])
  changes = pd.DataFrame([{"task": "gelu", "variant": "tpu", "size": "medium", "run_a": "a",
                           "run_b": "c", "status_a": "pass", "status_b": "timeout",
                           "error_a": None, "error_b": "slow", "reasons_a": [],
                           "reasons_b": []}])
  got = sections.reproducibility._repro(table, changes, ())
  assert (got["n_crossing"], got["gpus"]) == (0, {"same": 5, "different": 0, "unknown": 0, "n": 5})
  crossing = sections.reproducibility._repro(
      _repro_table([("exp", "gpu", "large", "a", "b", 0.96, 1.04, 0.083, True)]), None, ())
  assert crossing["n_crossing"] == 1
  assert crossing["crossing"].splitlines()[2] == "| exp | gpu | large | a | b | 1.042 | 0.962 | yes |"
  assert got["spread"].splitlines()[2:] == [
      "| kernel time | 5 | 7.00% | 12.00% | 12.00% | 3 |",
      "| baseline time | 5 | 0.00% | 0.00% | 0.00% | 0 |",
      "| speedup | 5 | 6.54% | 12.47% | 13.64% | 3 |"]
  assert {k: got[k] for k in ("n", "median", "p90", "max", "n_above", "runs", "n_changed")} == {
      "n": 5, "median": "7.00%", "p90": "12.00%", "max": "12.00%", "n_above": 3,
      "runs": "`a` and `b`, `a` and `c`", "n_changed": 1}
  assert got["changed"] == (
      "| task | variant | size | run_a | run_b | status_a | status_b | error_a | error_b |\n"
      "|---|---|---|---|---|---|---|---|---|\n"
      "| gelu | tpu | medium | a | c | pass | timeout | – | slow |")
  assert got["reasons"] is False  # no rejection: no reason columns
  assert got["bands"] == (
      "| difference | evaluations | share |\n|---|---|---|\n| 0% – 1% | 2 | 40% |\n"
      "| 1% – 2% | 0 | 0% |\n| 2% – 5% | 0 | 0% |\n| 5% – 10% | 1 | 20% |\n"
      "| > 10% | 2 | 40% |")
  assert got["groups"] == (
      "| variant | size | n | median | p90 | max | n above 5% |\n|---|---|---|---|---|---|---|\n"
      "| gpu | large | 2 | 3.70% | 6.34% | 7.00% | 1 |\n"
      "| gpu | medium | 2 | 6.00% | 10.80% | 12.00% | 1 |\n"
      "| tpu | medium | 1 | 12.00% | 12.00% | 12.00% | 1 |")
  assert got["above"] == (
      "| task | variant | size | run_a | run_b | runtime_a_ms | runtime_b_ms | rel_diff |\n"
      "|---|---|---|---|---|---|---|---|\n"
      "| gelu | tpu | medium | a | c | 2 | 1.76 | 12.0% |\n"
      "| relu | gpu | medium | a | b | 0.5 | 0.56 | 12.0% |\n"
      "| silu | gpu | large | a | b | 1 | 1.07 | 7.0% |")
  same = sections.reproducibility._repro(table, changes.iloc[0:0], ())
  assert (same["n_changed"], same["changed"]) == (0, None)
  assert sections.reproducibility._repro(table, None, ())["n_changed"] == 0


def test_corrections_missing_lost_and_citation(trees, tmp_path):
  _, merged, summary, *_ = _frames(trees, tmp_path)
  notes = {r.Op_Name: r.Corrections for r in summary}
  assert sections.corrections._corrections(summary) == [
      f"**{name}** (task {get_task(name).task_id}): {note}" for name, note in notes.items() if note]
  assert sections.corrections._corrections([dataclasses.replace(summary[0], Corrections="")]) == []
  assert sections.gaps._missing_table([]) == "" and sections.gaps._lost_table([]) == ""
  assert sections.gaps._missing_table(
      [EvalKey("relu", "tpu", "large"), EvalKey("gelu", "gpu", "medium", "bfloat16")]) == (
      "| task | variant | size | precision |\n|---|---|---|---|\n| relu | tpu | large | float32 |\n"
      "| gelu | gpu | medium | bfloat16 |")
  assert sections.gaps._lost_table([("run-a", EvalKey("relu", "tpu", "large"))]) == (
      "| run | task | variant | size | precision |\n|---|---|---|---|---|\n"
      "| run-a | relu | tpu | large | float32 |")
  records = list(merged.records)
  records[0] = dataclasses.replace(records[0], measured_at="2027-01-02T00:00:00+00:00")
  records[2] = dataclasses.replace(records[2], environment=dataclasses.replace(
      rf.ENV, hardware="b200"))
  records[3] = dataclasses.replace(records[3], environment=dataclasses.replace(
      rf.ENV, hardware="zz"))  # an original kernel's: not in the key
  assert sections.citation._citation("org/pb", "NVIDIA H200", records) == {
      "key": "pallasbench_robust_b200_h200_2027", "year": "2027", "hardware": "NVIDIA H200",
      "url": "https://huggingface.co/datasets/org/pb", "release": release.NAME}
  assert sections.citation._citation("o/p", "", []) == {
      "key": "pallasbench_robust", "year": "", "hardware": "",
      "url": "https://huggingface.co/datasets/o/p", "release": release.NAME}


def test_the_card_counts_stage_budget_rejections_beside_timeouts(trees, tmp_path):
  """A record rejected because a stage ran past its budget depends on the host's load as a
  timeout does: the Limitations section counts it, with the words for either; a rejection for
  another reason is not counted, and a release with none keeps the timeout-only words."""
  compile_out = "compile stage: " + stages_module._timeout_message(
      60, types.SimpleNamespace(dump_folder=None))
  checks_out = budgets.overrun(budgets.CORRECTNESS, 120.0)
  assert budgets.ran_out([compile_out]) and budgets.ran_out(["x", checks_out])
  assert not budgets.ran_out(["stateful ops ['rng'] in the artifact", "ran past its budget"])
  records = rf.standard_records(trees)
  rejected = dict(status=Status.REJECTED, correct=False, runtime_ms=None, baseline_ms=None)
  records[0] = rf.record(trees, records[0].task, reasons=(compile_out,), **rejected)
  records[1] = rf.record(trees, records[1].task, "tpu", reasons=(checks_out,), **rejected)
  records[3] = rf.record(trees, records[3].task, "tpu", reasons=("stateful ops",), **rejected)
  run, merged, *_ = _frames(trees, tmp_path, records)
  assert sections.limitations.load_facts([run], merged, None)["overruns"] == f"2 in `{run.name}`"
  template = (pathlib.Path(card.__file__).parent / "templates" / "sections" /
              "limitations.md.j2").read_text()
  def said(overruns):
    text = jinja2.Template(template).render(
        limits={"gpu_kinds": "x", "n_gpu_kinds": 1, "float_dtypes": "float32"},
        precisions={"n_bf16": 0}, gpu_sharing=None, cpu_rows=0,
        load={"budget": "60 s", "workers": None, "timeouts": "none", "overruns": overruns,
              "flipped": 0})
    return " ".join(text.split())
  assert "rejected because a stage ran past its budget" in said("2 in `r`")
  assert "or a rejection at a stage's budget, says the work did not finish" in said("2 in `r`")
  assert "budget" not in said(None).split("Timeouts among")[1].split("did not finish")[0]
  assert "A `timeout` says the compile did not finish under that load" in said(None)


def test_stats_gather_every_section(trees, tmp_path):
  records = rf.standard_records(trees)
  records[1] = rf.record(trees, "relu", "tpu", device="cpu", comparable=False)
  run, merged, summary, summary_df, runs_df = _frames(trees, tmp_path, records)
  resumed = dataclasses.replace(run, manifest=dataclasses.replace(run.manifest, resumes=(
      rec.Resume(command="regen --resume", started_at="s", finished_at=None, git_commit=None,
                 sizes=("medium",), variants=("gpu",), tasks=("relu",)),)))
  missing, lost = [EvalKey("relu", "gpu", "large")], [("run-a", EvalKey("gelu", "tpu", "medium"))]
  repro = _repro_table([("relu", "gpu", "medium", "run-a", "b", 0.5, 0.6, 0.2, True)])
  got = card.stats(CardInputs(
      rows=summary, merged=merged, runs=[resumed], headline="medium", repro=repro,
      verdict_changes=None, repo_id="org/pb", configs={"default": {"level_1": 2}},
      rebuild="the command", missing=missing, lost_artifacts=lost))
  published = [r for _, r in merged.published]
  l2 = sections.protocol.l2_resident(merged.records)
  coverage = sections.artifacts.artifact_coverage(merged)
  assert got == {
      "marker": card.MARKER, "repo_id": "org/pb", "headline": "medium",
      "hardware": "NVIDIA H200", "n_tasks": 4, "n_registry": 45, "tag": release.TAG,
      "release": release.NAME, "gpu_extra": "cuda13", "config_rows": {"default": {"level_1": 2}},
      "precisions": {"headline": "float32", "measured": "float32", "n_bf16": 0},
      "n_runs": 1, "n_published": 8, "runs_table": sections.hardware._runs_table([resumed]),
      "commands": [("run-a", run.manifest.command, 1), ("run-a", "regen --resume", 1)],
      "n_missing": 1, "missing_table": sections.gaps._missing_table(missing),
      "n_lost": 1, "lost_table": sections.gaps._lost_table(lost),
      "ceilings_table": sections.protocol._ceilings_table([resumed]), "ceiling_bf16": False,
      "repro_others": [], "candidates": None, "source": None, "training": None,
      "ceiling_methods": "cupti: 1 GiB copy and read-only sum",
      "ceiling_sources": sections.protocol.ceiling_sources(merged), "ceiling_tolerance": "5%",
      "eager_over": "(none)", "n_eager_over": 0, "primary_runs": "`run-a`",
      "legacy": {"judge_1": True, "no_run": True},
      "load": sections.limitations.load_facts([resumed], merged, None), "gpu_sharing": None,
      "gpu_state_table": tables.md_table(sections.hardware.gpu_state(merged)),
      "tolerance_table": sections.protocol._tolerance_table(merged.records),
      "filters_table": sections.protocol._filters_table(merged.records),
      **sections.protocol._timing_facts(merged.records),
      "l2": {**l2, "table": tables.md_table(l2["table"])}, "drawn_per_call": False,  # judge 2
      "sizes": [{"precision": "float32", **entry}
                for entry in sections.results.results_by_size(runs_df, ["medium"])],
      "artifacts_table": tables.md_table(coverage["table"]),
      "ptx": sections.artifacts._ptx_facts(coverage),
      "compile_table": sections.compile_time._compile_table(runs_df),
      "compile_conditions": sections.compile_time.compile_conditions([resumed]),
      "cache_served": [],
      "repro": sections.reproducibility._repro(repro, None, published),
      "corrections": sections.corrections._corrections(summary),
      "cpu_rows": 1, "limits": sections.limitations.limits(merged.records),
      "rebuild": "the command",
      "contact": "https://huggingface.co/datasets/org/pb/discussions",
      "citation": sections.citation._citation("org/pb", "NVIDIA H200", merged.records)}
  def again(m):
    return card.stats(CardInputs(rows=summary, merged=m, runs=[run], headline="medium",
                                 repo_id="o/p", configs={}, rebuild=""))
  assert again(merged)["n_missing"] == 0
  two = dataclasses.replace(merged, records=(*merged.records[:-1], dataclasses.replace(
      merged.records[-1], environment=dataclasses.replace(rf.ENV, device_kind="A100"))))
  assert again(two)["hardware"] == "A100, NVIDIA H200"


class _Block:
  """A YAML block (MetadataConfigs, DatasetInfosDict) that writes one key."""

  def __init__(self, key, value):
    self.key, self.value = key, value

  def to_dataset_card_data(self, data):
    data[self.key] = self.value


def test_card_data_and_render(trees, tmp_path, monkeypatch):
  data = card.card_data("PB (H200)", [_Block("configs", [{"config_name": "default"}]),
                                      _Block("extra", 1)])
  assert data.to_dict() == {
      "language": ["en"], "license": "apache-2.0", "size_categories": ["n<1K"],
      "task_categories": ["text-generation"], "pretty_name": "PB (H200)",
      "tags": ["jax", "pallas", "gpu-kernels", "triton", "benchmark", "code", "kernels",
               "performance"], "configs": [{"config_name": "default"}], "extra": 1}
  run, merged, summary, *_ = _frames(trees, tmp_path)
  values = card.stats(CardInputs(
      rows=summary, merged=merged, runs=[run], headline="medium", repo_id="org/pb",
      configs={"runs": {"train": 8}},
      rebuild="python -m builder.regenerate --from-results data/results/*"))
  text = card.render_card("PB (H200)", [_Block("configs", [{"config_name": "runs"}])], **values)
  assert text.startswith("---\n") and text.endswith("the\nreferences and the measurements.\n")
  assert "```bash\npython -m builder.regenerate --from-results data/results/*\n```" in text
  front = DatasetCard(text).data.to_dict()
  assert front["pretty_name"] == "PB (H200)" and front["configs"] == [{"config_name": "runs"}]
  assert "\n# PB (H200)\n" in text and f"<!-- {card.MARKER}: do not edit by hand" in text
  assert "| `runs` | `train` | 8 |" in text and 'load_dataset("org/pb")' in text
  assert card.PallasBenchCard.default_template_path == str(card.TEMPLATE)
  assert card.TEMPLATE.is_file() and card.TEMPLATE.name == "README.md.j2"
  # a template whose text lacks the final newline gets one
  monkeypatch.setattr(card.PallasBenchCard, "from_template",
                      classmethod(lambda cls, card_data, **kw: "no newline"))
  assert card.render_card("x", [], **values) == "no newline\n"
  monkeypatch.setattr(card.PallasBenchCard, "from_template",
                      classmethod(lambda cls, card_data, **kw: "one newline\n"))
  assert card.render_card("x", [], **values) == "one newline\n"

# ---------------------------------------------------------------------------------------------
# plots: the figures, as drawn (`_png` captured), and their PNG bytes


@pytest.fixture
def figures(monkeypatch):
  """The figures the plots render, in order, instead of their PNG bytes."""
  drawn = []

  def keep(fig):
    drawn.append(fig)
    return b"png"
  monkeypatch.setattr(plots, "_png", keep)
  return drawn


def _summary_rows(trees, tmp_path, records=None):
  return _frames(trees, tmp_path, records)[2]


def _texts(ax):
  return [t.get_text() for t in ax.texts]


def test_speedup_plot(trees, tmp_path, figures):
  summary = list(_summary_rows(trees, tmp_path))
  summary[2] = dataclasses.replace(summary[2], Pallas_Speedup=float("inf"))
  summary[3] = dataclasses.replace(summary[3], Pallas_Speedup=-1.0)
  assert plots.speedup_png(summary, comparable=True, size="medium", runs=["run-a"]) == b"png"
  (fig,) = figures
  assert tuple(fig.get_size_inches()) == (8.0, 3.0) and fig.dpi == 100  # at least 3 inches
  (ax,) = fig.axes
  assert ax.get_title() == ("Pallas speedup over the jitted JAX reference (NVIDIA H200)\n"
                            "size medium, run run-a")
  assert ax.title.get_fontsize() == 9
  assert (ax.get_xscale(), ax.yaxis_inverted()) == ("log", True)
  assert ax.get_xlabel() == "speedup (baseline / kernel; > 1: the kernel is faster)"
  assert [t.get_text() for t in ax.get_yticklabels()] == [
      "01 relu", "02 gelu", f"{summary[2].Task_ID:02d} matmul_relu",
      f"{summary[3].Task_ID:02d} flash_attention"]
  assert {t.get_fontsize() for t in ax.get_yticklabels()} == {7}
  assert list(ax.get_yticks()) == [0, 1, 2, 3]
  bars = ax.patches  # from 1.0 to the speedup; none where it is not positive and finite
  assert [(b.get_x(), b.get_width()) for b in bars] == [(1.0, 1.0), (1.0, 1.5)]
  assert [b.get_y() + b.get_height() / 2 for b in bars] == [0, 1]
  green, red = mcolors.to_rgba("tab:green"), mcolors.to_rgba("tab:red")
  assert [b.get_facecolor() for b in bars] == [green, red]  # gelu is incorrect
  untimed, dots, failed, one = ax.lines
  assert (list(untimed.get_xdata()), list(untimed.get_ydata())) == ([1.0, 1.0], [2, 3])
  assert (untimed.get_marker(), untimed.get_color()) == ("x", "tab:red")
  assert (list(dots.get_xdata()), list(dots.get_ydata())) == ([0.5, 0.5, 0.5], [0, 1, 2])
  assert (dots.get_marker(), dots.get_linestyle(), dots.get_color()) == (".", "None", "k")
  assert summary[3].Original_Status == "error"  # flash_attention's original: a cross
  assert (list(failed.get_xdata()), list(failed.get_ydata())) == ([0.25], [3])
  assert (failed.get_marker(), failed.get_color()) == ("x", "black")
  assert (list(one.get_xdata()), one.get_color(), one.get_linewidth()) == ([1.0, 1.0], "grey", 0.8)
  legend = ax.get_legend()
  assert [t.get_text() for t in legend.get_texts()] == [  # matplotlib lists lines first
      "fixed kernel fails, no speedup", "original kernel", "original kernel fails (no speedup)",
      "fixed kernel, from 1.0 (green: pass, red: fails)"]
  assert legend._loc == 4 and {t.get_fontsize() for t in legend.get_texts()} == {7}


def test_speedup_plot_of_many_rows_cpu_rows_and_no_originals(trees, tmp_path, figures):
  summary = list(_summary_rows(trees, tmp_path))
  rows_ = [dataclasses.replace(summary[0], Original_Speedup_Compiled=None, Task_ID=i,
                               Backend="interpret (CPU)" if i == 3 else "triton",
                               Target_Hardware="cpu" if i == 3 else "NVIDIA H200")
           for i in range(1, 13)]
  plots.speedup_png(rows_, comparable=False)
  (ax,) = figures[0].axes
  assert tuple(figures[0].get_size_inches()) == (8.0, pytest.approx(4.6))
  assert ax.get_title() == ("Pallas speedup over the jitted JAX reference (NVIDIA H200, cpu)\n"
                            "CPU interpret-mode timings: not comparable")
  assert len(ax.lines) == 1  # the 1x line only: the originals passed (no cross), untimed
  assert [t.get_text() for t in ax.get_legend().get_texts()] == [
      "fixed kernel, from 1.0 (green: pass, red: fails)"]


def test_speedup_plot_without_timings_says_so(trees, tmp_path, figures):
  summary = [dataclasses.replace(r, Pallas_Speedup=None, Original_Speedup_Compiled=float("nan"))
             for r in _summary_rows(trees, tmp_path)]
  plots.speedup_png(summary, comparable=True)
  plots.speedup_png([], comparable=True)
  for fig, hardware in zip(figures, ("NVIDIA H200", "no rows")):
    (ax,) = fig.axes
    assert tuple(fig.get_size_inches()) == (6.0, 2.5) and not ax.axison
    assert ax.get_title() == f"Pallas speedup over the jitted JAX reference ({hardware})"
    (text,) = ax.texts
    assert text.get_text() == "no timings to plot (not measured, or every kernel failed)"
    assert text.get_position() == (0.5, 0.5) and text.get_transform() == ax.transAxes
    assert (text.get_ha(), text.get_va()) == ("center", "center")
  only_originals = [dataclasses.replace(r, Pallas_Speedup=None) for r in _summary_rows(
      trees, tmp_path / "again")]
  plots.speedup_png(only_originals, comparable=True)
  ax = figures[2].axes[0]
  assert list(ax.texts) == [] and len(ax.patches) == 0  # no bar: a red cross at 1.0 each
  assert list(ax.lines[0].get_ydata()) == [0, 1, 2, 3] and ax.lines[0].get_marker() == "x"


def _roof_records(trees):
  records = [rf.record(trees, "relu", "gpu"), rf.record(trees, "gelu", "gpu", "large",
                                                        status=Status.INCORRECT, correct=False),
             rf.record(trees, "relu", "tpu"),                                 # an original
             rf.record(trees, "silu", "gpu", comparable=False, kernel_sha256="0" * 64),
             rf.record(trees, "tanh", "gpu", runtime_ms=None, kernel_sha256="0" * 64),
             rf.record(trees, "exp", "gpu", roofline=None, kernel_sha256="0" * 64)]
  zero = rf.record(trees, "log", "gpu", kernel_sha256="0" * 64)
  records.append(dataclasses.replace(zero, roofline=dataclasses.replace(zero.roofline, bytes=0)))
  return records


def test_roofline_plot(trees, figures):
  records = _roof_records(trees)
  records[0] = dataclasses.replace(records[0], run=rf.run_info(run_id="run-a"))
  records[1] = dataclasses.replace(records[1], run=rf.run_info(
      run_id="run-a", gpu_index=1, copy=3000.0, read=2900.0, matmul=500.0))
  plots.roofline_png(records)
  (fig,) = figures
  (ax,) = fig.axes
  assert tuple(fig.get_size_inches()) == (12.0, 9.0)
  assert ax.get_title() == "Roofline of the fixed kernels (NVIDIA H200)"
  assert ax.title.get_fontsize() == 10
  assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
  assert (ax.get_xlabel(), ax.get_ylabel()) == ("arithmetic intensity (FLOP / byte)",
                                                "achieved TFLOP/s")
  relu, gelu = records[0].roofline, records[1].roofline
  points = [(relu.flops / relu.bytes, relu.achieved_tflops), (gelu.flops / gelu.bytes,
                                                              gelu.achieved_tflops)]
  *marks, roof_a, roof_b = ax.lines
  assert [(m.get_xdata()[0], m.get_ydata()[0]) for m in marks] == points
  assert [(m.get_marker(), m.get_color(), m.get_markersize()) for m in marks] == [
      ("o", "tab:green", 5), ("s", "tab:red", 5)]  # passed at medium, failed at large
  assert _texts(ax) == ["relu (medium)", "gelu (large)"]
  assert [(t.xy, t.get_fontsize(), t.anncoords) for t in ax.texts] == [
      (points[0], 7, "offset points"), (points[1], 7, "offset points")]
  for roof, (bandwidth, peak) in ((roof_a, (4000.0, 400.0)), (roof_b, (3000.0, 500.0))):
    xs, ys = list(roof.get_xdata()), list(roof.get_ydata())
    lo, hi = min(p[0] for p in points) / 4, max(p[0] for p in points) * 4
    assert len(xs) == 64 and xs[0] == lo and xs[-1] == pytest.approx(hi)
    assert xs[1] == pytest.approx(lo * (hi / lo) ** (1 / 63))
    assert ys == [min(peak, bandwidth * x / 1000.0) for x in xs]  # the run's own ceilings
    assert (roof.get_linestyle(), roof.get_linewidth()) == ("--", 1)
  legend = ax.get_legend()
  assert [t.get_text() for t in legend.get_texts()] == [
      "passed, size medium", "failed, size large",
      "ceilings of run run-a, GPU 0 (the card's table): 4000.0 GB/s (larger of copy and read), "
      "400.0 TFLOP/s (matmul)",
      "ceilings of run run-a, GPU 1 (the card's table): 3000.0 GB/s (larger of copy and read), "
      "500.0 TFLOP/s (matmul)"]
  assert legend._loc == 4 and legend.get_texts()[0].get_fontsize() == 8
  assert [t.get_text() for t in fig.texts] == [  # log's record has no bytes: named, not lost
      "not on the log axes (0 FLOP or 0 bytes): log (medium)"]


@pytest.mark.parametrize("gbps, tflops, label, peak, bandwidth", [
    (None, 400.0, "no bandwidth, 400.0 TFLOP/s (matmul)", 400.0, None),
    (4000.0, -1.0, "4000.0 GB/s (larger of copy and read), no matmul ceiling", None, 4000.0),
])
def test_roofline_with_one_ceiling(trees, figures, gbps, tflops, label, peak, bandwidth):
  record = rf.record(trees, "relu")
  record = dataclasses.replace(record, roofline=dataclasses.replace(
      record.roofline, ceiling_gbps=gbps, ceiling_tflops=tflops))
  plots.roofline_png([record])
  ax = figures[0].axes[0]
  _, ceiling = ax.lines
  assert ax.get_legend().get_texts()[1].get_text() == (
      f"ceilings the records hold (their run not noted): {label}")
  xs = ceiling.get_xdata()
  assert list(ceiling.get_ydata()) == [peak if bandwidth is None else bandwidth * x / 1000.0
                                       for x in xs]


def test_roofline_without_ceilings_or_points(trees, figures):
  record = rf.record(trees, "relu")
  bare = dataclasses.replace(record, roofline=dataclasses.replace(
      record.roofline, ceiling_gbps=None, ceiling_tflops=0.0))
  plots.roofline_png([bare])
  ax = figures[0].axes[0]
  assert len(ax.lines) == 1  # the point, no roof
  assert [t.get_text() for t in ax.get_legend().get_texts()] == ["passed, size medium"]
  plots.roofline_png(_roof_records(trees)[2:])
  plots.roofline_png([])
  for fig in figures[1:]:
    (ax,) = fig.axes
    assert tuple(fig.get_size_inches()) == (6.0, 2.5)
    assert ax.get_title() == "Roofline of the fixed kernels (no GPU rows)"
    assert _texts(ax) == ["no comparable GPU timings (a CPU run, or nothing measured)"]


def test_roofline_of_two_gpus_and_a_one_byte_kernel(trees, figures):
  relu = rf.record(trees, "relu")
  tiny = dataclasses.replace(relu, task="gelu", roofline=dataclasses.replace(
      relu.roofline, bytes=1, flops=2), environment=dataclasses.replace(
          rf.ENV, device_kind="NVIDIA A100"))
  plots.roofline_png([relu, tiny])
  (ax,) = figures[0].axes
  assert ax.get_title() == "Roofline of the fixed kernels (NVIDIA A100, NVIDIA H200)"
  assert _texts(ax) == ["relu (medium)", "gelu (medium)"]
  assert ax.lines[0].get_xdata()[1] == 2.0  # 2 FLOP over 1 byte


def test_png_bytes_are_deterministic_and_carry_no_software_tag(trees, tmp_path):
  summary = _summary_rows(trees, tmp_path)
  first = plots.speedup_png(summary, comparable=True)
  second = plots.speedup_png(summary, comparable=True)
  assert first == second and first.startswith(b"\x89PNG\r\n\x1a\n")
  assert b"Software" not in first and b"matplotlib" not in first.lower()
  width, height = struct.unpack(">II", first[16:24])  # IHDR: the figure at 100 dpi
  assert (width, height) == (800, 300)
  assert struct.unpack(">II", plots.speedup_png([], comparable=True)[16:24]) == (600, 250)


def test_png_bytes_do_not_follow_the_users_matplotlib_settings(trees, tmp_path):
  summary = _summary_rows(trees, tmp_path)
  expected = plots.speedup_png(summary, comparable=True)
  with matplotlib.rc_context({"figure.dpi": 72, "savefig.dpi": 72, "savefig.format": "svg"}):
    assert plots.speedup_png(summary, comparable=True) == expected

# ---------------------------------------------------------------------------------------------
# validate: the folder as `datasets` loads it


@pytest.fixture(scope="module")
def built_folder(tmp_path_factory):
  """A small dataset folder (4 tasks, both variants, artifacts) to copy and break."""
  root = tmp_path_factory.mktemp("built")
  trees_ = rf.write_tree(root / "src")
  records = rf.standard_records(trees_)
  run = rf.write_run(root / "run", records, rf.artifacts_for(records))
  return build.build_dataset([run], root / "out", kernel_trees=trees_, repo_id="org/pb").out_dir


@pytest.fixture
def folder(built_folder, tmp_path):
  return pathlib.Path(shutil.copytree(built_folder, tmp_path / "copy"))


def _edit_card(folder_, change):
  """Rewrites the card's YAML after `change(data)` edits it in place."""
  readme = folder_ / "README.md"
  text = readme.read_text()
  _, front, body = text.split("---\n", 2)
  data = yaml.safe_load(front)
  change(data)
  readme.write_text("---\n" + yaml.safe_dump(data, sort_keys=False) + "---\n" + body)


def _info(data, name):
  return next(i for i in data["dataset_info"] if i["config_name"] == name)


def _folder_error(folder_):
  with pytest.raises(validate.FolderError) as info:
    validate.validate_folder(folder_)
  return str(info.value)


def test_validate_folder_counts_each_config_in_order(folder, monkeypatch):
  loaded = []
  real = validate._check_config

  def check(folder_, name, info, cache):
    loaded.append((name, info["config_name"], pathlib.Path(cache)))
    return real(folder_, name, info, cache)
  monkeypatch.setattr(validate, "_check_config", check)
  configs, infos = validate._card_yaml(folder)
  monkeypatch.setattr(validate, "_card_yaml", lambda f: (configs[::-1], infos))
  counts = validate.validate_folder(str(folder))
  assert isinstance(counts, types.MappingProxyType)
  assert {c: dict(s) for c, s in counts.items()} == {
      "default": {"level_1": 2, "level_2": 1, "level_3": 1}, "runs": {"train": 8},
      "artifacts": {"train": 8}, "sft": {"train": 6},
      "preference": {"train": 3, "test": 1}}
  assert [(n, c) for n, c, _ in loaded] == [("default", "default"), ("runs", "runs"),
                                            ("artifacts", "artifacts"), ("sft", "sft"),
                                            ("preference", "preference")]
  caches = {cache for *_, cache in loaded}
  (cache,) = caches
  assert cache.name.startswith("pallasbench-validate-") and not cache.exists()


def test_card_yaml_reads_configs_and_infos(folder):
  configs, infos = validate._card_yaml(folder)
  assert [c["config_name"] for c in configs] == ["artifacts", "default", "preference", "runs",
                                                 "sft"]
  assert sorted(infos) == ["artifacts", "default", "preference", "runs", "sft"]
  assert infos["runs"]["splits"][0]["num_examples"] == 8

  def one_info(data):
    data["dataset_info"] = {k: v for k, v in _info(data, "runs").items() if k != "config_name"}
  _edit_card(folder, one_info)
  _, infos = validate._card_yaml(folder)
  assert list(infos) == ["default"] and infos["default"]["splits"][0]["num_examples"] == 8


@pytest.mark.parametrize("key", ["configs", "dataset_info"])
def test_a_card_without_its_yaml_blocks_is_refused(folder, key):
  _edit_card(folder, lambda data: data.pop(key))
  assert _folder_error(folder) == (f"{folder / 'README.md'} lacks `configs:` or `dataset_info:`; "
                                   "rebuild the folder")


def test_a_folder_without_a_card_is_refused(folder):
  (folder / "README.md").unlink()
  assert _folder_error(folder) == f"{folder} has no README.md; build it with builder.build first"


@pytest.mark.parametrize("dropped", ["default", "runs"])
def test_default_and_runs_configs_are_required(folder, dropped):
  def drop(data):
    data["configs"] = [c for c in data["configs"] if c["config_name"] != dropped]
    data["dataset_info"].remove(_info(data, dropped))
  _edit_card(folder, drop)
  assert _folder_error(folder) == (f"{folder}: the card must declare the `default` and `runs` "
                                   "configs")


def test_stale_counts_and_features_of_the_card(folder):
  _edit_card(folder, lambda data: _info(data, "runs")["splits"][0].update(num_examples=9))
  message = _folder_error(folder)
  assert message.startswith(f"{folder}: the card's row counts for 'runs' do not match the files "
                            "(stale dataset_info): rebuild the folder. ")
  _edit_card(folder, lambda data: _info(data, "runs").pop("splits"))
  assert _folder_error(folder) == (f"{folder}: the card says 'runs' has {{}} rows, the files hold "
                                   "{'train': 8}; rebuild the folder")
  _edit_card(folder, lambda data: _info(data, "runs").update(
      splits=[{"name": "train", "num_examples": 8}]))
  validate.validate_folder(folder)
  _edit_card(folder, lambda data: _info(data, "default").pop("features"))
  assert _folder_error(folder) == (f"{folder}: the card's dataset_info features of 'default' "
                                   "are stale")


def test_files_whose_features_are_not_the_schemas(folder, monkeypatch):
  monkeypatch.setitem(validate.EXPECTED_FEATURES, "artifacts", schema.EvalRecord)
  assert _folder_error(folder) == (f"{folder}: artifacts/train features differ from schema.py's; "
                                   "rebuild")


@pytest.mark.parametrize("error, message", [
    (OSError(errno.EACCES, "Permission denied"), "config 'default' does not load: "
     "PermissionError: [Errno 13] Permission denied"),
    (ValueError("bad parquet"), "config 'default' does not load: ValueError: bad parquet"),
])
def test_a_config_that_does_not_load(folder, monkeypatch, error, message):
  def fail(*args, **kwargs):
    raise error
  monkeypatch.setattr(datasets, "load_dataset", fail)
  with pytest.raises(validate.FolderError) as info:
    validate.validate_folder(folder)
  assert str(info.value) == f"{folder}: {message}" and info.value.__cause__ is error


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
def test_a_full_disk_under_the_cache_is_not_the_folders_fault(folder, monkeypatch, code):
  caches = []

  def fail(path, name, cache_dir):
    caches.append(cache_dir)
    raise OSError(code, os.strerror(code))
  monkeypatch.setattr(datasets, "load_dataset", fail)
  message = _folder_error(folder)
  assert message == (f"cannot check {folder}: loading config 'default' failed writing its cache "
                     f"in {caches[0]} ({os.strerror(code)}); free space and retry")

# ---------------------------------------------------------------------------------------------
# build: summary, checks, writing and swapping in the folder


def _summary(**overrides):
  values = {"out_dir": pathlib.Path("/data/out"), "rows": {"default": {"level_1": 2, "level_2": 1},
                                                            "runs": {"train": 6}},
            "tasks": 3, "complete": False, "reproducibility": None, "verdict_changes": None,
            "folder_bytes": 1_995_001, "files": ("a", "b"), "hardware": "h200", **overrides}
  return build.BuildSummary(**values)


def test_build_summary_describes_itself(monkeypatch):
  summary = _summary()
  assert summary.headline == "medium" and summary.repo_name == "pallasbench-robust-gpu-h200"
  assert summary.default_repo_id("org") == "org/pallasbench-robust-gpu-h200"
  asked = []
  monkeypatch.setattr("builder.push.token_owner", lambda token: asked.append(token) or "me")
  assert summary.default_repo_id(token="hf_x") == "me/pallasbench-robust-gpu-h200"
  assert asked == ["hf_x"]
  assert summary.describe() == (
      "built /data/out (2.00 MB, 2 files)\n"
      "  3 of 45 tasks at medium; default: level_1 2, level_2 1; runs: train 6")
  repro = {"n": 7, "median": 0.0123, "p90": 0.05, "max": 0.1234, "n_above": 2}
  assert _summary(reproducibility=repro, verdict_changes=1, headline="large").describe() == (
      "built /data/out (2.00 MB, 2 files)\n"
      "  3 of 45 tasks at large; default: level_1 2, level_2 1; runs: train 6\n"
      "  reproducibility over 7 repeats: median 1.2%, p90 5.0%, max 12.3%, 2 above 5%; "
      "1 verdict(s) differ")
  assert "reproducibility" not in _summary(reproducibility={**repro, "n": 0}).describe()


def test_headline_size_names_the_sizes():
  assert build._headline("large") == "large"
  _raises("unknown headline size 'huge'; sizes: ['small', 'medium', 'large', 'edge']",
          build._headline, "huge")


def test_hardware_and_default_repo_id(trees, tmp_path):
  records = [rf.record(trees, "relu"),
             rf.record(trees, "relu", "tpu",
                       environment=dataclasses.replace(rf.ENV, hardware="tpu-only")),
             rf.record(trees, "gelu", environment=dataclasses.replace(rf.ENV, hardware="b200"))]
  path = rf.write_run(tmp_path / "run", records)
  assert build.hardware_of([str(path)]) == "b200-h200"
  merged = rec.merge_runs([rec.read_run(path)])
  assert release.default_repo_id(build._hardware(merged)) == (
      "pallasbench-robust/pallasbench-robust-gpu-b200-h200")
  originals = rec.merge_runs([_card_run(trees, tmp_path, "t", [records[1]])])
  assert build._hardware(originals) == "unknown"


def test_reproducibility_and_verdict_changes_name_both_runs(trees, tmp_path):
  first = rf.standard_records(trees)
  second = [rf.record(trees, "relu", runtime_ms=0.6), rf.record(
      trees, "gelu", "tpu", runtime_ms=None, baseline_ms=None, status=Status.TIMEOUT,
      correct=False, error="slow")]
  third = [rf.record(trees, "relu", runtime_ms=0.52)]
  merged = rec.merge_runs([_card_run(trees, tmp_path, "a", first),
                           _card_run(trees, tmp_path, "b", second),
                           _card_run(trees, tmp_path, "c", third)])
  repro = repeats.pairs(merged)
  assert list(repro.columns) == list(repeats.COLUMNS)
  assert [tuple(r) for r in repro[["task", "run_a", "run_b", "above_threshold"]].itertuples(
      index=False)] == [("relu", "a", "b", True), ("relu", "a", "c", False)]
  assert list(repro["rel_diff"]) == [pytest.approx(0.2), pytest.approx(0.04)]
  assert list(repro.index) == [0, 1]  # one table, numbered through
  changes = build._verdict_changes(merged)
  assert changes.to_dict("records") == [
      {"task": "gelu", "variant": "tpu", "size": "medium", "run_a": "a", "run_b": "b",
       "status_a": "pass", "status_b": "timeout", "error_a": None, "error_b": "slow",
       "reasons_a": [], "reasons_b": []}]
  single = rec.merge_runs([_card_run(trees, tmp_path, "d", first)])
  assert repeats.pairs(single) is None and build._verdict_changes(single) is None


def test_finite_turns_non_finite_numbers_into_null():
  value = {"a": float("nan"), "b": [1.5, float("inf"), {"c": -float("inf")}], "d": "x", "e": 2}
  assert build._finite(value) == {"a": None, "b": [1.5, None, {"c": None}], "d": "x", "e": 2}


def _two_runs(trees, tmp_path):
  original = trees.path("tpu", "gelu")
  original.write_text(original.read_text() + "# within 2 ulp (≥ 2 ulp is a failure)\n")
  first = rf.standard_records(trees)
  first[3] = rf.record(trees, "gelu", "tpu", runtime_ms=2.0)
  repeat = [rf.record(trees, "relu", runtime_ms=0.6),
            rf.record(trees, "gelu", "tpu", runtime_ms=None, baseline_ms=None,
                      status=Status.TIMEOUT, correct=False, error="slow")]
  a = rf.write_run(tmp_path / "in" / "a", first, rf.artifacts_for(first))
  b = rf.write_run(tmp_path / "in" / "b", repeat, tasks=("relu", "gelu"))
  return a, b, first


def test_build_writes_every_file_of_the_folder(trees, tmp_path, caplog):
  a, b, first = _two_runs(trees, tmp_path)
  out = tmp_path / "data" / "sets" / "out"  # folders above it are made
  with caplog.at_level(logging.INFO, logger=build.__name__):
    summary = build.build_dataset([a, b], out, kernel_trees=trees)
  runs = [rec.read_run(a), rec.read_run(b)]
  merged = rec.merge_runs(runs)
  summary_rows = rows.summary_rows(merged, trees, "medium")
  files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
  assert summary == build.BuildSummary(
      out_dir=out, rows=summary.rows, tasks=4, complete=False,
      reproducibility=summary.reproducibility, verdict_changes=1,
      folder_bytes=sum((out / f).stat().st_size for f in files), files=tuple(files),
      hardware="h200", headline="medium")
  assert {c: dict(s) for c, s in summary.rows.items()} == {
      "default": {"level_1": 2, "level_2": 1, "level_3": 1}, "runs": {"train": 10},
      "artifacts": {"train": 8}, "sft": {"train": 6},  # runs: every record of both runs
      "preference": {"train": 3, "test": 1}}
  assert isinstance(summary.reproducibility, types.MappingProxyType)
  assert dict(summary.reproducibility) == {"n": 1, "median": pytest.approx(0.2),
                                           "p90": pytest.approx(0.2), "max": pytest.approx(0.2),
                                           "n_above": 1}
  assert files == sorted([
      "README.md", "LICENSE", "NOTICE", "sakanaai_pallasbench.json", "fix.patch",
      "plots/speedup.png", "plots/roofline.png", "default/level_1-00000-of-00001.parquet",
      "default/level_2-00000-of-00001.parquet", "default/level_3-00000-of-00001.parquet",
      "runs/train-00000-of-00001.parquet", "artifacts/train-00000-of-00001.parquet",
      "sft/train-00000-of-00001.parquet", "preference/train-00000-of-00001.parquet",
      "preference/test-00000-of-00001.parquet",
      "results/a/manifest.json", "results/a/records.jsonl", "results/a/artifacts.jsonl.xz",
      "results/b/manifest.json", "results/b/records.jsonl",
      *(f"kernels_{v}/{t}.py" for v in ("tpu", "gpu") for t in rf.TASKS)])
  assert sorted(p.name for p in out.parent.iterdir()) == ["out"]  # no staging left
  for path in out.rglob("*.parquet"):  # typed as the schema, for readers of the files alone
    config = path.relative_to(out).parts[0]
    features = schema.features_of(validate.config_features()[config])
    assert pq.read_schema(path).remove_metadata() == features.arrow_schema.remove_metadata()
    columns = pq.ParquetFile(path).metadata.row_group(0)  # zstd: the IR and PTX a fifth of Snappy's
    assert {columns.column(i).compression for i in range(columns.num_columns)} == {"ZSTD"}
  assert out.stat().st_mode & 0o777 == 0o755
  messages = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == build.__name__]
  assert messages == [("WARNING", "built 4 of 45 tasks: a partial dataset"),
                      ("INFO", f"built {out}: {dict(summary.rows)}, {summary.folder_bytes} bytes")]
  # the JSON list: the default config's rows, non-finite numbers as null, UTF-8 as is
  text = (out / "sakanaai_pallasbench.json").read_text()
  assert json.loads(text) == [build._finite(to_json_dict(r)) for r in summary_rows]
  assert text.startswith('[\n  {\n    "Op_Name": "relu",\n') and text.endswith("}\n]\n")
  assert "≥ 2 ulp" in text and "NaN" not in text and "Infinity" not in text
  assert (out / "fix.patch").read_text() == fix_patch(trees)
  for variant in ("tpu", "gpu"):
    for path in trees.files(variant):
      assert (out / f"kernels_{variant}" / path.name).read_bytes() == path.read_bytes()
  for run in (a, b):
    for name in ("manifest.json", "records.jsonl"):
      assert (out / "results" / run.name / name).read_bytes() == (run / name).read_bytes()
  packed = out / "results" / a.name / "artifacts.jsonl.xz"  # the IR, compressed, as written
  assert lzma.decompress(packed.read_bytes()) == (a / "artifacts.jsonl").read_bytes()
  assert (out / "plots" / "speedup.png").read_bytes() == plots.speedup_png(
      summary_rows, comparable=True, size="medium", runs=["a"])
  assert (out / "plots" / "roofline.png").read_bytes() == plots.roofline_png(merged.records)
  card_text = (out / "README.md").read_text()
  front = DatasetCard(card_text).data.to_dict()
  assert front["pretty_name"] == "PallasBench-Robust (NVIDIA H200)"
  assert "pallasbench-robust/pallasbench-robust-gpu-h200" in card_text and "<org>" not in card_text
  assert card.MARKER in card_text
  assert "1 repeated evaluation(s) got a different verdict in the other run" in card_text
  assert "| relu | gpu | medium | a | b | 0.5 | 0.6 | 20.0% |" in card_text
  configs = {c["config_name"]: c for c in front["configs"]}
  assert configs["default"] == {"config_name": "default", "default": True, "data_files": [
      {"split": s, "path": f"default/{s}-*.parquet"} for s in ("level_1", "level_2", "level_3")]}
  assert configs["runs"] == {"config_name": "runs", "data_files": [
      {"split": "train", "path": "runs/train-*.parquet"}]}
  infos = {i["config_name"]: i for i in front["dataset_info"]}
  for name, info in infos.items():
    parquet = sorted((out / name).glob("*.parquet"))
    assert info["download_size"] == sum(p.stat().st_size for p in parquet)
    assert info["dataset_size"] == sum(s["num_bytes"] for s in info["splits"]) > 0
    assert datasets.Features._from_yaml_list(info["features"]) == schema.features_of(
        validate.config_features()[name])
  assert [(s["name"], s["num_examples"]) for s in infos["default"]["splits"]] == [
      ("level_1", 2), ("level_2", 1), ("level_3", 1)]


def test_build_with_its_own_repo_id_at_the_first_size_planned(trees, tmp_path):
  """No record at medium: the headline is the first size the run planned that was measured;
  rows measured on two kinds of GPU name both."""
  a100 = dataclasses.replace(rf.ENV, device_kind="NVIDIA A100", hardware="a100")
  records = [rf.record(trees, "relu", "gpu", "large"),
             rf.record(trees, "gelu", "gpu", "large", environment=a100)]
  run = rf.write_run(tmp_path / "run", records, tasks=("relu", "gelu"),
                     sizes=("medium", "large"), variants=("gpu",))
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees, repo_id="me/pb")
  assert (summary.headline, summary.reproducibility, summary.verdict_changes) == (
      "large", None, None)
  assert summary.hardware == "a100-h200"
  assert {c: dict(s) for c, s in summary.rows.items()} == {"default": {"level_1": 2},
                                                          "runs": {"train": 2},
                                                          "sft": {"train": 1, "test": 1}}
  assert "artifacts/train-00000-of-00001.parquet" not in summary.files
  text = (tmp_path / "out" / "README.md").read_text()
  assert 'load_dataset("me/pb")' in text and "Headline\nsize: `large`" in text
  assert DatasetCard(text).data.to_dict()["pretty_name"] == (
      "PallasBench-Robust (NVIDIA A100, NVIDIA H200)")
  assert "| relu | gpu | medium |" in text  # planned, not measured: listed, not refused
  rows_ = json.loads((tmp_path / "out" / "sakanaai_pallasbench.json").read_text())
  assert [(r["Op_Name"], r["Size"]) for r in rows_] == [("relu", "large"), ("gelu", "large")]


def test_build_refuses_untrustworthy_inputs_before_writing(trees, tmp_path):
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records[:-1]))
  out = tmp_path / "out"
  _raises("1 record(s) have no line in their run's artifacts.jsonl: run: flash_attention/tpu/"
          "medium. Re-measure them (remove their lines from records.jsonl, then regenerate "
          "--resume --results RUN), or build with --allow-partial (the card then lists every "
          "missing artifact)", build.build_dataset, [run], out, kernel_trees=trees)
  rf.write_run(tmp_path / "run", records[:-1], rf.artifacts_for(records[:-1]))
  _raises("the headline size 'medium' lacks records for 1 evaluation(s): flash_attention (tpu). "
          "To build what was measured, pass --allow-partial (the card then lists every "
          "evaluation that was not measured); or finish the run (regenerate --resume), or add a "
          "run folder that measured them",
          build.build_dataset, [run], out, kernel_trees=trees)
  _raises("the headline size 'large' lacks records for every task: the runs measured the fixed "
          "kernels at medium; pass --headline-size medium (or leave it out: medium when "
          "measured, else the first size measured)", build.build_dataset, [run], out,
          kernel_trees=trees, headline_size="large")
  trees.path("gpu", "relu").write_text("# edited\n")
  with pytest.raises(BuildError, match=r"^1 record\(s\) measured a kernel that differs"):
    build.build_dataset([run], out, kernel_trees=trees, allow_partial=True)
  _raises(f"out_dir {str(tmp_path)!r} holds the build's input {str(run.resolve())!r}; choose "
          "another output folder", build.build_dataset, [run], tmp_path, kernel_trees=trees)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "src"]


def test_partial_build_lists_what_is_missing(trees, tmp_path):
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records[:-1], rf.artifacts_for(records[:-2]))
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees, allow_partial=True)
  text = (summary.out_dir / "README.md").read_text()
  assert "**Partial release:** the runs planned 1 evaluation(s)" in text
  assert "| flash_attention | tpu | medium |" in text
  assert "**Artifacts missing:** 1 record(s)" in text
  assert "| run | flash_attention | gpu | medium |" in text


def test_rebuild_swaps_the_folder_in_whole(trees, tmp_path, monkeypatch):
  a, _, first = _two_runs(trees, tmp_path)
  out = tmp_path / "out"
  build.build_dataset([a], out, kernel_trees=trees)
  small = rf.write_run(tmp_path / "in" / "small", first[:2], tasks=("relu",))
  summary = build.build_dataset([small], out, kernel_trees=trees)
  assert summary.tasks == 1 and not (out / "results" / "a").exists()
  assert not (out / "default" / "level_2-00000-of-00001.parquet").exists()
  assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out", "src"]
  before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
  # the next builds write a stand-in folder: what matters is what happens around it
  written = []

  def write_folder(folder_, **kwargs):
    written.append(folder_)
    (folder_ / "README.md").write_text("new")
  monkeypatch.setattr(build, "_write_folder", write_folder)
  monkeypatch.setattr(build, "validate_folder", lambda folder_: {"default": {"level_1": 1}})
  real = os.replace

  def second_rename_fails(src, dst):
    if pathlib.Path(src).name.startswith(".out.building-"):
      raise OSError(errno.ENOSPC, "No space left on device")
    return real(src, dst)
  monkeypatch.setattr(build.os, "replace", second_rename_fails)
  with pytest.raises(BuildError, match="No space left on device"):
    build.build_dataset([small], out, kernel_trees=trees)
  assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
  assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out", "src"]
  assert written[0].parent == tmp_path and written[0].name.startswith(".out.building-")
  monkeypatch.setattr(build.os, "replace", real)

  def broken(folder_, **kwargs):
    (folder_ / "half").write_text("x")
    raise RuntimeError("disk full")
  monkeypatch.setattr(build, "_write_folder", broken)
  with pytest.raises(RuntimeError, match="disk full"):
    build.build_dataset([small], out, kernel_trees=trees)
  assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
  assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out", "src"]
  monkeypatch.setattr(build, "_write_folder", write_folder)
  build.build_dataset([small], tmp_path / "new" / "sets" / "out", kernel_trees=trees)
  assert (tmp_path / "new" / "sets" / "out" / "README.md").read_text() == "new"

  def vanished(folder_, **kwargs):  # a cleaner removed the staging folder, then a write failed
    shutil.rmtree(folder_)
    raise RuntimeError("disk full")
  monkeypatch.setattr(build, "_write_folder", vanished)
  with pytest.raises(RuntimeError, match="disk full"):  # that error, not the cleanup's
    build.build_dataset([small], out, kernel_trees=trees)


def test_swap_in_a_new_and_an_existing_folder(tmp_path, monkeypatch):
  staging = pathlib.Path(tempfile.mkdtemp(dir=tmp_path))
  (staging / "new").write_text("1")
  out = tmp_path / "out"
  build._swap_in(staging, out)
  assert (out / "new").read_text() == "1" and not staging.exists()
  assert out.stat().st_mode & 0o777 == 0o755
  staging = pathlib.Path(tempfile.mkdtemp(dir=tmp_path))
  (staging / "newer").write_text("2")
  moves = []
  real = os.replace
  monkeypatch.setattr(build.os, "replace", lambda src, dst: moves.append((src, dst)) or real(
      src, dst))
  build._swap_in(staging, out)
  assert [p.name for p in out.iterdir()] == ["newer"]
  assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
  # the previous folder is set aside next to it (one filesystem: the renames are atomic)
  (aside, previous), (src, dst) = moves
  assert aside == out and previous.name == "previous" and previous.parent.parent == tmp_path
  assert previous.parent.name.startswith(".out.old-") and (src, dst) == (staging, out)


def test_swap_in_does_not_fail_on_an_old_copy_it_cannot_remove(tmp_path, monkeypatch):
  """The new folder is in place when the old copy is deleted: a file there that will not go
  (a busy network share) leaves the copy behind, but the build has succeeded."""
  out = tmp_path / "out"
  out.mkdir()
  (out / "stuck").write_text("old")
  staging = pathlib.Path(tempfile.mkdtemp(dir=tmp_path))
  (staging / "new").write_text("new")
  real_unlink = os.unlink

  def unlink(path, *args, **kwargs):
    if str(path).endswith("stuck"):
      raise OSError(errno.EBUSY, "Device or resource busy")
    return real_unlink(path, *args, **kwargs)
  monkeypatch.setattr(os, "unlink", unlink)
  build._swap_in(staging, out)
  assert [p.name for p in out.iterdir()] == ["new"]

# ---------------------------------------------------------------------------------------------
# push: repo ids, tokens, the preflight and the commit, against a stand-in HfApi


@pytest.mark.parametrize("repo_id", ["org/name", "a/b", "O-1/x.y_z", "o/" + "n" * 96])
def test_good_repo_ids(repo_id):
  push.check_repo_id(repo_id)


@pytest.mark.parametrize("repo_id, problem", [
    ("name", "must be 'org/name': two parts of letters, digits, '-', '_' or '.', each starting "
             "and ending with a letter or digit, at most 96 characters"),
    (None, "must be 'org/name'"), ("", "must be 'org/name'"), ("o/-x", "must be 'org/name'"),
    ("o/" + "n" * 97, "must be 'org/name'"), ("a/b/c", "must be 'org/name'"),
    ("o/a..b", "must not contain '..' or '--'"), ("o--p/ab", "must not contain '..' or '--'"),
    ("org/data.git", "must not end with '.git'"),
])
def test_bad_repo_ids(repo_id, problem):
  with pytest.raises(ValueError) as info:
    push.check_repo_id(repo_id)
  message = str(info.value)
  assert message.startswith(f"invalid repo id {repo_id!r}: it {problem}")
  assert message.endswith("; e.g. 'my-org/pallasbench-robust-gpu-h200'")
  if repo_id == "name":
    assert message == (f"invalid repo id 'name': it {problem}; e.g. "
                       "'my-org/pallasbench-robust-gpu-h200'")


def test_find_token_in_order(monkeypatch):
  import huggingface_hub  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(huggingface_hub, "get_token", lambda: "stored")
  monkeypatch.setenv("HF_TOKEN", "env")
  assert push.find_token("given") == "given"
  assert push.find_token(None) == "env"
  monkeypatch.delenv("HF_TOKEN")
  assert push.find_token(None) == "stored"
  monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
  with pytest.raises(push.PushError) as info:
    push.find_token(None)
  assert str(info.value) == ("no Hugging Face token: run `hf auth login` (a token with write "
                             "access) or export HF_TOKEN=hf_... before the command (from Python, "
                             "pass push_folder(..., token=...))")


def _http_error(status, path="/api/datasets/org/x/commit/main", server_message="refused",
                cls=None):
  from huggingface_hub.errors import HfHubHTTPError  # pylint: disable=import-outside-toplevel
  response = httpx2.Response(status, request=httpx2.Request("POST", f"https://hub.test{path}"))
  return (cls or HfHubHTTPError)(f"{status} Error", response=response,
                                 server_message=server_message)


def _dropped(cls=None, path="/api/datasets/org/x/commit/main"):
  return (cls or httpx2.ReadTimeout)("timed out", request=httpx2.Request(
      "POST", f"https://hub.test{path}"))


class _Api:
  """The HfApi calls the push makes: answers from its attributes, records every call, and
  raises `fail[method]` when set."""

  endpoint = "https://hub.test"

  def __init__(self, hub, token=None):
    self.hub = hub
    hub.apis.append(token)

  def _call(self, name, *args, **kwargs):
    self.hub.calls.append((name, args, kwargs))
    if name in self.hub.fail:
      raise self.hub.fail[name]

  def whoami(self):
    self._call("whoami")
    return self.hub.who

  def auth_check(self, repo_id, **kwargs):
    self._call("auth_check", repo_id, **kwargs)

  def create_repo(self, repo_id, **kwargs):
    self._call("create_repo", repo_id, **kwargs)

  def create_branch(self, repo_id, **kwargs):
    self._call("create_branch", repo_id, **kwargs)

  def repo_info(self, repo_id, **kwargs):
    self._call("repo_info", repo_id, **kwargs)
    return types.SimpleNamespace(sha="head0")

  def list_repo_files(self, repo_id, **kwargs):
    self._call("list_repo_files", repo_id, **kwargs)
    return list(self.hub.remote)

  def create_commit(self, repo_id, operations, **kwargs):
    self._call("create_commit", repo_id, [(type(o).__name__, o.path_in_repo) for o in operations],
               **kwargs)
    return types.SimpleNamespace(oid="c1", commit_url="https://hub.test/c1",
                                 pr_url="https://hub.test/pr/1" if kwargs["create_pr"] else None)

  def list_repo_refs(self, repo_id, **kwargs):
    self._call("list_repo_refs", repo_id, **kwargs)
    return types.SimpleNamespace(tags=[types.SimpleNamespace(name=n, target_commit=c)
                                       for n, c in self.hub.tags.items()])

  def create_tag(self, repo_id, **kwargs):
    self._call("create_tag", repo_id, **kwargs)


@pytest.fixture
def hub(monkeypatch):
  """A stand-in Hub behind huggingface_hub.HfApi, with a token in HF_TOKEN."""
  import huggingface_hub  # pylint: disable=import-outside-toplevel
  state = types.SimpleNamespace(apis=[], calls=[], fail={}, remote=[], tags={},
                                who={"name": "me", "orgs": [{"name": "team", "roleInOrg": "write"},
                                                            {"name": "fans", "roleInOrg": "read"}],
                                     "auth": {"accessToken": {"role": "write"}}})
  monkeypatch.setattr(huggingface_hub, "HfApi", lambda token=None: _Api(state, token))
  monkeypatch.setenv("HF_TOKEN", "hf_env")
  return state


def _preflight_error(**kwargs):
  with pytest.raises(push.PreflightError) as info:
    push.preflight(**kwargs)
  assert isinstance(info.value, ValueError)
  return str(info.value)


def test_preflight_checks_the_token_and_write_access(hub):
  assert push.preflight("org/x", token="hf_given") == "org/x"
  assert hub.apis == ["hf_given"]
  assert hub.calls == [("whoami", (), {}), ("auth_check", ("org/x",), {
      "repo_type": "dataset", "write": True})]
  assert push.preflight(None, hardware="h200", revision="main", create_pr=True) == (
      "me/pallasbench-robust-gpu-h200")
  assert hub.apis[-1] == "hf_env"
  assert push.preflight("org/x", revision="dev") == "org/x"  # a branch push, no pull request


def test_preflight_refusals_before_any_request(hub, monkeypatch):
  assert _preflight_error(repo_id="o/x", revision="dev", create_pr=True) == (
      "--create-pr opens a pull request against main; do not pass --revision too")
  with pytest.raises(ValueError, match="invalid repo id 'bad'"):
    push.preflight("bad")
  real_import = push.importlib.import_module

  def without(name):
    if name in ("datasets", "pyarrow"):
      raise ImportError(name)
    return real_import(name)
  monkeypatch.setattr(push.importlib, "import_module", without)
  assert _preflight_error(repo_id="o/x") == (
      "--push builds and publishes the dataset, which needs datasets, pyarrow: install them "
      "(pip install -e \".[hub]\"), or measure here with --measure-only and build and push "
      "elsewhere")
  assert push.HUB_PACKAGES == ("datasets", "huggingface_hub", "pyarrow")
  monkeypatch.setattr(push.importlib, "import_module", real_import)
  assert _preflight_error(repo_id=None, hardware=None) == (
      "--push without --repo-id names the repo after the GPU (pallasbench-robust-gpu-"
      "<hardware>), which is not known before measuring: pass --repo-id ORG/NAME")
  assert [c[0] for c in hub.calls] == ["whoami"]
  hub.who = {"name": "-bad-", "orgs": []}
  with pytest.raises(ValueError, match="invalid repo id '-bad-/pallasbench-robust-gpu-h200'"):
    push.preflight(None, hardware="h200")


def test_preflight_without_a_token(hub, monkeypatch):
  import huggingface_hub  # pylint: disable=import-outside-toplevel
  monkeypatch.delenv("HF_TOKEN")
  monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
  with pytest.raises(push.PreflightError) as info:
    push.preflight("o/x")
  assert str(info.value) == ("--push cannot work: no Hugging Face token: run `hf auth login` (a "
                             "token with write access) or export HF_TOKEN=hf_... before the "
                             "command (from Python, pass push_folder(..., token=...))")
  assert info.value.__cause__ is None and info.value.__suppress_context__
  assert hub.calls == []


def test_preflight_names_what_the_hub_refused(hub):
  hub.fail["whoami"] = _http_error(401, "/api/whoami-v2", "Invalid token")
  assert _preflight_error(repo_id="o/x") == (
      "--push cannot work: checking the Hub token failed for o/x: the Hub rejected the token: "
      "run `hf auth login` or set HF_TOKEN to a valid token. Server said: Invalid token")
  assert _preflight_error(repo_id=None, hardware="h200").startswith(
      "--push cannot work: checking the Hub token failed for your account: the Hub rejected")
  del hub.fail["whoami"]
  hub.who["auth"] = {"accessToken": {"role": "read"}}
  assert _preflight_error(repo_id="o/x") == (
      "--push cannot work: the token of 'me' is read-only: create one with write access "
      "(https://huggingface.co/settings/tokens), then `hf auth login` or set HF_TOKEN")
  hub.who.pop("auth")
  hub.fail["auth_check"] = _http_error(403, "/api/datasets/o/x/auth-check", None)
  assert _preflight_error(repo_id="o/x") == (
      "--push cannot work: checking write access failed for o/x: the token has no write "
      "permission on o/x: use a token with write access to this repo or its organisation. "
      "Server said: 403 Error")


def test_preflight_for_a_repo_that_does_not_exist_yet(hub):
  from huggingface_hub.errors import (  # pylint: disable=import-outside-toplevel
      RepositoryNotFoundError)
  hub.fail["auth_check"] = _http_error(404, "/api/datasets/x/auth-check",
                                       cls=RepositoryNotFoundError)
  for repo_id in ("me/new", "team/new"):
    assert push.preflight(repo_id) == repo_id
  assert _preflight_error(repo_id="fans/new") == (
      "--push cannot work: fans/new does not exist, and 'me' has only the read role in 'fans': "
      "ask for the write role, or use another namespace")
  assert _preflight_error(repo_id="other/new") == (
      "--push cannot work: other/new does not exist, and 'me' cannot create it: 'other' is "
      "neither the token's user nor one of its organisations (fans, team); check the repo id, "
      "or create the repo first")
  hub.who = {"name": "me", "orgs": None}
  assert _preflight_error(repo_id="other/new").endswith(
      "neither the token's user nor one of its organisations (none); check the repo id, or "
      "create the repo first")
  hub.who = {"name": "me", "orgs": [{"roleInOrg": "admin"}]}
  assert "organisations (none)" in _preflight_error(repo_id="other/new")


def test_token_owner_asks_the_hub(hub):
  assert push.token_owner("hf_x") == "me" and hub.apis == ["hf_x"]
  hub.fail["whoami"] = _dropped(httpx2.ConnectError, "/api/whoami-v2")
  with pytest.raises(push.PushError) as info:
    push.token_owner()
  assert str(info.value) == ("asking the Hub who the token belongs to failed for your account: "
                             "cannot reach the Hub (timed out)")


@pytest.mark.parametrize("status, advice", [
    (401, "the Hub rejected the token: run `hf auth login` or set HF_TOKEN to a valid token"),
    (403, "the token has no write permission on o/x: use a token with write access to this "
          "repo or its organisation"),
    (404, "o/x or the revision was not found (a repo the token cannot see looks the same): "
          "check the repo id and revision"),
    (409, "a conflicting change exists (repo, branch or tag already there, or a concurrent "
          "push): check the refs and retry"),
    (412, "someone else pushed to the branch while this push ran (it moved past the commit the "
          "remote files were listed from); push again"),
    (413, "the upload is too large for the Hub"),
    (418, "the Hub refused the request (HTTP 418)"),
    (None, "the Hub refused the request (HTTP None)"),
])
def test_advice_for_each_refusal(status, advice):
  assert push._advice(status, "o/x", "; note") == advice + "; note"


def _hub_error(error, **kwargs):
  with pytest.raises(push.PushError) as info:
    with push._hub_errors("org/x", "the commit", **kwargs):
      raise error
  assert info.value.__cause__ is error
  return str(info.value)


def test_hub_errors_say_what_happened():
  assert _hub_error(_http_error(409)) == (
      "the commit failed for org/x: a conflicting change exists (repo, branch or tag already "
      "there, or a concurrent push): check the refs and retry; nothing was committed. Server "
      "said: refused")
  assert _hub_error(_http_error(413, server_message=None), note="!") == (
      "the commit failed for org/x: the upload is too large for the Hub!. Server said: 413 Error")
  assert _hub_error(_dropped(httpx2.ConnectError)) == (
      "the commit failed for org/x: cannot reach the Hub (timed out); nothing was committed")
  assert _hub_error(ConnectionRefusedError(111, "Connection refused")) == (
      "the commit failed for org/x: cannot reach the Hub ([Errno 111] Connection refused); "
      "nothing was committed")
  assert _hub_error(TimeoutError("slow"), note="") == (
      "the commit failed for org/x: cannot reach the Hub (slow)")
  assert _hub_error(OSError("no filename")) == (
      "the commit failed for org/x: cannot reach the Hub (no filename); nothing was committed")
  assert _hub_error(PermissionError(13, "Permission denied", "/data/README.md")) == (
      "the commit failed for org/x: cannot read /data/README.md (Permission denied); nothing "
      "was committed")
  with push._hub_errors("org/x", "x"):
    pass
  with pytest.raises(KeyError):
    with push._hub_errors("org/x", "x"):
      raise KeyError("not the Hub's")


def test_hub_errors_of_a_commit_that_may_have_landed():
  check = {"check": "https://hub.test/datasets/org/x/commits/main"}
  assert _hub_error(_http_error(502, server_message="Bad gateway"), **check) == (
      "the commit failed for org/x with an unknown outcome (HTTP 502: Bad gateway): it may have "
      "landed. Check https://hub.test/datasets/org/x/commits/main before pushing again; a push "
      "of the same folder on top of it makes no new commit")
  assert _hub_error(_dropped(httpx2.RemoteProtocolError), **check) == (
      "the commit failed for org/x with an unknown outcome (the connection failed after the "
      "request was sent: RemoteProtocolError: timed out): it may have landed. Check "
      "https://hub.test/datasets/org/x/commits/main before pushing again; a push of the same "
      "folder on top of it makes no new commit")
  # not the request that changes the repo, or one that was never sent: nothing landed
  assert _hub_error(_http_error(500, "/api/datasets/org/x/preupload/main"), **check).endswith(
      "the Hub refused the request (HTTP 500); nothing was committed. Server said: refused")
  assert _hub_error(_dropped(httpx2.ConnectTimeout), **check).endswith(
      "cannot reach the Hub (timed out); nothing was committed")
  assert "unknown outcome" in _hub_error(_http_error(500, "/api/datasets/org/x/tag/c1"),
                                         changes="/tag/", **check)
  assert "unknown outcome" not in _hub_error(_http_error(500, "/api/datasets/org/x/tag/c1"),
                                             **check)


@pytest.mark.parametrize("error, landed", [
    (_http_error(500), True), (_http_error(503), True), (_http_error(499), False),
    (_http_error(500, "/api/datasets/org/x/preupload/main"), False),
    (_dropped(httpx2.ReadTimeout), True), (_dropped(httpx2.RemoteProtocolError), True),
    (_dropped(httpx2.WriteError), True),
    (_dropped(httpx2.ConnectError), False), (_dropped(httpx2.ConnectTimeout), False),
    (_dropped(httpx2.PoolTimeout), False), (_dropped(httpx2.ProxyError), False),
    (_dropped(httpx2.LocalProtocolError), False),
    (_dropped(httpx2.ReadTimeout, "/api/datasets/org/x/lfs"), False),
    (httpx2.ReadTimeout("no request"), True), (httpx2.ConnectError("no request"), False),
    (OSError("no response"), False),
])
def test_may_have_landed(error, landed):
  assert push._may_have_landed(error, "/commit/") is landed


def test_request_path_and_what_failed():
  assert push._request_path(_http_error(500)) == "/api/datasets/org/x/commit/main"
  assert push._request_path(_dropped()) == "/api/datasets/org/x/commit/main"
  assert push._request_path(httpx2.ReadTimeout("x")) == ""
  assert push._request_path(OSError("x")) == ""
  assert push._what(_http_error(500, server_message=None)) == "HTTP 500: 500 Error"
  assert push._what(_dropped()) == (
      "the connection failed after the request was sent: ReadTimeout: timed out")

  class Refused(Exception):  # an HTTP error that carries no server message
    response = types.SimpleNamespace(status_code=503)
  assert push._what(Refused("busy")) == "HTTP 503: busy"


def test_local_files_and_description(tmp_path):
  for path in ("README.md", "default/level_1.parquet", ".cache/x", "a/.hidden", ".gitattributes",
               "results/r1/manifest.json", "results/r0/manifest.json"):
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text("{}")
  (tmp_path / "empty").mkdir()
  env = {"device_kind": "NVIDIA H200", "driver": "580", "cuda": "13.0", "jax": "0.11.2"}
  (tmp_path / "results/r1/manifest.json").write_text(json.dumps(
      {"environment": env, "git_commit": "abc", "started_at": "s1", "finished_at": "f1"}))
  assert push._local_files(tmp_path) == [
      "README.md", "default/level_1.parquet", "results/r0/manifest.json",
      "results/r1/manifest.json"]
  assert push._description(tmp_path) == (
      "Built by builder.build.\n\n"
      "r0: None, driver None, CUDA None, jax None, commit None, None .. None\n"
      "r1: NVIDIA H200, driver 580, CUDA 13.0, jax 0.11.2, commit abc, s1 .. f1")
  assert push._description(tmp_path / "empty") == "Built by builder.build.\n\n"


def _pushed(hub, folder_, monkeypatch, **kwargs):
  monkeypatch.setattr(push, "validate_folder", lambda f: {"default": {"level_1": 2, "level_2": 1},
                                                          "runs": {"train": 6}})
  return push.push_folder(folder_, "org/x", **kwargs)


def test_push_folder_is_one_commit(hub, built_folder, caplog):
  hub.remote = ["README.md", ".gitattributes", "old/stale.parquet", "default/x.parquet"]
  with caplog.at_level(logging.INFO, logger=push.__name__):
    result = push.push_folder(str(built_folder), "org/x", private=True)
  files = push._local_files(built_folder)
  assert hub.apis == ["hf_env"]
  assert hub.calls == [
      ("create_repo", ("org/x",), {"repo_type": "dataset", "private": True, "exist_ok": True}),
      ("repo_info", ("org/x",), {"repo_type": "dataset", "revision": "main"}),
      ("list_repo_files", ("org/x",), {"repo_type": "dataset", "revision": "head0"}),
      ("create_commit", ("org/x", [("CommitOperationDelete", "default/x.parquet"),
                                   ("CommitOperationDelete", "old/stale.parquet")]
                         + [("CommitOperationAdd", f) for f in files]),
       {"commit_message": "Regenerate PallasBench-Robust (4 tasks)",
        "commit_description": push._description(built_folder),
        "repo_type": "dataset", "revision": "main", "create_pr": False,
        "parent_commit": "head0"})]
  assert result == push.PushResult(
      repo_id="org/x", revision="main", commit_oid="c1", commit_url="https://hub.test/c1",
      pr_url=None, tag=None, uploaded=tuple(files),
      deleted=("default/x.parquet", "old/stale.parquet"),
      rows={"default": {"level_1": 2, "level_2": 1, "level_3": 1}, "runs": {"train": 8},
            "artifacts": {"train": 8}, "sft": {"train": 6}, "preference": {"train": 3, "test": 1}})
  assert result.describe() == (f"pushed to org/x@main: commit c1 ({len(files)} files, 2 stale "
                               "files deleted)\n  https://hub.test/c1")
  assert [r.getMessage() for r in caplog.records if r.name == push.__name__] == [
      f"pushed {built_folder} to https://hub.test/c1 (main)"]


def test_push_folder_paths_of_the_operations(hub, tmp_path, monkeypatch):
  import huggingface_hub  # pylint: disable=import-outside-toplevel
  (tmp_path / "README.md").write_text("card")
  operations = []
  real_commit = _Api.create_commit

  def keep(self, repo_id, ops, **kwargs):
    operations.extend(ops)
    return real_commit(self, repo_id, ops, **kwargs)
  monkeypatch.setattr(_Api, "create_commit", keep)
  _pushed(hub, tmp_path, monkeypatch)
  (add,) = operations
  assert isinstance(add, huggingface_hub.CommitOperationAdd)
  assert (add.path_in_repo, add.path_or_fileobj) == ("README.md", str(tmp_path / "README.md"))


def test_push_folder_to_a_branch_or_a_pull_request_with_a_tag(hub, tmp_path, monkeypatch):
  (tmp_path / "README.md").write_text("card")
  result = _pushed(hub, tmp_path, monkeypatch, revision="dev", tag="v2", commit_message="msg",
                   token="hf_given")
  assert hub.apis == ["hf_given"]
  names = [c[0] for c in hub.calls]
  assert names == ["create_repo", "create_branch", "repo_info", "list_repo_files",
                   "create_commit", "list_repo_refs", "create_tag"]
  assert hub.calls[1] == ("create_branch", ("org/x",), {"branch": "dev", "repo_type": "dataset",
                                                        "exist_ok": True})
  assert hub.calls[2][2]["revision"] == "dev" and hub.calls[4][2]["revision"] == "dev"
  assert hub.calls[4][2]["commit_message"] == "msg"
  assert hub.calls[5] == ("list_repo_refs", ("org/x",), {"repo_type": "dataset"})
  assert hub.calls[6] == ("create_tag", ("org/x",), {"tag": "v2", "revision": "c1",
                                                     "repo_type": "dataset", "tag_message": "msg"})
  assert result.describe() == ("pushed to org/x@dev: commit c1, tagged v2 (1 files, 0 stale "
                               "files deleted)\n  https://hub.test/c1")
  hub.calls.clear()
  result = _pushed(hub, tmp_path, monkeypatch, create_pr=True, tag="v3")
  assert [c[0] for c in hub.calls] == ["create_repo", "repo_info", "list_repo_files",
                                       "create_commit", "list_repo_refs", "create_tag"]
  assert hub.calls[3][2]["create_pr"] is True and hub.calls[3][2]["commit_message"] == (
      "Regenerate PallasBench-Robust (3 tasks)")
  assert hub.calls[5][2]["tag_message"] == "PallasBench-Robust v3"
  assert (result.revision, result.pr_url, result.tag) == ("main", "https://hub.test/pr/1", "v3")
  assert result.describe().startswith("pushed to https://hub.test/pr/1: commit c1, tagged v3 ")
  hub.calls.clear()
  hub.tags = {"v3": "c1", "v1": "c0"}  # an unchanged re-push: the tag is already there
  _pushed(hub, tmp_path, monkeypatch, tag="v3")
  assert [c[0] for c in hub.calls][-1] == "list_repo_refs"
  hub.calls.clear()
  _pushed(hub, tmp_path, monkeypatch, tag="v1")
  assert hub.calls[-1][2]["tag"] == "v1" and hub.calls[-1][2]["revision"] == "c1"


def test_push_folder_refusals_and_failures(hub, tmp_path, monkeypatch):
  (tmp_path / "README.md").write_text("card")
  with pytest.raises(ValueError) as info:
    _pushed(hub, tmp_path, monkeypatch, revision="dev", create_pr=True)
  assert str(info.value) == ("create_pr opens a pull request against main; do not pass a "
                             "revision too")
  _pushed(hub, tmp_path, monkeypatch, revision="main", create_pr=True)
  with pytest.raises(ValueError, match="invalid repo id"):
    push.push_folder(tmp_path, "bad")
  assert [c[0] for c in hub.calls].count("create_commit") == 1
  hub.fail["create_commit"] = _http_error(500, server_message="oops")
  for kwargs, page in (({}, "https://hub.test/datasets/org/x/commits/main"),
                       ({"revision": "dev"}, "https://hub.test/datasets/org/x/commits/dev"),
                       ({"create_pr": True},
                        "https://hub.test/datasets/org/x/discussions (pull requests)")):
    with pytest.raises(push.PushError) as info:
      _pushed(hub, tmp_path, monkeypatch, **kwargs)
    assert str(info.value) == (
        f"the commit failed for org/x with an unknown outcome (HTTP 500: oops): it may have "
        f"landed. Check {page} before pushing again; a push of the same folder on top of it "
        "makes no new commit")
  hub.fail = {"create_repo": _http_error(403, "/api/repos/create")}
  with pytest.raises(push.PushError) as info:
    _pushed(hub, tmp_path, monkeypatch)
  assert str(info.value).startswith("creating the repo failed for org/x: the token has no write "
                                    "permission on org/x")
  assert str(info.value).endswith("; nothing was committed. Server said: refused")
  hub.fail = {"create_tag": _http_error(409, "/api/datasets/org/x/tag/c1")}
  with pytest.raises(push.PushError) as info:
    _pushed(hub, tmp_path, monkeypatch, tag="v2")
  assert str(info.value) == (
      "tagging commit c1 as 'v2' (the commit itself succeeded) failed for org/x: a conflicting "
      "change exists (repo, branch or tag already there, or a concurrent push): check the refs "
      "and retry. Server said: refused")
  hub.fail = {"create_tag": _http_error(504, "/api/datasets/org/x/tag/c1", "timeout")}
  with pytest.raises(push.PushError) as info:
    _pushed(hub, tmp_path, monkeypatch, tag="v2")
  assert str(info.value) == (
      "tagging commit c1 as 'v2' (the commit itself succeeded) failed for org/x with an unknown "
      "outcome (HTTP 504: timeout): it may have landed. Check the repo's tags "
      "(HfApi().list_repo_refs('org/x', repo_type='dataset')) before pushing again; a push of "
      "the same folder on top of it makes no new commit")

# ---------------------------------------------------------------------------------------------
# regenerate: the command line, without measuring (run_suite, the build and the push stood in)


@pytest.fixture
def measured(monkeypatch, tmp_path):
  """regenerate with run_suite, git, the machine's plan and the clock stood in; returns what
  they got."""
  seen = types.SimpleNamespace(runs=[], plans=[])

  def run_suite(items, run_dir, **kwargs):
    seen.runs.append((items, run_dir, kwargs))
    return run_dir
  monkeypatch.setattr(regenerate, "run_suite", run_suite)
  monkeypatch.setattr(regenerate, "git_commit", lambda: "c0ffee")
  monkeypatch.setattr(run_options, "default_memory_limit", lambda: 12345)
  monkeypatch.setattr(run_options, "default_plan",
                      lambda *args: seen.plans.append(args) or "plan")
  ticks = iter(range(0, 1000, 7))  # the clock: 7 s a reading
  monkeypatch.setattr(regenerate, "time", types.SimpleNamespace(
      strftime=time.strftime, gmtime=lambda: time.gmtime(86400 * 365 + 3661),
      monotonic=lambda: 100.0 + next(ticks)))
  monkeypatch.chdir(tmp_path)
  return seen


def _measure(argv, device="cpu"):
  args = regenerate.build_parser().parse_args(argv)
  return regenerate._measure(args, device, argv)


def test_regenerate_hardware_and_preflight(monkeypatch):
  monkeypatch.setattr(regenerate, "gpu_name", lambda: "NVIDIA H200")
  assert regenerate._hardware("cpu") == "cpu"
  assert regenerate._hardware("gpu") == "h200"
  monkeypatch.setattr(regenerate, "gpu_name", lambda: None)
  assert regenerate._hardware("gpu") is None
  parse = regenerate.build_parser().parse_args
  assert regenerate._preflight(parse(["--repo-id", "o/r"]), "h200") == "o/r"
  calls = []
  monkeypatch.setattr(push, "preflight", lambda *a, **kw: calls.append((a, kw)) or "me/x")
  assert regenerate._preflight(parse(["--push", "--revision", "dev", "--create-pr"]), "h200") == (
      "me/x")
  assert calls == [((None,), {"hardware": "h200", "revision": "dev", "create_pr": True})]
  with pytest.raises(ValueError) as info:
    regenerate._preflight(parse(["--push", "--measure-only"]), "h200")
  assert str(info.value) == "--push publishes a built folder: leave out --measure-only"


class _Built:
  def __init__(self, out):
    self.out = out

  def describe(self):
    return f"built {self.out}"

  def default_repo_id(self):
    return "me/default"




def test_regenerate_parser_defaults_and_types():
  parser = regenerate.build_parser()
  assert parser.prog == "python -m builder.regenerate"
  assert parser.description == ("Measure every kernel, build the dataset folder, and optionally "
                                "publish it.")
  assert parser.formatter_class is argparse.RawDescriptionHelpFormatter
  assert vars(parser.parse_args([])) == {
      "device": "auto", "sizes": None, "tasks": None, "levels": None, "variants": ["tpu", "gpu"],
      "precisions": ["float32"], "out": pathlib.Path("build/dataset"), "results": None,
      "resume": False, "new_run": False,
      "from_results": None, "candidates": (), "kernel_trees": None, "source": None,
      "measure_only": False, "memcheck": False,
      "headline_size": None, "allow_partial": False, "timeout": None, "compile_budget": None,
      "scheduler": None, "gpus": None, "cpu_workers": None, "compile_cache": None,
      "git_commit": None, "push": False, "repo_id": None, "revision": None, "create_pr": False,
      "tag": None}
  args = parser.parse_args([
      "--device", "gpu", "--sizes", "medium", "edge", "--tasks", "relu", "gelu", "--levels", "1",
      "3", "--variants", "gpu", "--out", "o", "--results", "r", "--resume", "--from-results",
      "a", "b", "--candidates", "p", "q", "--kernel-trees", "k", "--measure-only",
      "--headline-size", "large", "--allow-partial", "--timeout", "30", "--compile-budget",
      "7.5", "--scheduler", "tcp://h:1", "--gpus", "2", "--cpu-workers", "3", "--compile-cache",
      "cache", "--git-commit", "abc", "--push", "--repo-id", "o/r", "--revision", "dev",
      "--create-pr", "--tag", "v2"])
  assert vars(args) == {
      "device": "gpu", "sizes": ["medium", "edge"], "tasks": ["relu", "gelu"], "levels": [1, 3],
      "variants": ["gpu"], "precisions": ["float32"], "out": pathlib.Path("o"),
      "results": pathlib.Path("r"), "resume": True,
      "new_run": False,
      "from_results": [pathlib.Path("a"), pathlib.Path("b")],
      "candidates": [pathlib.Path("p"), pathlib.Path("q")], "kernel_trees": pathlib.Path("k"),
      "source": None, "memcheck": False, "measure_only": True, "headline_size": "large", "allow_partial": True, "timeout": 30.0,
      "compile_budget": 7.5, "scheduler": "tcp://h:1", "gpus": 2, "cpu_workers": 3,
      "compile_cache": pathlib.Path("cache"), "git_commit": "abc", "push": True,
      "repo_id": "o/r", "revision": "dev", "create_pr": True, "tag": "v2"}
  for bad in (["--device", "tpu"], ["--sizes", "huge"], ["--levels", "4"], ["--levels", "x"],
              ["--headline-size", "huge"], ["--timeout", "x"], ["--gpus", "1.5"],
              ["--candidates"], ["--from-results"]):
    with pytest.raises(SystemExit):
      parser.parse_args(bad)
  assert [parser.parse_args(["--device", d]).device for d in ("auto", "gpu", "cpu")] == [
      "auto", "gpu", "cpu"]
  assert parser.parse_args(["--levels", "1", "2", "3"]).levels == [1, 2, 3]
  assert parser.parse_args(["--sizes", "small", "medium", "large", "edge"]).sizes == [
      "small", "medium", "large", "edge"]
  missing = [a.option_strings for a in parser._actions if a.option_strings and not a.help]
  assert missing == []
  assert {a.metavar for a in parser._actions if a.dest in (
      "from_results", "candidates", "kernel_trees")} == {"RUN", "DIR"}


def test_measure_plans_the_run_and_hands_it_to_the_suite(measured, caplog):
  with caplog.at_level(logging.INFO, logger="builder.regenerate"):
    run_dir = _measure(["--tasks", "gelu", "relu", "--variants", " gpu, tpu ,", "--out", "x/ds"])
  assert [r.getMessage() for r in caplog.records if r.name == "builder.regenerate"] == [
      "4 evaluations planned (2 tasks x ('small',) x ['gpu', 'tpu'] x ['float32']) on cpu into "
      "x/ds.runs/cpu-19710101T010101Z"]
  assert run_dir == pathlib.Path("x/ds.runs/cpu-19710101T010101Z")
  ((items, got_dir, kwargs),) = measured.runs
  assert got_dir == run_dir
  assert [(i.task, i.variant, i.size) for i in items] == [
      ("gelu", "gpu", "small"), ("gelu", "tpu", "small"), ("relu", "gpu", "small"),
      ("relu", "tpu", "small")]
  assert items[0].options == dataclasses.replace(regenerate.default_options("cpu"), memcheck=False)
  assert kwargs == {
      "device": "cpu", "limits": Limits(timeout_s=900.0, memory_bytes=12345),
      "git_commit": "c0ffee",
      "command": "python -m builder.regenerate --tasks gelu relu --variants ' gpu, tpu ,' --out "
                 "x/ds",
      "cluster_options": ClusterOptions(plan="plan", scheduler=None, compile_budget_s=300.0,
                                        compile_cache=None),
      "resume": False}
  assert measured.plans == [("cpu", None, None)]


def test_measure_with_every_option_on_a_gpu(measured):
  _measure(["--levels", "3", "--sizes", "large", "--results", "r", "--resume", "--timeout", "20",
            "--compile-budget", "5", "--scheduler", "tcp://h:1", "--gpus", "2",
            "--cpu-workers", "4", "--compile-cache", "c", "--git-commit", "abc"], device="gpu")
  ((items, run_dir, kwargs),) = measured.runs
  level_3 = [s.name for s in regenerate.list_tasks(levels=(3,))]
  assert sorted({i.task for i in items}) == sorted(level_3) and {i.size for i in items} == {"large"}
  assert [i.variant for i in items[:2]] == ["tpu", "gpu"]
  assert items[0].options == dataclasses.replace(regenerate.default_options("gpu"), memcheck=False)
  assert run_dir == pathlib.Path("r")
  assert kwargs["limits"] == Limits(timeout_s=20.0, memory_bytes=12345)
  assert kwargs["cluster_options"] == ClusterOptions(
      plan="plan", scheduler="tcp://h:1", compile_budget_s=5.0, compile_cache=pathlib.Path("c"))
  assert (kwargs["git_commit"], kwargs["resume"], kwargs["device"]) == ("abc", True, "gpu")
  assert measured.plans == [("gpu", 2, 4)]
  _measure([], device="gpu")
  (items, run_dir, kwargs) = measured.runs[1]
  assert {i.size for i in items} == {"medium", "large"} and len(items) == 2 * 2 * len(TASKS)
  assert run_dir == pathlib.Path("build/dataset.runs/gpu-19710101T010101Z")
  assert kwargs["limits"].timeout_s == 300.0 and kwargs["cluster_options"].compile_budget_s == 60.0


@pytest.mark.parametrize("argv, message", [
    (["--variants", "gpu,candidate"], "argument --variants: invalid choice(s) ['candidate'] "
                                      "(choose from tpu, gpu, separated by spaces or commas)"),
    (["--variants", " , "], "argument --variants: expected at least one value"),
])
def test_the_parser_refuses_bad_variants(capsys, argv, message):
  with pytest.raises(SystemExit):
    regenerate.build_parser().parse_args(argv)
  assert capsys.readouterr().err.splitlines()[-1] == f"python -m builder.regenerate: error: {message}"


@pytest.mark.parametrize("argv, message", [
    (["--resume"], "--resume continues the run in --results: name that folder"),
    (["--tag", "v2", "--create-pr"], "--tag and --create-pr apply only to a push: add --push, or "
                                     "leave them out"),
])
def test_bad_combinations_are_refused_before_measuring(measured, argv, message):
  with pytest.raises(ValueError) as info:
    regenerate._check_arguments(regenerate.build_parser().parse_args(argv))
  assert str(info.value) == message and measured.runs == []


@pytest.fixture
def cli(monkeypatch, measured):
  """main() with the build and the push stood in; returns what they got."""
  seen = types.SimpleNamespace(builds=[], pushes=[], preflights=[], measured=measured, asked=[])

  def build_dataset(run_dirs, out, **kwargs):
    seen.builds.append((run_dirs, out, kwargs))
    return _Built(out)

  def push_folder(out, repo_id, **kwargs):
    seen.pushes.append((out, repo_id, kwargs))
    return types.SimpleNamespace(describe=lambda: f"pushed {repo_id}")
  monkeypatch.setattr(build, "build_dataset", build_dataset)
  monkeypatch.setattr(push, "push_folder", push_folder)
  monkeypatch.setattr(push, "preflight", lambda repo_id, **kw: seen.preflights.append(
      (repo_id, kw)) or (repo_id or f"me/{kw['hardware']}"))
  monkeypatch.setattr(build, "hardware_of",
                      lambda run_dirs: seen.asked.append(run_dirs) or "h200")
  monkeypatch.setattr(regenerate, "resolve_device",
                      lambda device: seen.asked.append(device) or "cpu")
  return seen


_NO_EXTRAS = {"candidate_runs": (), "kernel_trees": None, "source": None}


def test_main_builds_from_results(cli, capsys):
  assert regenerate.main(["--from-results", "a", "b", "--out", "o", "--headline-size", "large",
                          "--allow-partial", "--repo-id", "x/y"]) == 0
  assert cli.builds == [([pathlib.Path("a"), pathlib.Path("b")], pathlib.Path("o"), {
      "headline_size": "large", "repo_id": "x/y", "allow_partial": True, **_NO_EXTRAS})]
  out, err = capsys.readouterr()
  assert (out, err) == ("built o\n", "done in 7 s\n")  # two readings of the clock
  assert cli.pushes == [] and cli.preflights == [] and cli.measured.runs == []


def test_main_hands_population_runs_and_kernel_trees_to_the_build(cli, capsys, tmp_path):
  rf.write_tree(tmp_path / "k")
  assert regenerate.main(["--from-results", "a", "--candidates", "p", "q", "--kernel-trees",
                          "k"]) == 0
  ((_, _, kwargs),) = cli.builds
  assert kwargs["candidate_runs"] == [pathlib.Path("p"), pathlib.Path("q")]
  assert kwargs["kernel_trees"] == KernelTrees(tpu=pathlib.Path("k/kernels_tpu"),
                                               gpu=pathlib.Path("k/kernels_gpu"))
  capsys.readouterr()
  assert regenerate.main(["--from-results", "a", "--kernel-trees", "nowhere"]) == 2
  assert capsys.readouterr().err == (
      "error: no kernel tree at nowhere/kernels_tpu, nowhere/kernels_gpu: --kernel-trees takes "
      "a folder holding kernels_tpu/ and kernels_gpu/\n")
  assert len(cli.builds) == 1


def test_main_refuses_candidates_when_only_measuring(cli, capsys):
  assert regenerate.main(["--tasks", "relu", "--results", "r", "--measure-only", "--candidates",
                          "p"]) == 2
  assert capsys.readouterr().err == (
      "error: --candidates publishes population runs in the built folder: leave out "
      "--measure-only\n")
  assert cli.measured.runs == [] and cli.builds == []


def test_main_pushes_what_it_built(cli, capsys):
  assert regenerate.main(["--from-results", "a", "--push", "--tag", "v2", "--revision", "dev"]) == 0
  assert cli.preflights == [(None, {"hardware": "h200", "revision": "dev", "create_pr": False})]
  assert cli.asked == [[pathlib.Path("a")]]  # the runs name the hardware
  assert cli.builds[0][2]["repo_id"] == "me/h200"
  assert cli.pushes == [(pathlib.Path("build/dataset"), "me/h200", {
      "revision": "dev", "create_pr": False, "tag": "v2"})]
  assert capsys.readouterr().out == "built build/dataset\npushed me/h200\n"
  regenerate.main(["--from-results", "a", "--push", "--repo-id", "o/r", "--create-pr"])
  assert cli.preflights[-1] == ("o/r", {"hardware": None, "revision": None, "create_pr": True})
  assert cli.asked == [[pathlib.Path("a")]]  # a named repo needs no hardware
  assert cli.pushes[-1][1:] == ("o/r", {"revision": None, "create_pr": True, "tag": None})


def test_main_pushes_to_the_default_repo_when_the_preflight_names_none(cli, monkeypatch):
  monkeypatch.setattr(push, "preflight", lambda repo_id, **kw: None)
  regenerate.main(["--from-results", "a", "--push"])
  assert cli.pushes[0][1] == "me/default"


def test_main_measures_then_builds(cli, capsys, caplog):
  with caplog.at_level(logging.INFO, logger="builder.regenerate"):
    assert regenerate.main(["--device", "gpu", "--tasks", "relu", "--results", "r", "--out",
                            "o"]) == 0
  assert cli.asked == ["gpu"]
  assert [r.getMessage() for r in caplog.records][-1] == "measured in 7 s"
  assert capsys.readouterr().err == "done in 14 s\n"
  ((items, run_dir, kwargs),) = cli.measured.runs
  assert run_dir == pathlib.Path("r") and kwargs["device"] == "cpu"
  assert cli.builds == [([pathlib.Path("r")], pathlib.Path("o"), {
      "headline_size": None, "repo_id": None, "allow_partial": False, **_NO_EXTRAS})]
  assert regenerate.main(["--tasks", "relu", "--results", "r2", "--measure-only"]) == 0
  assert "done in" not in capsys.readouterr().err  # measuring only: no build to time
  assert len(cli.builds) == 1 and len(cli.measured.runs) == 2
  regenerate.main(["--tasks", "relu", "--results", "r3", "--push"])
  assert cli.preflights == [(None, {"hardware": "cpu", "revision": None, "create_pr": False})]
  assert cli.builds[-1][2]["repo_id"] == "me/cpu"
  capsys.readouterr()


@pytest.mark.parametrize("error, code, message", [
    (suite_module.Interrupted("stopped by SIGTERM", pathlib.Path("r")), 130,
     "interrupted (stopped by SIGTERM): the 0 evaluation(s) measured are kept in r; continue "
     "with: python -m builder.regenerate --tasks relu --resume --results r\n"),
    (ValueError("bad value"), 2, "error: bad value\n"),
    (KeyError("relu"), 2, "error: relu\n"),
    (RuntimeError("no cluster"), 2, "error: no cluster\n"),
    (OSError("disk"), 2, "error: disk\n"),
])
def test_main_turns_failures_into_an_exit_status(cli, capsys, monkeypatch, error, code, message):
  def fail(*args, **kwargs):
    raise error
  monkeypatch.setattr(regenerate, "run_suite", fail)
  monkeypatch.setattr(regenerate, "interpreter", lambda: "python")  # the hint's own test: test_interrupts
  assert regenerate.main(["--tasks", "relu", "--results", "r"]) == code
  out, err = capsys.readouterr()
  assert err == message and out == "" and cli.builds == []


def test_main_reads_sys_argv(cli, monkeypatch, capsys):
  monkeypatch.setattr(regenerate.sys, "argv", ["regenerate", "--from-results", "z"])
  assert regenerate.main() == 0
  assert cli.builds[0][0] == [pathlib.Path("z")]
  capsys.readouterr()


def test_main_logs_each_step_by_name(cli, monkeypatch, capsys):
  """Run as a program (no logging set up yet), the steps are logged at INFO as `name: text`."""
  root = logging.getLogger()
  monkeypatch.setattr(root, "handlers", [])
  monkeypatch.setattr(root, "level", logging.WARNING)
  regenerate.main(["--from-results", "a"])
  (handler,) = root.handlers
  assert root.level == logging.INFO and handler.formatter._fmt == "%(name)s: %(message)s"
  capsys.readouterr()

# ---------------------------------------------------------------------------------------------
# candidates: population runs read, checked and turned into the `candidates` config


def _candidate(name, task="relu", **fields):
  return Candidate(id=f"{task}/{name}", task=task, source=f"# {name}\n", **fields)


def _candidate_record(trees, c, **fields):
  return rf.record(trees, c.task, "candidate", "small", kernel_sha256=c.sha256, candidate=c.id,
                   **fields)


def _population_run(folder, trees, candidates, records=None, command="population evaluate"):
  """A population run folder as `population evaluate` writes it (one record per candidate)."""
  folder.mkdir(parents=True)
  (folder / "manifest.json").write_text(json.dumps({"command": command}))
  (folder / CANDIDATES).write_text(to_jsonl(candidates))
  records = [_candidate_record(trees, c) for c in candidates] if records is None else records
  _write_lines(folder / "records.jsonl", records)
  return folder


def test_read_population_joins_candidates_and_records(trees, tmp_path):
  a, b, c = _candidate("a", kind="tuning"), _candidate("b", "gelu"), _candidate("c")
  run = bc.read_population(_population_run(
      tmp_path / "pop", trees, [a, b, c], [_candidate_record(trees, b),
                                           _candidate_record(trees, a)], command="cmd x"))
  assert (run.name, run.path, run.command) == ("pop", tmp_path / "pop", "cmd x")
  assert run.candidates == (a, b, c)  # in the file's order
  assert list(run.records) == ["gelu/b", "relu/a"]  # in the records' order
  assert run.records["relu/a"] == _candidate_record(trees, a)
  assert run.missing == ["relu/c"]
  named = bc.read_population(str(tmp_path / "pop" / ".." / "pop"))  # a str, resolved for its name
  assert named.name == "pop" and named.path == pathlib.Path(str(tmp_path / "pop" / ".." / "pop"))


@pytest.mark.parametrize("absent", ["manifest.json", "records.jsonl", CANDIDATES])
def test_read_population_needs_its_three_files(trees, tmp_path, absent):
  folder = _population_run(tmp_path / "pop", trees, [_candidate("a")])
  (folder / absent).unlink()
  _raises(f"{folder / absent} is missing: a population run folder (written by python -m "
          "pallasbench_dataset.population evaluate) holds manifest.json, records.jsonl and "
          "candidates.jsonl", bc.read_population, folder)
  (folder / absent).mkdir()  # a folder of that name is not the file
  with pytest.raises(BuildError, match="is missing"):
    bc.read_population(folder)


@pytest.mark.parametrize("manifest, candidates, message", [
    ("{", None, "Expecting property name"),
    ("{}", None, "'command'"),
    ("[]", None, "list indices"),
    (None, '{"task": "relu"}\n', "source"),
])
def test_read_population_refuses_unreadable_runs(trees, tmp_path, manifest, candidates, message):
  folder = _population_run(tmp_path / "pop", trees, [_candidate("a")])
  if manifest is not None:
    (folder / "manifest.json").write_text(manifest)
  if candidates is not None:
    (folder / CANDIDATES).write_text(candidates)
  with pytest.raises(BuildError) as info:
    bc.read_population(folder)
  assert str(info.value).startswith(f"{folder} is not a readable population run: ")
  assert message in str(info.value)


def test_read_population_checks_each_record(trees, tmp_path):
  a, g = _candidate("a"), _candidate("g", "gelu")
  good = _candidate_record(trees, a)
  where = lambda i: tmp_path / f"pop-{i}" / "records.jsonl"  # noqa: E731
  cases = [
      (dataclasses.replace(good, variant="gpu"), lambda w: (
          f"{w}: candidate 'relu/a' (variant 'gpu') is not one of the run's candidates.jsonl; "
          "suite runs go to --from-results")),
      (dataclasses.replace(good, candidate="relu/z"), lambda w: (
          f"{w}: candidate 'relu/z' (variant 'candidate') is not one of the run's "
          "candidates.jsonl; suite runs go to --from-results")),
      (dataclasses.replace(good, candidate="gelu/g"), lambda w: (
          f"{w}: candidate 'gelu/g' is a record of task 'relu', the candidate is for 'gelu'")),
      (dataclasses.replace(good, kernel_sha256="0" * 64), lambda w: (
          f"{w}: candidate 'relu/a': the record's kernel_sha256 is not the sha256 of the "
          "candidate's source in candidates.jsonl; the files do not belong together")),
      (dataclasses.replace(good, task_id=99), lambda w: (
          f"{w}: record 'relu' says task_id 99, level 1; the registry says 1, 1")),
      (dataclasses.replace(good, speedup=5.0), lambda w: (
          f"{w}: relu/candidate/small speedup 5.0 is not baseline_ms / runtime_ms = 2.0; fix the "
          "evaluator")),
  ]
  for i, (record, message) in enumerate(cases):
    folder = _population_run(tmp_path / f"pop-{i}", trees, [a, g], [record])
    _raises(message(where(i)), bc.read_population, folder)
  folder = _population_run(tmp_path / "twice", trees, [a], [good, good])
  _raises(f"{folder / 'records.jsonl'}: candidate 'relu/a' has two records; remove the stale "
          "line", bc.read_population, folder)


def test_read_population_refuses_a_task_outside_the_registry(trees, tmp_path, monkeypatch):
  a = _candidate("a")
  record = _candidate_record(trees, a)
  folder = _population_run(tmp_path / "pop", trees, [a], [record])
  monkeypatch.setattr(bc, "TASKS", {k: v for k, v in TASKS.items() if k != "relu"})
  with pytest.raises(BuildError) as info:
    bc.read_population(folder)
  assert str(info.value) == (f"{folder / 'records.jsonl'}: candidate 'relu/a' is a record of "
                             "task 'relu', the candidate is for 'relu'")


def _population(name, ids, judged):
  return bc.PopulationRun(name=name, path=pathlib.Path(name), command="c",
                          candidates=tuple(_candidate(i) for i in ids),
                          records={f"relu/{i}": None for i in judged})


def test_check_complete_names_what_was_not_judged():
  done = _population("done", "ab", "ab")
  bc.check_complete([done], allow_partial=False)
  bc.check_complete([], allow_partial=False)
  part = _population("p", "abc", "b")
  _raises("2 candidate(s) have no record (p: relu/a, p: relu/c). Finish the run (population "
          "evaluate --resume --out RUN) or build with --allow-partial (their rows are left out "
          "and the card counts them)", bc.check_complete, [done, part], allow_partial=False)
  bc.check_complete([done, part], allow_partial=True)
  ten = _population("t", "0123456789", "")
  with pytest.raises(BuildError) as info:
    bc.check_complete([ten], allow_partial=False)
  assert str(info.value).startswith(
      "10 candidate(s) have no record (t: relu/0, t: relu/1, t: relu/2, t: relu/3, t: relu/4 "
      "and 5 more). Finish")
  with pytest.raises(BuildError) as info:
    bc.check_complete([ten, part], allow_partial=False)
  assert str(info.value).startswith(
      "12 candidate(s) have no record (t: relu/0, t: relu/1, t: relu/2, t: relu/3, t: relu/4 "
      "and 7 more). Finish")


def test_candidate_rows_carry_the_candidate_and_its_verdict_in_order(trees, tmp_path):
  a = _candidate("a", parent="kernels_gpu/relu.py", kind="tuning")
  g = _candidate("g", "gelu", kind="cheat")
  z = _candidate("z")
  failed = _candidate_record(
      trees, g, status=Status.ERROR, correct=False, runtime_ms=None, baseline_ms=None,
      error="boom", error_type=ErrorType.RUNTIME, reasons=("r1",), cached=True, device="cpu",
      comparable=False, eager_ms=None)
  second = bc.read_population(_population_run(tmp_path / "b", trees, [z, g], [
      _candidate_record(trees, z), failed]))
  first = bc.read_population(_population_run(tmp_path / "a", trees, [a, z], [
      _candidate_record(trees, a, eager_ms=1.5, shipped_ms=0.75, speedup_shipped=1.5)]))
  rows_ = bc.candidate_rows([second, first])
  assert [(r.task_id, r.run, r.candidate) for r in rows_] == [
      (1, "a", "relu/a"), (1, "b", "relu/z"), (2, "b", "gelu/g")]
  row = rows_[0]
  record = first.records["relu/a"]
  assert row == schema.CandidateRow(
      candidate="relu/a", run="a", task="relu", task_id=1, level=1, size="small",
      parent="kernels_gpu/relu.py", kind="tuning", source="# a\n", kernel_sha256=a.sha256,
      status="pass", correct=True, speedup=2.0, speedup_eager=3.0, speedup_shipped=1.5,
      runtime_ms=0.5, baseline_ms=1.0, shipped_ms=0.75, reasons=(), error_type=None, error=None,
      cached=False, device="gpu",
      hardware="NVIDIA H200", timing_comparable=True, judge_version=record.judge_version,
      measured_at="2026-11-20T10:00:00+00:00")
  bad = rows_[2]
  assert (bad.speedup_shipped, bad.shipped_ms, rows_[1].speedup_shipped) == (None, None, None)
  assert (bad.status, bad.correct, bad.speedup, bad.runtime_ms, bad.error_type, bad.error,
          bad.reasons, bad.cached, bad.device, bad.timing_comparable, bad.kind, bad.parent) == (
      "error", False, None, None, "runtime_error", "boom", ("r1",), True, "cpu", False, "cheat", None)
  assert bc.candidate_rows([]) == ()


def _candidate_row(name, *, kind=None, status="pass", speedup=1.0, run="r", cached=False,
                   comparable=True):
  return schema.CandidateRow(
      candidate=f"relu/{name}", run=run, task="relu", task_id=1, level=1, size="small",
      parent=None, kind=kind, source="x", kernel_sha256="0" * 64, status=status,
      correct=status == "pass", speedup=speedup if status == "pass" else None,
      speedup_eager=None, speedup_shipped=None,
      runtime_ms=0.5 / speedup if status == "pass" else None, baseline_ms=0.5, shipped_ms=None,
      reasons=(), error_type=None, error=None, cached=cached, device="gpu",
      hardware="NVIDIA H200", timing_comparable=comparable, judge_version="2",
      measured_at="2026-11-20T10:00:00+00:00")


def test_candidates_stats_count_by_kind_and_list_the_fastest():
  assert sections.candidates.candidates_stats([], []) is None
  populations = [_population("p1", "abcx", "abc"), dataclasses.replace(
      _population("p2", "d", "d"), command="evaluate --out p2")]
  rows_ = [_candidate_row("t1", kind="tuning", speedup=1.5, cached=True),
           _candidate_row("t2", kind="tuning", status="incorrect"),
           _candidate_row("c1", kind="cheat", speedup=3.0),
           _candidate_row("c2", kind="cheat", status="rejected"),
           _candidate_row("c0", kind="cheat", speedup=3.0, run="q"),
           _candidate_row("u", speedup=0.25, cached=True),
           _candidate_row("b", kind="broken", status="timeout")]
  got = sections.candidates.candidates_stats(populations, rows_)
  assert got == {
      "n": 7, "n_runs": 2, "n_cached": 2, "n_missing": 1, "n_cheats": 3,
      "cheats_passed": "`relu/c1`, `relu/c0`",
      "by_kind": "| kind | pass | incorrect | rejected | timeout | total |\n"
                 "|---|---|---|---|---|---|\n"
                 "| broken | 0 | 0 | 0 | 1 | 1 |\n"
                 "| cheat | 2 | 0 | 1 | 0 | 3 |\n"
                 "| tuning | 1 | 1 | 0 | 0 | 2 |\n"
                 "| unknown | 1 | 0 | 0 | 0 | 1 |",
      "best": "| candidate | run | task | kind | speedup | runtime_ms |\n"
              "|---|---|---|---|---|---|\n"
              "| relu/c0 | q | relu | cheat | 3.000 | 0.1667 |\n"
              "| relu/c1 | r | relu | cheat | 3.000 | 0.1667 |\n"
              "| relu/t1 | r | relu | tuning | 1.500 | 0.3333 |\n"
              "| relu/u | r | relu | – | 0.250 | 2 |",
      "comparable": True,
      "commands": [("`p1`", "`c`"), ("`p2`", "`evaluate --out p2`")]}
  many = [_candidate_row(f"{i:02d}", speedup=1 + i, run=f"r{i % 2}") for i in range(12)]
  best = sections.candidates.candidates_stats(populations, many)["best"].splitlines()[2:]
  assert [line.split(" | ")[0] for line in best] == [f"| relu/{i:02d}" for i in range(11, 1, -1)]
  cpu = sections.candidates.candidates_stats(
      populations, [*rows_, _candidate_row("z", comparable=False)])
  assert cpu["comparable"] is False and cpu["cheats_passed"] == "`relu/c1`, `relu/c0`"
  honest = sections.candidates.candidates_stats(populations, rows_[:2])
  assert (honest["n_cheats"], honest["cheats_passed"]) == (0, "none")


def test_candidates_stats_of_runs_that_judged_nothing():
  got = sections.candidates.candidates_stats([_population("p", "ab", "")], [])
  assert got == {"n": 0, "n_runs": 1, "n_cached": 0, "n_missing": 2, "n_cheats": 0,
                 "cheats_passed": "none", "by_kind": "(none)", "best": "(none)",
                 "comparable": True, "commands": [("`p`", "`c`")]}


def test_candidates_plot(figures):
  rows_ = [_candidate_row("t1", kind="tuning"), _candidate_row("t2", kind="tuning",
                                                                   status="incorrect"),
           _candidate_row("u"), _candidate_row("c", kind="cheat", status="rejected"),
           _candidate_row("c2", kind="cheat", status="timeout")]
  assert plots.candidates_png(rows_) == b"png"
  (fig,) = figures
  assert tuple(fig.get_size_inches()) == (8.0, pytest.approx(0.5 * 3 + 1.6))
  (ax,) = fig.axes
  assert ax.get_title() == "Verdicts on the population's candidates, by kind"
  assert ax.title.get_fontsize() == 9 and ax.get_xlabel() == "candidates"
  assert ax.yaxis_inverted()
  assert [t.get_text() for t in ax.get_yticklabels()] == ["cheat", "tuning", "unknown"]
  bars = [(b.get_y() + b.get_height() / 2, b.get_x(), b.get_width(), b.get_facecolor())
          for b in ax.patches]
  green, orange = mcolors.to_rgba("tab:green"), mcolors.to_rgba("tab:orange")
  red, purple = mcolors.to_rgba("tab:red"), mcolors.to_rgba("tab:purple")
  assert bars == [  # per status (those that occur), one bar per kind, stacked left to right
      (0, 0, 0, green), (1, 0, 1, green), (2, 0, 1, green),
      (0, 0, 0, orange), (1, 1, 1, orange), (2, 1, 0, orange),
      (0, 0, 1, red), (1, 2, 0, red), (2, 1, 0, red),
      (0, 1, 1, purple), (1, 2, 0, purple), (2, 1, 0, purple)]
  legend = ax.get_legend()
  assert [t.get_text() for t in legend.get_texts()] == ["pass", "incorrect", "rejected", "timeout"]
  assert {t.get_fontsize() for t in legend.get_texts()} == {7}
  assert legend._loc == 2  # upper left, outside the axes on the right
  plots.candidates_png([])
  (ax,) = figures[1].axes
  assert ax.get_title() == "Verdicts on the population's candidates, by kind"
  assert [t.get_text() for t in ax.texts] == ["no candidate was judged"]


def test_build_with_population_runs(trees, tmp_path):
  """The `candidates` config, its plot, card section and published run folders; the suite's
  configs are those of a build without them."""
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  a, b = _candidate("a", kind="tuning"), _candidate("b", kind="cheat")
  pop = _population_run(tmp_path / "pop", trees, [a, b], [_candidate_record(trees, a)],
                        command="population evaluate --out pop")
  with pytest.raises(BuildError, match=r"^1 candidate\(s\) have no record \(pop: relu/b\)"):
    build.build_dataset([run], tmp_path / "out", kernel_trees=trees, candidate_runs=[pop])
  summary = build.build_dataset([run], tmp_path / "out", kernel_trees=trees,
                                candidate_runs=[str(pop)], allow_partial=True, repo_id="o/pb")
  out = summary.out_dir
  assert summary.rows["candidates"] == {"train": 1}
  assert "candidates/train-00000-of-00001.parquet" in summary.files
  assert "plots/candidates.png" in summary.files
  judged = bc.candidate_rows([bc.read_population(pop)])  # the plot shows the judged candidates
  assert (out / "plots" / "candidates.png").read_bytes() == plots.candidates_png(judged)
  assert plots.candidates_png(judged) != plots.candidates_png([])
  assert sorted(p.name for p in (out / "results" / "pop").iterdir()) == [
      "candidates.jsonl", "manifest.json", "records.jsonl"]
  assert (out / "results" / "pop" / CANDIDATES).read_bytes() == (pop / CANDIDATES).read_bytes()
  table = pq.read_table(out / "candidates" / "train-00000-of-00001.parquet").to_pylist()
  assert [(r["candidate"], r["run"], r["kind"], r["speedup"]) for r in table] == [
      ("relu/a", "pop", "tuning", 2.0)]
  text = (out / "README.md").read_text()
  assert "## Candidates" in text and "1 candidate(s) of these runs were not judged" in text
  assert "- `pop`: `population evaluate --out pop`" in text
  assert 'candidates = load_dataset("o/pb", "candidates", split="train")' in text
  plain = build.build_dataset([run], tmp_path / "plain", kernel_trees=trees, repo_id="o/pb")
  assert "candidates" not in plain.rows and "plots/candidates.png" not in plain.files
  assert "## Candidates" not in (plain.out_dir / "README.md").read_text()
  for name in ("default/level_1-00000-of-00001.parquet", "runs/train-00000-of-00001.parquet"):
    assert (out / name).read_bytes() == (plain.out_dir / name).read_bytes()
  clash = _population_run(tmp_path / "other" / "run", trees, [a])
  _raises(f"run folders share a name (['run', 'run']); they are published as results/<name>/, "
          "so rename one", build.build_dataset, [run], tmp_path / "x", kernel_trees=trees,
          candidate_runs=[clash])
  inside = _population_run(tmp_path / "y" / "pop", trees, [a])
  _raises(f"out_dir {str(tmp_path / 'y')!r} holds the build's input {str(inside)!r}; choose "
          "another output folder", build.build_dataset, [run], tmp_path / "y",
          kernel_trees=trees, candidate_runs=[inside])

# ---------------------------------------------------------------------------------------------
# Ported from the first mutation pass (branch `mutation`), adapted to the merged builder:
# the build's arguments, its config rows, the out-dir and name checks, strict Parquet.


def test_build_refuses_no_runs_and_names_filesystem_faults(tmp_path, monkeypatch):
  _raises("no run folders given; pass at least one folder written by the evaluator",
          build.build_dataset, [], tmp_path / "out")

  def fail(error):
    def raiser(*args, **kwargs):
      raise error
    return raiser
  monkeypatch.setattr(build, "_build", fail(OSError(errno.EROFS, "Read-only file system",
                                                    "/x/y")))
  error = _raises(f"cannot build {str(tmp_path / 'out')!r}: Read-only file system (/x/y); nothing "
                  "was replaced. Free space or fix the permissions, or choose another --out",
                  build.build_dataset, [tmp_path], tmp_path / "out")
  assert isinstance(error.__cause__, OSError)
  monkeypatch.setattr(build, "_build", fail(OSError("disk gone")))
  _raises(f"cannot build {str(tmp_path / 'out')!r}: disk gone; nothing was replaced. Free "
          "space or fix the permissions, or choose another --out", build.build_dataset,
          [tmp_path], tmp_path / "out")
  calls = []
  monkeypatch.setattr(build, "_build", lambda *a, **kw: calls.append((a, kw)) or "summary")
  assert build.build_dataset([str(tmp_path)], str(tmp_path / "o"), headline_size="large",
                             kernel_trees="t", repo_id="r", allow_partial=True,
                             candidate_runs=["p"]) == "summary"
  assert build.build_dataset([tmp_path], tmp_path / "o") == "summary"
  assert calls == [
      (([str(tmp_path)], tmp_path / "o"), {"headline_size": "large", "kernel_trees": "t",
                                          "repo_id": "r", "allow_partial": True,
                                          "candidate_runs": ["p"], "source": None}),
      (([tmp_path], tmp_path / "o"), {"headline_size": None, "kernel_trees": None,
                                      "repo_id": None, "allow_partial": False,
                                      "candidate_runs": (), "source": None})]


def test_config_rows_leave_out_empty_splits_and_configs(trees, tmp_path):
  records = [rf.record(trees, "relu"), rf.record(trees, "flash_attention"),
             rf.record(trees, "relu", "tpu")]
  merged = rec.merge_runs([_card_run(trees, tmp_path, "a", records)])
  summary = rows.summary_rows(merged, trees, "medium")
  configs = build._config_rows(merged, {"float32": summary, "bfloat16": ()}, ())
  assert list(configs) == ["default", "runs"]
  assert {s: [r["Op_Name"] for r in v] for s, v in configs["default"].items()} == {
      "level_1": ["relu"], "level_3": ["flash_attention"]}
  assert configs["runs"] == {"train": [
      {**schema.config_row(r), "run_name": "a", "primary": True} for r in merged.records]}
  with_artifacts = dataclasses.replace(merged, published_artifacts=tuple(
      ("a", a) for a in rf.artifacts_for(records[:1])))
  candidate = _candidate_row("a")
  configs = build._config_rows(with_artifacts, {"float32": summary, "bfloat16": ()},
                               [candidate])
  assert list(configs) == ["default", "runs", "artifacts", "candidates"]
  assert configs["artifacts"] == {"train": [
      {**schema.config_row(a), "run_name": "a", "primary": True}
      for a in rf.artifacts_for(records[:1])]}
  assert configs["candidates"] == {"train": [to_json_dict(candidate)]}


def test_configs_must_match_the_infos_and_be_known(folder):
  _edit_card(folder, lambda data: data["dataset_info"].remove(_info(data, "artifacts")))
  assert _folder_error(folder) == (f"{folder}: configs ['artifacts', 'default', 'preference', "
                                   "'runs', 'sft'] but dataset_info for ['default', "
                                   "'preference', 'runs', 'sft']")

  def extra(data):
    data["configs"].append({"config_name": "extra", "data_files": []})
    data["dataset_info"].append({**_info(data, "runs"), "config_name": "extra"})
  _edit_card(folder, extra)
  _edit_card(folder, lambda data: data["dataset_info"].append(_info(data, "runs") | {
      "config_name": "artifacts"}))
  assert _folder_error(folder) == (f"{folder}: unexpected configs ['extra']; configs: "
                                   "['default', 'bf16', 'runs', 'artifacts', 'candidates', "
                                   "'sft', 'preference']")


def test_run_names_must_differ_and_artifacts_belong_to_a_record(trees, tmp_path):
  run = _run(trees, tmp_path / "x", "run", [rf.record(trees, "relu")])
  other = _run(trees, tmp_path / "y", "run", [rf.record(trees, "gelu")])
  _raises("run folders share a name (['run', 'run']); they are published as results/<name>/, "
          "so rename one", build._check_names, [run, other])
  build._check_names([run, _run(trees, tmp_path / "y", "run2", [rf.record(trees, "gelu")])])
  orphan = _run(trees, tmp_path, "o", [rf.record(trees, "relu")],
                rf.artifacts_for([rf.record(trees, "relu"), rf.record(trees, "gelu")]))
  _raises(f"{tmp_path / 'o' / 'artifacts.jsonl'}: gelu/gpu/medium has no record in its run; "
          "artifacts must belong to a measured evaluation", rec.merge_runs, [orphan])


def test_out_dir_never_replaces_inputs_or_foreign_folders(trees, tmp_path):
  run = _card_run(trees, tmp_path, "run").path
  out = tmp_path / "out"
  build._check_out_dir(out, [run], trees)  # it does not exist
  for target, inp in [(tmp_path / "run", run), (tmp_path, run), (trees.gpu, trees.gpu)]:
    _raises(f"out_dir {str(target)!r} holds the build's input {str(inp.resolve())!r}; choose "
            "another output folder", build._check_out_dir, target, [run], trees)
  # the trees' own folder holds them as kernels_tpu/ and kernels_gpu/: republished, so it is
  # refused only as a folder the builder did not write
  _raises(f"out_dir {str(tmp_path / 'src')!r} exists and is not a dataset folder written by "
          "builder.build; pass a new or empty folder (it would be replaced)",
          build._check_out_dir, tmp_path / "src", [run], trees)
  # inputs inside the folder's own results/ and kernel trees are republished: fine
  inside = _card_run(trees, out / "results", "run").path
  published = KernelTrees(tpu=out / "kernels_tpu", gpu=out / "kernels_gpu")
  (out / "README.md").write_text(f"<!-- {card.MARKER} -->")
  build._check_out_dir(out, [inside], published)
  notes = tmp_path / "notes"
  notes.mkdir()
  build._check_out_dir(notes, [run], trees)  # empty
  (notes / "README.md").write_text("someone's notes")
  message = (f"out_dir {str(notes)!r} exists and is not a dataset folder written by "
             "builder.build; pass a new or empty folder (it would be replaced)")
  _raises(message, build._check_out_dir, notes, [run], trees)
  (notes / "README.md").unlink()
  (notes / "README.md").mkdir()
  _raises(message, build._check_out_dir, notes, [run], trees)
  afile = tmp_path / "afile"
  afile.write_text(card.MARKER)
  _raises(f"out_dir {str(afile)!r} exists and is not a dataset folder written by "
          "builder.build; pass a new or empty folder (it would be replaced)",
          build._check_out_dir, afile, [run], trees)
  (notes / "README.md").rmdir()
  (notes / "README.md").write_bytes(b"\xff\xfe " + card.MARKER.encode())  # not UTF-8, still ours
  build._check_out_dir(notes, [run], trees)
  _raises(f"out_dir {str(out)!r} holds the build's input {str((out / 'other').resolve())!r}; "
          "choose another output folder", build._check_out_dir, out,
          [_card_run(trees, out, "other").path], trees)


def _write_error(path, rows_, features):
  with pytest.raises(BuildError) as info:
    build._write_parquet(path, rows_, features)
  assert info.value.__cause__ is None
  return info.value


def test_write_parquet_is_strict(trees, tmp_path):
  features = schema.features_of(schema.EvalRecord)
  good = schema.config_row(rf.record(trees, "relu"))
  n, nbytes = build._write_parquet(tmp_path / "a" / "b" / "c.parquet", [good], features)
  assert n == 1 and nbytes > 0 and (tmp_path / "a" / "b" / "c.parquet").is_file()
  for bad in ({k: v for k, v in good.items() if k != "seeds"},                    # ValueError
              {**good, "extra": 1},                                                 # KeyError
              {**good, "seeds": 5}):                                                # TypeError
    message = str(_write_error(tmp_path / "c.parquet", [bad], features))
    assert message.startswith("rows for c.parquet do not match schema.py's features: ")
    assert not (tmp_path / "c.parquet").exists()


def test_the_card_describes_the_judge_version_the_judge_writes():
  """A judge version the card has no text for fails every build of that judge's records."""
  from pallasbench_dataset.evaluation.judge.core import JUDGE_VERSION  # pylint: disable=import-outside-toplevel
  assert JUDGE_VERSION in sections.protocol._JUDGE_TEXT  # pylint: disable=protected-access
