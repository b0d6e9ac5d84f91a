"""An evaluation's key: one type for the suite's resume, the verdict cache, the builder's merge
and the report, whose encoding keeps every folder and cache written so far readable."""

import dataclasses
import hashlib
import json
import tarfile
import types

import pytest

from builder import records as rec
from pallasbench_dataset.evaluation import protocol
from pallasbench_dataset.evaluation.pipeline import driver, report, suite, verdicts
from pallasbench_dataset.keys import EvalKey, precision_field
from pallasbench_dataset.schema import Artifacts, to_json_dict

from tests import runfixtures as rf
from tests.paths import RELEASE_5_PACKS


def test_the_encoding_names_the_precision_only_where_it_is_not_float32():
  float32 = EvalKey("relu", "gpu", "medium")
  assert float32 == EvalKey("relu", "gpu", "medium", "float32", None)
  assert float32.parts() == ("relu", "gpu", "medium")
  assert (float32.label(), float32.label(" "), float32.sized()) == (
      "relu/gpu/medium", "relu gpu medium", "medium")
  bfloat16 = EvalKey("relu", "candidate", "medium", "bfloat16", "relu/a")
  assert bfloat16.parts() == ("relu", "candidate", "medium", "bfloat16", "relu/a")
  assert (bfloat16.label("-"), bfloat16.sized()) == ("relu-candidate-medium-bfloat16-relu/a",
                                                      "medium/bfloat16")
  assert (precision_field("float32"), precision_field("bfloat16")) == ({}, {"precision": "bfloat16"})


def test_the_precisions_of_one_evaluation_are_two_keys_in_precision_order():
  float32, bfloat16 = EvalKey("relu", "gpu", "medium"), EvalKey("relu", "gpu", "medium", "bfloat16")
  assert float32 != bfloat16 and len({float32, bfloat16}) == 2
  assert sorted([bfloat16, EvalKey("gelu", "gpu", "medium"), float32]) == [
      EvalKey("gelu", "gpu", "medium"), float32, bfloat16]
  assert sorted([EvalKey("relu", "candidate", "small", candidate="b"),
                 EvalKey("relu", "candidate", "small", candidate="a"),
                 EvalKey("relu", "candidate", "small")]) == [
      EvalKey("relu", "candidate", "small"), EvalKey("relu", "candidate", "small", candidate="a"),
      EvalKey("relu", "candidate", "small", candidate="b")]
  with pytest.raises(dataclasses.FrozenInstanceError):
    float32.precision = "bfloat16"  # type: ignore[misc]


def _record(precision):
  return rf.record(types.SimpleNamespace(), "relu", kernel_sha256="0" * 64, precision=precision)


def _artifacts(precision):
  return dataclasses.replace(rf.artifacts_for([_record(precision)])[0], precision=precision)


def _write(run_dir, records, artifacts):
  run_dir.mkdir(parents=True, exist_ok=True)
  for name, items in ((suite.RECORDS, records), (suite.ARTIFACTS, artifacts)):
    (run_dir / name).write_text("".join(json.dumps(to_json_dict(i)) + "\n" for i in items))


def test_a_float32_and_a_bfloat16_evaluation_resume_and_merge_apart(tmp_path):
  """The float32 record whose artifacts line was lost is measured again while its bfloat16
  twin is kept; a builder run holding both has two rows, and a later run's bfloat16 record is
  a repeat of the bfloat16 row only."""
  both = [_record("float32"), _record("bfloat16")]
  _write(tmp_path / "run", both, [_artifacts("bfloat16")])
  done = suite.reconcile(tmp_path / "run")
  assert done == {EvalKey("relu", "gpu", "medium", "bfloat16")}
  planned = [EvalKey.of(r) for r in both]
  assert [k for k in planned if k not in done] == [EvalKey("relu", "gpu", "medium")]
  first = rec.read_run(rf.write_run(tmp_path / "a", both, precisions=["float32", "bfloat16"],
                                    tasks=["relu"], variants=["gpu"]))
  later = rec.read_run(rf.write_run(tmp_path / "b", both[1:], precisions=["bfloat16"],
                                    tasks=["relu"], variants=["gpu"]))
  merged = rec.merge_runs([first, later])
  assert merged.source_run == {EvalKey("relu", "gpu", "medium"): "a",
                               EvalKey("relu", "gpu", "medium", "bfloat16"): "a"}
  assert [(name, [r.precision for r in records]) for name, records in merged.repeats] == [
      ("b", ["bfloat16"])]
  assert [report._size(r) for r in both] == ["medium", "medium/bfloat16"]  # pylint: disable=protected-access


