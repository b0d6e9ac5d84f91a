"""The dataset at two precisions: a `precision` column in `runs` and `artifacts` (float32
for records that name none), a `bf16` config holding the headline table at
bfloat16 only where bfloat16 was measured, the default config float32 and unchanged whatever
else the runs hold, and a card that says the precision of its tables and claims nothing of
bfloat16 without its records. Small fake records, as the other builder tests use."""

import dataclasses
import hashlib
import json
import pathlib
import types

import datasets
import pandas as pd
import pytest
from huggingface_hub import DatasetCard

from builder import sections, tables
from builder import records as rec
from builder.build import BuildError, build_dataset
from builder.trees import KernelTrees
from pallasbench_dataset import analysis, loading
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.schema import to_json_dict

from tests import runfixtures as rf
from tests.paths import REPO


def _hashes(folder: pathlib.Path, under: str = "") -> dict[str, str]:
  return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted((folder / under).rglob("*")) if p.is_file()}


def _write_old_run(path, records, artifacts, **manifest):
  """A run folder that names no precision: no `precision` in its records, artifacts lines or
  manifest."""
  rf.write_run(path, records, artifacts, **manifest)
  for name in ("records.jsonl", "artifacts.jsonl"):
    lines = [json.loads(line) for line in (path / name).read_text().splitlines()]
    assert all(line.pop("precision") == "float32" for line in lines)
    (path / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
  return path


def _bfloat16(records):
  """The same evaluations at bfloat16, each kernel 1.5 times slower than at float32 (its
  speedup follows), so that a bfloat16 figure can be told from a float32 one."""
  out = []
  for r in records:
    runtime = None if r.runtime_ms is None else r.runtime_ms * 1.5
    def ratio(baseline, runtime=runtime):
      return None if runtime is None or baseline is None else baseline / runtime
    out.append(dataclasses.replace(r, precision="bfloat16", runtime_ms=runtime,
                                   speedup=ratio(r.baseline_ms),
                                   speedup_eager=ratio(r.eager_baseline_ms)))
  return out


@pytest.fixture(scope="module")
def two(tmp_path_factory):
  """One folder built from a float32 run that names no precision, and one from
  that run and a run of the same evaluations at bfloat16."""
  root = tmp_path_factory.mktemp("precisions")
  trees = rf.write_tree(root / "trees")
  records = rf.standard_records(trees)
  old = _write_old_run(root / "run-a", records, rf.artifacts_for(records))
  half = _bfloat16(records)
  artifacts = [dataclasses.replace(a, precision="bfloat16") for a in rf.artifacts_for(half)]
  bf16 = rf.write_run(root / "run-b", half, artifacts, precisions=["bfloat16"])
  float32 = build_dataset([old], root / "float32", kernel_trees=trees, repo_id="org/pb").out_dir
  both = build_dataset([old, bf16], root / "both", kernel_trees=trees, repo_id="org/pb").out_dir
  return types.SimpleNamespace(float32=float32, both=both, records=records, half=half)


@pytest.fixture
def load(tmp_path_factory):
  def _load(folder, config):
    return datasets.load_dataset(str(folder), config, cache_dir=str(tmp_path_factory.mktemp("hf")))
  return _load


def test_a_float32_build_has_no_bf16_config_and_claims_no_bfloat16(two):
  assert not (two.float32 / "bf16").exists()
  data = DatasetCard.load(two.float32 / "README.md").data.to_dict()
  assert "bf16" not in {c["config_name"] for c in data["configs"]}
  text = (two.float32 / "README.md").read_text()
  assert "(bfloat16)" not in text and "Two precisions" not in text and '"bf16"' not in text
  assert "bfloat16 and float16 are not\n  measured in this release" in text
  assert "### Size `medium` (float32)" in text


def test_the_default_config_is_float32_and_the_same_with_bfloat16_records_beside_it(two, load):
  for part in ("default", "plots", "sft", "preference"):
    both = {k: v for k, v in _hashes(two.both, part).items()
            if k not in ("plots/speedup_bf16.png", "plots/roofline_bf16.png")}
    assert both == _hashes(two.float32, part), part  # the bf16 config's plots beside them
  assert (two.both / "sakanaai_pallasbench.json").read_bytes() == (
      two.float32 / "sakanaai_pallasbench.json").read_bytes()
  default = pd.concat([d.to_pandas() for d in load(two.both, "default").values()])
  assert sorted(default["Pallas_Runtime"]) == sorted(
      r.runtime_ms for r in two.records if r.variant == "gpu")


def test_the_bf16_config_loads_the_headline_table_at_bfloat16(two, load):
  bf16 = load(two.both, "bf16")
  assert list(bf16) == ["level_1", "level_2", "level_3"]
  frame = pd.concat([d.to_pandas() for d in bf16.values()])
  fixed = {r.task: r for r in two.half if r.variant == "gpu"}
  assert sorted(frame["Op_Name"]) == sorted(fixed)
  for row in frame.itertuples():
    assert (row.Pallas_Runtime, row.Pallas_Speedup) == (fixed[row.Op_Name].runtime_ms,
                                                        fixed[row.Op_Name].speedup)
  relu = frame[frame["Op_Name"] == "relu"].iloc[0]
  assert "bfloat16" in relu["JAX_Code_Functional"]  # it draws the bfloat16 inputs
  assert loading.to_pandas(two.both, "bf16")["Op_Name"].tolist() == frame["Op_Name"].tolist()


def test_runs_and_artifacts_have_a_precision_column(two, load):
  runs = load(two.both, "runs")["train"].to_pandas()
  assert runs.groupby("precision").size().to_dict() == {"bfloat16": 8, "float32": 8}
  assert set(runs.loc[runs["run_name"] == "run-a", "precision"]) == {"float32"}  # no field: float32
  assert runs["primary"].all()  # a bfloat16 record is no repeat of its float32 one
  artifacts = load(two.both, "artifacts")["train"].to_pandas()
  assert sorted(zip(artifacts["run_name"], artifacts["precision"])) == sorted(
      zip(runs["run_name"], runs["precision"]))
  old = load(two.float32, "runs")["train"].to_pandas()
  assert set(old["precision"]) == {"float32"} and len(old) == 8


def test_the_card_has_a_results_section_per_precision(two):
  text = (two.both / "README.md").read_text()
  frame = pd.DataFrame([to_json_dict(r) for r in two.half])
  section = text.split("### Size `medium` (bfloat16)", 1)[1].split("### ", 1)[0]
  for variant in ("gpu", "tpu"):
    table = tables.md_table(analysis.summary_by_level(frame[frame["variant"] == variant]),
                          sections.results.LEVEL_FORMATS)
    assert table in section, variant
  def float32(card_text):
    return card_text.split("### Size `medium` (float32)", 1)[1].split("### ", 1)[0].split(
        "![speedup]", 1)[0]
  assert float32(text) == float32((two.float32 / "README.md").read_text())
  assert "Two precisions** (float32, bfloat16)" in text and "8 of the records" in text
  assert '"bf16")' in text and "- `bf16`: the same table at bfloat16" in text
  assert "| bfloat16 | exact |" in text and "| float32 | exact |" in text
  assert "and\n  bfloat16 (the `bf16` config" in text and "until the precision work" not in text


def test_the_runs_keys_and_plan_include_the_precision(tmp_path):
  trees = rf.write_tree(tmp_path / "trees")
  relu = rf.record(trees, "relu")
  run = rf.write_run(tmp_path / "r", [relu, dataclasses.replace(relu, precision="bfloat16")],
                     precisions=["float32", "bfloat16"], tasks=["relu"], variants=["gpu"])
  read = rec.read_run(run)
  assert {k.parts() for k in read.manifest.planned()} == {
      ("relu", "gpu", "medium"),  # float32: the key it always had
      ("relu", "gpu", "medium", "bfloat16")}
  merged = rec.merge_runs([read])
  assert not merged.repeats and len(merged.records) == 2
  assert merged.precisions() == ("float32", "bfloat16")
  assert EvalKey.of(merged.records[1]).label() == "relu/gpu/medium/bfloat16"
  assert EvalKey.of(relu).label() == "relu/gpu/medium"
  old = rf.write_run(tmp_path / "old", [relu], tasks=["relu"], variants=["gpu"])
  assert {k.parts() for k in rec.read_run(old).manifest.planned()} == {("relu", "gpu", "medium")}
  half = rf.write_run(tmp_path / "half", [relu], precisions=["float32", "bfloat16"],
                      tasks=["relu"], variants=["gpu"])
  merged = rec.merge_runs([rec.read_run(half)])
  assert [k.parts() for k in rec.unmeasured([rec.read_run(half)], merged, "medium")] == [
      ("relu", "gpu", "medium", "bfloat16")]


def test_a_bfloat16_only_run_is_refused_for_the_float32_default(tmp_path):
  trees = rf.write_tree(tmp_path / "trees")
  relu = dataclasses.replace(rf.record(trees, "relu"), precision="bfloat16")
  run = rf.write_run(tmp_path / "r", [relu], precisions=["bfloat16"], tasks=["relu"],
                     variants=["gpu"])
  with pytest.raises(BuildError, match="no record of the fixed kernels .* at float32"):
    build_dataset([run], tmp_path / "out", kernel_trees=trees)
  bad = rf.write_run(tmp_path / "bad", [dataclasses.replace(relu, precision="float16")])
  with pytest.raises(BuildError, match="unknown precision 'float16'"):
    rec.read_run(bad)


def _first_run_of_data() -> pathlib.Path:
  return sorted((REPO / "data" / "results").iterdir())[0]


def test_the_default_config_stays_float32_beside_bfloat16_records(tmp_path, load):
  """The published folder's first run alone, and with a run of bfloat16 records of its fixed
  kernels beside it: the default config is the same float32 rows, one a task, byte for byte."""
  first = rec.read_run(_first_run_of_data())
  float32 = [r for r in first.records if r.precision == "float32"]
  plan = {"tasks": first.manifest.tasks, "sizes": first.manifest.sizes,
          "variants": first.manifest.variants}
  run = rf.write_run(tmp_path / "float32-run", float32, **plan)  # whatever else data/ holds
  half = _bfloat16([r for r in float32 if r.variant == "gpu" and r.size == "medium"])
  bf16 = rf.write_run(tmp_path / "bf16-run", half, precisions=["bfloat16"], sizes=["medium"],
                      variants=["gpu"], tasks=sorted({r.task for r in half}))
  trees = KernelTrees.within(REPO / "data")
  alone = build_dataset([run], tmp_path / "alone", kernel_trees=trees).out_dir
  both = build_dataset([run, bf16], tmp_path / "both", kernel_trees=trees).out_dir
  assert _hashes(both, "default") == _hashes(alone, "default")
  default = pd.concat([d.to_pandas() for d in load(both, "default").values()])
  assert len(default) == len(plan["tasks"]) and sorted(default["Pallas_Runtime"].dropna()) == sorted(
      r.runtime_ms for r in float32
      if r.variant == "gpu" and r.size == "medium" and r.runtime_ms is not None)
  assert sum(d.num_rows for d in load(both, "bf16").values()) == len(half) == len(plan["tasks"])
  runs = load(both, "runs")["train"].to_pandas()
  assert (runs["precision"] == "bfloat16").sum() == len(plan["tasks"])


def _readme_block(after: str) -> str:
  """The first python block of the README after the line that starts with `after`."""
  text = (REPO / "README.md").read_text()
  tail = text[text.index(after):]
  return tail.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_three_lines_compare_the_precisions(two, capsys):
  block = _readme_block("Compare the two precisions")
  assert len(block.splitlines()) == 3
  namespace = {"to_pandas": lambda where, config="default": loading.to_pandas(
      two.both if where == "data" else where, config)}
  exec(block, namespace)  # pylint: disable=exec-used  (the README's own lines)
  both = namespace["both"]
  fixed = {r.task: r.speedup for r in two.records if r.variant == "gpu"}
  half = {r.task: r.speedup for r in two.half if r.variant == "gpu"}
  assert dict(zip(both["Op_Name"], both["Pallas_Speedup_float32"])) == fixed
  assert dict(zip(both["Op_Name"], both["Pallas_Speedup_bfloat16"])) == half
  printed = capsys.readouterr().out
  assert "Pallas_Speedup_bfloat16" in printed and all(task in printed for task in fixed)


def test_two_runs_frames_pair_by_precision_too(two):
  """A run's float32 and bfloat16 rows of one kernel and size are two evaluations: the
  pairing of two runs does not cross them (a frame without the column pairs as before)."""
  a = pd.DataFrame([to_json_dict(r) for r in two.records + two.half])
  b = a.copy()
  b.loc[b["precision"] == "bfloat16", "status"] = "timeout"
  changed = analysis.verdict_changes(a, b)
  assert set(changed["precision"]) == {"bfloat16"} and len(changed) == 8
  repro = analysis.reproducibility(a, b)
  assert len(repro) == int(a["runtime_ms"].notna().sum()) and (repro["rel_diff"] == 0).all()
  old = analysis.verdict_changes(a.drop(columns="precision"), b)
  assert "precision" not in old.columns

