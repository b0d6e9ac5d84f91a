"""builder.build: fixture runs -> a dataset folder that `datasets` loads offline, strictly
validated, deterministic, and refused when the records cannot be trusted."""

import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import datasets
import pandas as pd
import pytest
from huggingface_hub import DatasetCard

import runfixtures as rf
from builder.build import BuildError, build_dataset
from builder.trees import KernelTrees
from builder.validate import FolderError, validate_folder
from pallasbench_dataset import kernels, schema
from pallasbench_dataset.schema import Artifacts, Status
from pallasbench_dataset.tasks import get_task

ARTIFACTS = [Artifacts(task="relu", variant=v, size="medium", jaxpr="{ lambda ; a. }",
                       stablehlo="module {}", triton_ir=None, ptx=None) for v in ("gpu", "tpu")]


def _hashes(folder: pathlib.Path) -> dict[str, str]:
  return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(folder.rglob("*")) if p.is_file()}


def _load(folder, config=None):
  return datasets.load_dataset(str(folder), config)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  root = tmp_path_factory.mktemp("build")
  trees = rf.write_tree(root)
  run = rf.write_run(root / "run-medium", rf.standard_records(trees), ARTIFACTS)
  summary = build_dataset([run], root / "out", kernel_trees=trees, repo_id="org/pb")
  return summary, trees, run


def test_summary_counts(built):
  summary, _, _ = built
  assert dict(summary.rows["default"]) == {"level_1": 2, "level_2": 1, "level_3": 1}
  assert dict(summary.rows["runs"]) == {"train": 8}
  assert dict(summary.rows["artifacts"]) == {"train": 2}
  assert summary.tasks == 4 and not summary.complete
  assert summary.folder_bytes == sum(p.stat().st_size for p in summary.out_dir.rglob("*")
                                     if p.is_file())
  assert summary.reproducibility is None
  assert summary.hardware == "h200"
  assert summary.default_repo_id("my-org") == "my-org/pallasbench-robust-gpu-h200"
  assert "4 of 45 tasks; default: level_1 2, level_2 1, level_3 1; runs: train 8" in (
      summary.describe())


def test_folder_layout(built):
  summary, _, _ = built
  assert set(summary.files) == {
      "README.md", "default/level_1-00000-of-00001.parquet",
      "default/level_2-00000-of-00001.parquet", "default/level_3-00000-of-00001.parquet",
      "runs/train-00000-of-00001.parquet", "artifacts/train-00000-of-00001.parquet",
      "sakanaai_pallasbench.json", "fix.patch", "plots/speedup.png", "plots/roofline.png",
      "results/run-medium/manifest.json", "results/run-medium/records.jsonl",
      "results/run-medium/artifacts.jsonl",
      *(f"kernels_{v}/{t}.py" for v in ("tpu", "gpu") for t in rf.TASKS)}
  assert not list(summary.out_dir.parent.glob(".out.*"))  # no staging or backup left behind


def test_loads_offline_with_the_schema_features(built):
  out = built[0].out_dir
  default = _load(out)
  assert list(default) == ["level_1", "level_2", "level_3"]
  assert [default[s].num_rows for s in default] == [2, 1, 1]
  for split in default.values():
    assert split.features == schema.SUMMARY_FEATURES
  runs = _load(out, "runs")
  assert runs["train"].features == schema.FEATURES and runs["train"].num_rows == 8
  artifacts = _load(out, "artifacts")
  assert artifacts["train"].features == schema.ARTIFACT_FEATURES
  assert artifacts["train"]["stablehlo"] == ["module {}", "module {}"]