@pytest.mark.parametrize("pack", RELEASE_5_PACKS, ids=lambda p: p.name.split(".")[0])
def test_release_5_run_folders_read_and_resume_through_the_key(pack, tmp_path):
  """Each of release 5's runs measured 45 tasks x 2 variants x 2 sizes at float32 with a
  manifest that names no precision: the builder and the suite's resume both find its 180
  evaluations under the keys the manifest planned, each float32 and named as it always was."""
  with tarfile.open(pack) as t:
    t.extractall(tmp_path, filter="data")
  (run,) = tmp_path.iterdir()
  records = (run / suite.RECORDS).read_bytes()
  read = rec.read_run(run)
  keys = [EvalKey.of(r) for r in read.records]
  assert len(read.records) == len(set(keys)) == 180
  assert set(keys) == read.manifest.planned() == {EvalKey.of(a) for a in read.artifacts}
  assert {k.precision for k in keys} == {"float32"}
  assert all(len(k.parts()) == 3 and k.label().count("/") == 2 for k in keys)
  assert suite.reconcile(run) == set(keys)  # a resume of it has nothing left to measure
  assert (run / suite.RECORDS).read_bytes() == records


# The verdict cache's file names as main's code computed them, for a fixed key.
FLOAT32_DIGEST = "c16e87caf3ac1b1ba17edcb4a83af4fcb95daee3f1da1ca3c8a5f78a3a7b0067"
BFLOAT16_DIGEST = "f97864eb22649f602f470c254af954fc5a13f4658a7bb7afdea90c5826f47edc"


def _verdict_key(precision):
  return verdicts.VerdictKey(
      kernel_sha256="0" * 64, task="relu", size="medium", judge_version="7",
      options='{"num_seeds": 2}', platform="gpu", device_kind="NVIDIA H200", jax="0.11.2",
      jaxlib="0.11.2", judge_code="c" * 64, precision=precision)


def test_verdict_cache_digests_are_unchanged_and_find_entries_that_name_no_precision(tmp_path):
  float32, bfloat16 = _verdict_key("float32"), _verdict_key("bfloat16")
  assert (float32.digest(), bfloat16.digest()) == (FLOAT32_DIGEST, BFLOAT16_DIGEST)
  assert "precision" not in float32.fields() and bfloat16.fields()["precision"] == "bfloat16"
  entry = tmp_path / FLOAT32_DIGEST[:2] / f"{FLOAT32_DIGEST}.json"
  entry.parent.mkdir()
  stored = {k: v for k, v in dataclasses.asdict(float32).items() if k != "precision"}
  entry.write_text(json.dumps({"key": stored, "record": to_json_dict(_record("float32")),
                               "artifacts": to_json_dict(_artifacts("float32"))}))
  cache = verdicts.VerdictCache(tmp_path)
  found = cache.get(float32)
  assert found is not None and isinstance(found[1], Artifacts)
  assert cache.get(bfloat16) is None


def test_a_work_item_hashes_its_source_once_for_its_record_and_its_verdict():
  """The kernel's sha256 is hashed once, when its WorkItem is made: the judge's item (the
  record's kernel_sha256) and the verdict cache's key both read it, so they cannot differ."""
  item = driver.WorkItem(task="relu", variant="candidate", size="medium",
                         source="def kernel(x): ...", filename="k.py", precision="bfloat16")
  assert item.kernel_sha256 == hashlib.sha256(b"def kernel(x): ...").hexdigest()
  assert dataclasses.replace(item, source="other").kernel_sha256 == hashlib.sha256(
      b"other").hexdigest()
  assert verdicts.key_for(item, rf.ENV) == verdicts.VerdictKey(
      kernel_sha256=item.kernel_sha256, task="relu", size="medium",
      judge_version=verdicts.JUDGE_VERSION, options=verdicts._options(item.options),  # pylint: disable=protected-access
      platform=rf.ENV.platform, device_kind=rf.ENV.device_kind, jax=rf.ENV.jax,
      jaxlib=rf.ENV.jaxlib, judge_code=verdicts.judge_code(), precision="bfloat16")
  object.__setattr__(item, "kernel_sha256", "f" * 64)  # read, not hashed again
  export = protocol.ExportOutcome(report=None, failure=None, message=None, output="",
                                  layers=(), wall_s=0.0)
  assert driver.judge_item(item, export).kernel_sha256 == "f" * 64
  assert verdicts.key_for(item, rf.ENV).kernel_sha256 == "f" * 64