def test_loads_with_the_hub_unreachable(built):
  """Offline for real: a fresh interpreter with offline flags and a dead Hub endpoint."""
  code = ("import datasets, json, sys; print(json.dumps({c: {s: d.num_rows for s, d in "
          "datasets.load_dataset(sys.argv[1], c).items()} for c in ('default', 'runs', "
          "'artifacts')}))")
  env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
             HF_ENDPOINT="http://127.0.0.1:9")
  proc = subprocess.run([sys.executable, "-c", code, str(built[0].out_dir)], env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  assert json.loads(proc.stdout.splitlines()[-1]) == {
      "default": {"level_1": 2, "level_2": 1, "level_3": 1}, "runs": {"train": 8},
      "artifacts": {"train": 2}}


def test_runs_rows_round_trip_the_records(built):
  _, _, run = built
  rows = _load(built[0].out_dir, "runs")["train"].to_list()
  records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
  by_key = {(r["task"], r["variant"], r["size"]): r for r in records}
  assert [(r["task_id"], r["variant"]) for r in rows] == sorted(
      (r["task_id"], r["variant"]) for r in records)
  for row in rows:
    rebuilt = schema.from_json_dict(schema.EvalRecord, row)
    assert schema.to_json_dict(rebuilt) == by_key[(row["task"], row["variant"], row["size"])]


def test_default_rows_content(built):
  summary, trees, _ = built
  rows = {r["Op_Name"]: r for split in _load(summary.out_dir).values() for r in split.to_list()}
  relu = rows["relu"]
  assert relu["Pallas_Code"] == trees.path("gpu", "relu").read_text()
  assert relu["Pallas_Code_Original"] == trees.path("tpu", "relu").read_text()
  assert relu["JAX_Baseline_Code"] == get_task("relu").reference_source
  assert (relu["Fix_Applied"], relu["Fix_Reason"]) == (
      "tile_relu", "blocks of relu exceeded the Triton limit; tiled")
  assert relu["Pallas_Runtime"] == 0.5 and relu["JAX_Baseline_Runtime"] == 1.0
  assert relu["Pallas_Speedup"] == pytest.approx(2.0)  # baseline / kernel
  assert relu["Original_Status"] == "pass" and relu["Original_Speedup"] == pytest.approx(0.5)
  assert (relu["Target_Hardware"], relu["Backend"]) == ("NVIDIA H200", "triton")
  assert relu["Framework"] == "JAX 0.11.2 / Pallas"
  assert relu["Compile_Time_s"] == pytest.approx(1.0)
  assert relu["Roofline_Fraction"] == pytest.approx(0.5)
  assert (rows["gelu"]["Correct"], rows["gelu"]["Status"]) == (False, "incorrect")
  assert rows["gelu"]["Error"] == "not allclose at (3, 4)"
  flash = rows["flash_attention"]
  assert flash["Original_Status"] == "error" and flash["Original_Speedup"] is None
  assert "Mosaic block shape" in flash["Original_Error"]
  assert flash["Corrections"] == get_task("flash_attention").notes


def test_json_list_equals_default_config(built):
  out = built[0].out_dir
  text = (out / "sakanaai_pallasbench.json").read_text()
  data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON: {c}"))
  rows = [r for split in _load(out).values() for r in split.to_list()]
  gelu = next(r for r in rows if r["Op_Name"] == "gelu")
  assert gelu["Max_Abs_Error"] == float("inf")  # Parquet keeps it; JSON has no Infinity
  gelu["Max_Abs_Error"] = None
  assert data == rows


def test_copies_trees_results_and_patch(built):
  summary, trees, run = built
  out = summary.out_dir
  for variant in ("tpu", "gpu"):
    copied = sorted(p.name for p in (out / f"kernels_{variant}").iterdir())
    assert copied == sorted(f"{t}.py" for t in rf.TASKS)  # no __init__.py
    for name in copied:
      assert (out / f"kernels_{variant}" / name).read_bytes() == (
          trees.dir(variant) / name).read_bytes()
  for name in ("manifest.json", "records.jsonl"):
    assert (out / "results/run-medium" / name).read_bytes() == (run / name).read_bytes()
  patch = (out / "fix.patch").read_text()
  headers = [line for line in patch.splitlines() if line.startswith("--- ")]
  assert headers == [f"--- a/kernels_tpu/{t}.py" for t in sorted(rf.TASKS)]
  assert "+++ b/kernels_gpu/relu.py" in patch


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs the `patch` tool")
def test_fix_patch_turns_tpu_tree_into_gpu_tree(built, tmp_path):
  summary, trees, _ = built
  shutil.copytree(summary.out_dir / "kernels_tpu", tmp_path / "kernels_tpu")
  subprocess.run(["patch", "-s", "-p1", "-i", str(summary.out_dir / "fix.patch")], cwd=tmp_path,
                 check=True)
  for task in rf.TASKS:
    assert (tmp_path / "kernels_tpu" / f"{task}.py").read_text() == trees.path(
        "gpu", task).read_text()


def test_card_metadata_and_numbers(built):
  out = built[0].out_dir
  card = DatasetCard.load(out / "README.md")
  data = card.data.to_dict()
  assert data["license"] == "apache-2.0"
  assert {"jax", "pallas", "gpu-kernels", "triton", "benchmark"} <= set(data["tags"])
  configs = {c["config_name"]: c for c in data["configs"]}
  assert set(configs) == {"default", "runs", "artifacts"}
  assert configs["default"].get("default") is True
  assert [f["split"] for f in configs["default"]["data_files"]] == ["level_1", "level_2",
                                                                     "level_3"]
  infos = {i["config_name"]: i for i in data["dataset_info"]}
  assert {s["name"]: s["num_examples"] for s in infos["default"]["splits"]} == {
      "level_1": 2, "level_2": 1, "level_3": 1}
  assert datasets.Features._from_yaml_list(infos["runs"]["features"]) == schema.FEATURES
  text = card.text
  # fixed kernels: 4 tasks, 3 pass (gelu is incorrect), 3 of 4 faster than the baseline
  assert "| all | 4 | 3 | 75% | 75% | 0% | 1.529 |" in text
  # originals: 3 pass at 0.5x; flash_attention errored
  assert "| all | 4 | 3 | 75% | 0% | 0% | 0.500 |" in text
  assert "Mosaic block shape (512, 512)" in text
  assert "| run-medium | NVIDIA H200 | 9.0 | 570.86 | 12.8 |" in text
  assert "| run-medium | 3900.0 | 4000.0 | 400.0 | cupti: 1 GiB copy and read-only sum |" in text
  assert "org/pb" in text and "Reproducibility" not in text
  assert "not comparable" not in text  # a GPU-only build has no CPU note
  # the fixture's records carry no judge version: release-1 (in-process) records
  assert "**Evaluator** (`judge_version` 1, release 1, 8 evaluation(s))" in text
  assert "**Judge**" not in text


def test_card_names_the_judge_of_each_record(tmp_path):
  trees = rf.write_tree(tmp_path)
  records = [dataclasses.replace(r, judge_version="2") if r.variant == "gpu" else r
             for r in rf.standard_records(trees)]
  run = rf.write_run(tmp_path / "run-medium", records, ARTIFACTS)
  text = (build_dataset([run], tmp_path / "out", kernel_trees=trees, repo_id="org/pb")
          .out_dir / "README.md").read_text()
  assert "**Judge** (`judge_version` 2, 4 evaluation(s))" in text
  assert "**Evaluator** (`judge_version` 1, release 1, 4 evaluation(s))" in text
  assert text.index("**Judge**") < text.index("**Evaluator**")


def test_two_builds_are_byte_identical(built, tmp_path):
  summary, trees, run = built
  again = build_dataset([run], tmp_path / "again", kernel_trees=trees, repo_id="org/pb")
  assert _hashes(again.out_dir) == _hashes(summary.out_dir)


def test_rebuild_replaces_folder_and_regenerates_dataset_info(tmp_path):
  trees = rf.write_tree(tmp_path)
  full = rf.write_run(tmp_path / "full", rf.standard_records(trees), ARTIFACTS)
  out = tmp_path / "out"
  build_dataset([full], out, kernel_trees=trees)
  small_records = [r for r in rf.standard_records(trees) if r.task in ("relu", "gelu")]
  small = rf.write_run(tmp_path / "small", small_records, tasks=("relu", "gelu"))
  summary = build_dataset([small], out, kernel_trees=trees)
  assert dict(summary.rows["default"]) == {"level_1": 2}
  assert "artifacts" not in summary.rows
  assert not (out / "default/level_2-00000-of-00001.parquet").exists()
  assert not (out / "results/full").exists()
  infos = DatasetCard.load(out / "README.md").data.to_dict()["dataset_info"]
  assert {i["config_name"]: [s["num_examples"] for s in i["splits"]] for i in infos} == {
      "default": [2], "runs": [4]}
  assert _load(out)["level_1"].num_rows == 2


def test_folder_rebuilds_from_its_own_results_and_trees(tmp_path):
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))  # no artifacts
  out = build_dataset([run], tmp_path / "out", kernel_trees=trees).out_dir
  before = _hashes(out)
  published = KernelTrees(tpu=out / "kernels_tpu", gpu=out / "kernels_gpu")
  build_dataset([out / "results" / "run"], out, kernel_trees=published)
  assert _hashes(out) == before


def test_stale_card_is_caught(built, tmp_path):
  copy = shutil.copytree(built[0].out_dir, tmp_path / "copy")
  readme = copy / "README.md"
  readme.write_text(readme.read_text().replace("num_examples: 8", "num_examples: 9"))
  with pytest.raises(datasets.exceptions.NonMatchingSplitsSizesError):
    _load(copy, "runs")
  with pytest.raises(FolderError, match="stale dataset_info"):
    validate_folder(copy)


def test_validate_folder_counts(built):
  counts = validate_folder(built[0].out_dir)
  assert {c: dict(s) for c, s in counts.items()} == {
      "default": {"level_1": 2, "level_2": 1, "level_3": 1}, "runs": {"train": 8},
      "artifacts": {"train": 2}}


def test_reproducibility_from_a_repeat_run(tmp_path):
  trees = rf.write_tree(tmp_path)
  first = rf.standard_records(trees)
  repeat = []
  for r in first:
    factor = {("relu", "gpu"): 1.10, ("matmul_relu", "gpu"): 1.01}.get((r.task, r.variant), 1.0)
    if r.runtime_ms is not None:
      r = rf.record(trees, r.task, r.variant, r.size, runtime_ms=r.runtime_ms * factor,
                    baseline_ms=r.baseline_ms, status=r.status, correct=r.correct, error=r.error)
    repeat.append(r)
  runs = [rf.write_run(tmp_path / "a", first), rf.write_run(tmp_path / "b", repeat)]
  summary = build_dataset(runs, tmp_path / "out", kernel_trees=trees)
  stats = summary.reproducibility
  assert stats["n"] == 7  # 8 evaluations, flash_attention's original has no runtime
  assert stats["n_above"] == 1
  assert stats["max"] == pytest.approx(0.10)
  relu = [r for r in _load(summary.out_dir, "runs")["train"].to_list()
          if (r["task"], r["variant"]) == ("relu", "gpu")]
  assert relu[0]["runtime_ms"] == 0.5  # the first run given is the row
  assert dict(summary.rows["runs"]) == {"train": 8}
  text = (summary.out_dir / "README.md").read_text()
  assert "### Reproducibility" in text and "| relu | gpu | medium | a | b |" in text
  assert (summary.out_dir / "results/b/records.jsonl").is_file()


def test_sizes_merge_and_headline_choice(tmp_path):
  trees = rf.write_tree(tmp_path)
  medium = rf.write_run(tmp_path / "m", rf.standard_records(trees))
  large = rf.write_run(tmp_path / "l", [rf.record(trees, "relu", "gpu", "large")],
                       tasks=("relu",), sizes=("large",), variants=("gpu",))
  summary = build_dataset([medium, large], tmp_path / "out", kernel_trees=trees)
  assert dict(summary.rows["runs"]) == {"train": 9}
  assert summary.tasks == 4
  # the large run alone lacks three tasks at the headline size...
  with pytest.raises(BuildError, match="headline size 'medium' lacks"):
    build_dataset([large], tmp_path / "out2", kernel_trees=trees, headline_size="medium")
  # ...but is a complete build of its own size
  only_large = build_dataset([large], tmp_path / "out3", kernel_trees=trees,
                             headline_size="large")
  assert dict(only_large.rows["default"]) == {"level_1": 1}


def test_torn_line_of_a_killed_run_is_skipped(tmp_path):
  trees = rf.write_tree(tmp_path)
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records)
  text = (run / "records.jsonl").read_text()
  line = json.dumps(schema.to_json_dict(records[0]))
  # killed while writing record 0; the resumed run appends on the same line, so the first
  # line holds a torn record glued to record 0, which --resume then measures again
  (run / "records.jsonl").write_text(line[:200] + text + line + "\n")
  summary = build_dataset([run], tmp_path / "out", kernel_trees=trees)
  assert dict(summary.rows["runs"]) == {"train": 8}


def test_manifest_of_a_run_that_measured_nothing(tmp_path):
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))
  empty = rf.write_run(tmp_path / "resumed", [], environment=None, ceilings=None,
                       finished_at=None)
  summary = build_dataset([run, empty], tmp_path / "out", kernel_trees=trees)
  text = (summary.out_dir / "README.md").read_text()
  assert "| resumed | – |" in text and "not recorded" in text


def test_cpu_run_is_marked_not_comparable(tmp_path):
  trees = rf.write_tree(tmp_path, ("relu",))
  records = [rf.record(trees, "relu", v, "small", device="cpu", comparable=False)
             for v in ("tpu", "gpu")]
  run = rf.write_run(tmp_path / "cpu", records, tasks=("relu",), sizes=("small",), device="cpu")
  summary = build_dataset([run], tmp_path / "out", kernel_trees=trees, headline_size="small")
  row = _load(summary.out_dir)["level_1"][0]
  assert row["Backend"] == "interpret (CPU)"
  assert "**not comparable**" in (summary.out_dir / "README.md").read_text()


def test_builds_from_the_shipped_trees(tmp_path):
  relu_gpu, relu_tpu = (kernels.kernel_path(v, "relu") for v in ("gpu", "tpu"))
  trees = KernelTrees.shipped()
  records = [rf.record(trees, "relu", v) for v in ("tpu", "gpu")]
  run = rf.write_run(tmp_path / "run", records, tasks=("relu",))
  summary = build_dataset([run], tmp_path / "out")
  row = _load(summary.out_dir)["level_1"][0]
  assert row["Pallas_Code"] == relu_gpu.read_text()
  assert row["Pallas_Code_Original"] == relu_tpu.read_text()
  assert row["Fix_Applied"] == kernels.load_kernel("gpu", "relu").FIX_APPLIED


# ---------------------------------------------------------------------------------------------
# Refusals: each leaves no output folder behind.

def _refused(tmp_path, runs, match, **kwargs):
  out = tmp_path / "out"
  with pytest.raises(BuildError, match=match):
    build_dataset(runs, out, **kwargs)
  assert not out.exists()
  assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_refuses_kernel_that_was_not_measured(tmp_path):
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))
  path = trees.path("gpu", "relu")
  path.write_text(path.read_text() + "# edited after measuring\n")
  _refused(tmp_path, [run], r"differs from the file.*relu/gpu/medium", kernel_trees=trees)


def test_refuses_record_that_fails_the_schema(tmp_path):
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))
  lines = (run / "records.jsonl").read_text().splitlines()
  bad = json.loads(lines[1])
  del bad["speedup"]
  lines[1] = json.dumps(bad)
  (run / "records.jsonl").write_text("\n".join(lines) + "\n")
  _refused(tmp_path, [run], r"records.jsonl:2: not a valid EvalRecord.*speedup",
           kernel_trees=trees)


@pytest.mark.parametrize("field, value, match", [
    ("task", "nope", "unknown task 'nope'"),
    ("variant", "candidate", "variant 'candidate' is not one of"),
    ("size", "huge", "unknown size 'huge'"),
    ("task_id", 7, "the registry says 1, 1"),
])
def test_refuses_unknown_task_variant_size(tmp_path, field, value, match):
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))
  lines = (run / "records.jsonl").read_text().splitlines()
  record = json.loads(lines[0])
  record[field] = value
  lines[0] = json.dumps(record)
  (run / "records.jsonl").write_text("\n".join(lines) + "\n")
  _refused(tmp_path, [run], match, kernel_trees=trees)


def test_refuses_headline_size_missing_a_task(tmp_path):
  trees = rf.write_tree(tmp_path)
  records = [r for r in rf.standard_records(trees) if r.task != "matmul_relu"]
  run = rf.write_run(tmp_path / "run", records)  # the manifest still lists matmul_relu
  _refused(tmp_path, [run], r"lacks records for 2 evaluation\(s\): matmul_relu \(gpu\), "
           r"matmul_relu \(tpu\)", kernel_trees=trees)


def test_refuses_inconsistent_speedup(tmp_path):
  trees = rf.write_tree(tmp_path)
  records = rf.standard_records(trees)
  records[0] = rf.record(trees, "relu", speedup=0.5)  # baseline 1.0 / kernel 0.5 is 2.0
  run = rf.write_run(tmp_path / "run", records)
  _refused(tmp_path, [run], "is not baseline_ms / runtime_ms", kernel_trees=trees)


def test_refuses_duplicate_record_in_one_run(tmp_path):
  trees = rf.write_tree(tmp_path)
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "run", records + [records[0]])
  _refused(tmp_path, [run], "relu/gpu/medium appears twice", kernel_trees=trees)


def test_refuses_orphan_artifact(tmp_path):
  trees = rf.write_tree(tmp_path)
  orphan = Artifacts(task="relu", variant="gpu", size="large", jaxpr=None, stablehlo=None,
                     triton_ir=None, ptx=None)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees), [orphan])
  _refused(tmp_path, [run], "has no record", kernel_trees=trees)


def test_refuses_missing_fix_constants(tmp_path):
  trees = rf.write_tree(tmp_path)
  path = trees.path("gpu", "gelu")
  path.write_text(path.read_text().replace("FIX_REASON", "WHY"))
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))  # hashes match the edit
  _refused(tmp_path, [run], "must define FIX_APPLIED and FIX_REASON", kernel_trees=trees)


def test_failed_build_keeps_the_previous_folder(built, tmp_path, monkeypatch):
  summary, trees, run = built
  out = shutil.copytree(summary.out_dir, tmp_path / "out")
  before = _hashes(out)
  bad_trees = rf.write_tree(tmp_path / "other")  # same names, but kernels never measured
  (bad_trees.gpu / "relu.py").write_text("# different\n")
  with pytest.raises(BuildError):
    build_dataset([run], out, kernel_trees=bad_trees)
  assert _hashes(out) == before

  def broken(records):  # a failure half-way through writing the new folder
    raise RuntimeError("disk full")
  monkeypatch.setattr("builder.plots.roofline_png", broken)
  with pytest.raises(RuntimeError, match="disk full"):
    build_dataset([run], out, kernel_trees=trees)
  assert _hashes(out) == before
  assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "out"]  # no staging left


def test_will_not_replace_a_foreign_folder(built, tmp_path):
  _, trees, run = built
  out = tmp_path / "mine"
  out.mkdir()
  (out / "notes.txt").write_text("precious")
  with pytest.raises(BuildError, match="not a dataset folder"):
    build_dataset([run], out, kernel_trees=trees)
  assert (out / "notes.txt").read_text() == "precious"
  with pytest.raises(BuildError, match="holds the build's input"):
    build_dataset([run], run.parent, kernel_trees=trees)


def test_status_enum_survives(built):
  statuses = set(_load(built[0].out_dir, "runs")["train"]["status"])
  assert statuses <= {s.value for s in Status}


def test_loading_helpers(built):
  from pallasbench_dataset import analysis
  from pallasbench_dataset.loading import load, to_pandas
  out = built[0].out_dir
  df = to_pandas(out)
  assert list(df["Op_Name"]) == ["relu", "gelu", "matmul_relu", "flash_attention"]
  assert analysis.fast_p(df, 1) == pytest.approx(3 / 4)  # gelu is fast but incorrect
  assert len(to_pandas(str(out), "runs")) == 8
  with pytest.raises(ValueError, match="local folder"):
    load(out, revision="v1.0")
  with pytest.raises(ValueError, match="unknown config"):
    load(out, "summary")
  with pytest.raises(ValueError, match="neither an existing folder nor a Hub repo id"):
    load(out / "missing")


def test_partial_build_lists_what_was_not_measured(tmp_path):
  """A run cut short (here: a resumed one) builds only with allow_partial, and says so."""
  trees = rf.write_tree(tmp_path)
  records = [r for r in rf.standard_records(trees)
             if not (r.variant == "tpu" and r.task in ("gelu", "matmul_relu"))]
  resume = {"command": "python -m builder.regenerate --resume --sizes large",
            "started_at": "2026-11-20T12:00:00+00:00", "finished_at": None, "git_commit": None,
            "sizes": ["large"], "variants": ["gpu"], "tasks": ["relu"], "argv": []}
  run = rf.write_run(tmp_path / "run", records, resumes=[resume])
  _refused(tmp_path, [run], r"lacks records for 2 evaluation\(s\): gelu \(tpu\), matmul_relu "
           r"\(tpu\).*--allow-partial", kernel_trees=trees)
  summary = build_dataset([run], tmp_path / "out", kernel_trees=trees, allow_partial=True)
  assert summary.tasks == 4
  card = (tmp_path / "out" / "README.md").read_text()
  assert "### Not measured" in card and "3 evaluation(s)" in card
  assert "| relu | gpu | large |" in card  # planned by the resume, never measured
  assert resume["command"] in card
  rows = pd.read_parquet(tmp_path / "out" / "default" / "level_2-00000-of-00001.parquet")
  assert list(rows["Original_Status"]) == ["not_measured"]
