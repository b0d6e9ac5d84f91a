"""builder.build: fixture runs -> a dataset folder that `datasets` loads offline, strictly
validated, deterministic, and refused when the records cannot be trusted.

Every `datasets.load_dataset` here gets a cache directory of its own (the `load` fixture): a
warm shared cache returns a previous build's rows for a rebuilt folder at the same path.
"""

import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import datasets
import pandas as pd
import pytest
from huggingface_hub import DatasetCard

from tests import runfixtures as rf
from builder import sections
from builder import release
from builder.build import BuildError, build_dataset
from builder.rows import functional_source
from builder.trees import KernelTrees, fix_patch
from builder.validate import FolderError, validate_folder
from pallasbench_dataset import kernels, schema
from pallasbench_dataset.schema import Artifacts, ErrorType, Status
from pallasbench_dataset.tasks import TASKS, get_task

from tests.paths import REPO


def _hashes(folder: pathlib.Path) -> dict[str, str]:
  return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def load(tmp_path_factory):
  """`datasets.load_dataset(folder, config)` with a fresh cache directory for every call."""
  def _load(folder, config=None):
    cache = tmp_path_factory.mktemp("hf-cache")
    return datasets.load_dataset(str(folder), config, cache_dir=str(cache))
  return _load


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  root = tmp_path_factory.mktemp("build")
  trees = rf.write_tree(root)
  records = rf.standard_records(trees)
  run = rf.write_run(root / "run-medium", records, rf.artifacts_for(records))
  summary = build_dataset([run], root / "out", kernel_trees=trees, repo_id="org/pb")
  return summary, trees, run


def test_summary_counts(built):
  summary, _, _ = built
  assert dict(summary.rows["default"]) == {"level_1": 2, "level_2": 1, "level_3": 1}
  assert dict(summary.rows["runs"]) == {"train": 8}
  assert dict(summary.rows["artifacts"]) == {"train": 8}
  assert summary.tasks == 4 and not summary.complete and summary.headline == "medium"
  assert summary.folder_bytes == sum(p.stat().st_size for p in summary.out_dir.rglob("*")
                                     if p.is_file())
  assert summary.reproducibility is None
  assert summary.hardware == "h200"
  assert summary.default_repo_id("my-org") == "my-org/pallasbench-robust-gpu-h200"
  assert "4 of 45 tasks at medium; default: level_1 2, level_2 1, level_3 1; runs: train 8" in (
      summary.describe())


def test_folder_layout(built):
  summary, _, _ = built
  assert set(summary.files) == {
      "README.md", "LICENSE", "NOTICE", "default/level_1-00000-of-00001.parquet",
      "default/level_2-00000-of-00001.parquet", "default/level_3-00000-of-00001.parquet",
      "runs/train-00000-of-00001.parquet", "artifacts/train-00000-of-00001.parquet",
      "sft/train-00000-of-00001.parquet", "preference/train-00000-of-00001.parquet",
      "preference/test-00000-of-00001.parquet",
      "sakanaai_pallasbench.json", "fix.patch", "plots/speedup.png", "plots/roofline.png",
      "results/run-medium/manifest.json", "results/run-medium/records.jsonl",
      "results/run-medium/artifacts.jsonl.xz",
      *(f"kernels_{v}/{t}.py" for v in ("tpu", "gpu") for t in rf.TASKS)}
  assert not list(summary.out_dir.parent.glob(".out.*"))  # no staging or backup left behind


def test_loads_offline_with_the_schema_features(built, load):
  out = built[0].out_dir
  default = load(out)
  assert list(default) == ["level_1", "level_2", "level_3"]
  assert [default[s].num_rows for s in default] == [2, 1, 1]
  for split in default.values():
    assert split.features == schema.SUMMARY_FEATURES
  runs = load(out, "runs")
  assert runs["train"].features == schema.features_of(schema.RunRow)
  assert runs["train"].num_rows == 8
  artifacts = load(out, "artifacts")
  assert artifacts["train"].features == schema.features_of(schema.ArtifactRow)
  assert artifacts["train"]["stablehlo"][:2] == ["module @relu_gpu {}", "module @relu_tpu {}"]


def test_loads_with_the_hub_unreachable(built, tmp_path):
  """Offline for real: a fresh interpreter with offline flags and a dead Hub endpoint."""
  code = ("import datasets, json, sys; print(json.dumps({c: {s: d.num_rows for s, d in "
          "datasets.load_dataset(sys.argv[1], c, cache_dir=sys.argv[2]).items()} "
          "for c in ('default', 'runs', 'artifacts')}))")
  env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
             HF_ENDPOINT="http://127.0.0.1:9")
  proc = subprocess.run([sys.executable, "-c", code, str(built[0].out_dir),
                         str(tmp_path / "cache")], env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr
  assert json.loads(proc.stdout.splitlines()[-1]) == {
      "default": {"level_1": 2, "level_2": 1, "level_3": 1}, "runs": {"train": 8},
      "artifacts": {"train": 8}}


def test_runs_rows_round_trip_the_records(built, load):
  _, _, run = built
  rows = load(built[0].out_dir, "runs")["train"].to_list()
  records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
  by_key = {(r["task"], r["variant"], r["size"]): r for r in records}
  assert [(r["task_id"], r["variant"]) for r in rows] == sorted(
      (r["task_id"], r["variant"]) for r in records)
  for row in rows:
    assert (row.pop("run_name"), row.pop("primary")) == ("run-medium", True)
    rebuilt = schema.from_json_dict(schema.EvalRecord, row)
    assert schema.to_json_dict(rebuilt) == by_key[(row["task"], row["variant"], row["size"])]


def test_default_rows_content(built, load):
  summary, trees, _ = built
  rows = {r["Op_Name"]: r for split in load(summary.out_dir).values() for r in split.to_list()}
  relu = rows["relu"]
  assert relu["Kernel_Name"] == "relu_gpu_fixed"
  assert relu["Pallas_Code"] == trees.path("gpu", "relu").read_text()
  assert relu["Pallas_Code_Original"] == trees.path("tpu", "relu").read_text()
  assert relu["JAX_Baseline_Code"] == get_task("relu").reference_source
  assert relu["JAX_Code_Functional"] == functional_source(get_task("relu"), "medium")
  assert (relu["Fix_Applied"], relu["Fix_Reason"]) == (
      "tile_relu", "blocks of relu exceeded the Triton limit; tiled")
  assert relu["Pallas_Runtime"] == 0.5 and relu["JAX_Baseline_Runtime"] == 1.0
  assert relu["Pallas_Speedup"] == pytest.approx(2.0)  # baseline / kernel
  assert relu["Pallas_Speedup_Compiled"] == pytest.approx(2.0)
  # release-1 style records carry no eager baseline: its columns are null, not zero
  assert relu["JAX_Native_Runtime"] is None and relu["Pallas_Speedup_Native"] is None
  assert relu["Original_Status"] == "pass"
  assert relu["Original_Speedup_Compiled"] == pytest.approx(0.5)
  assert relu["Original_Speedup_Native"] is None
  assert "Original_Speedup" not in relu
  assert (relu["Target_Hardware"], relu["Backend"]) == ("NVIDIA H200", "triton")
  assert relu["Framework"] == "JAX 0.11.2 / Pallas"
  assert relu["Compile_Time_s"] == pytest.approx(1.0)
  assert relu["Roofline_Fraction"] == pytest.approx(0.5)
  assert (rows["gelu"]["Correct"], rows["gelu"]["Status"]) == (False, "incorrect")
  assert rows["gelu"]["Error"] == "not allclose at (3, 4)"
  flash = rows["flash_attention"]
  assert flash["Original_Status"] == "error" and flash["Original_Speedup_Compiled"] is None
  assert "Mosaic block shape" in flash["Original_Error"]
  assert flash["Corrections"] == get_task("flash_attention").notes


def test_json_list_equals_default_config(built, load):
  out = built[0].out_dir
  text = (out / "sakanaai_pallasbench.json").read_text()
  data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON: {c}"))
  rows = [r for split in load(out).values() for r in split.to_list()]
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
  assert "copy from kernels_tpu/relu.py\ncopy to kernels_gpu/relu.py\n" in patch


_PATCH_TOOLS = {
    "git apply": ["git", "apply", "{patch}"],
    "patch -p1": ["patch", "-s", "-p1", "-i", "{patch}"],
}


def _tree_text(folder: pathlib.Path) -> dict[str, str]:
  return {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}


@pytest.mark.parametrize("tool", list(_PATCH_TOOLS))
def test_fix_patch_creates_the_gpu_tree_with_git_and_patch(tool, tmp_path):
  """On a temporary copy of kernels_tpu/, both tools give kernels_gpu/ and leave the originals;
  the trees cover a kernel unchanged by its fix, one without an original, one without a final
  newline."""
  if shutil.which(_PATCH_TOOLS[tool][0]) is None:
    pytest.skip(f"needs {tool}")
  trees = rf.write_tree(tmp_path / "src")
  (trees.gpu / "gelu.py").write_bytes(trees.path("tpu", "gelu").read_bytes())  # no change
  trees.path("tpu", "flash_attention").unlink()                                 # new file
  relu = trees.path("gpu", "relu")
  relu.write_text(relu.read_text().rstrip("\n"))                               # no final newline
  patch = tmp_path / "fix.patch"
  patch.write_text(fix_patch(trees))
  work = tmp_path / "work"
  shutil.copytree(trees.tpu, work / "kernels_tpu", ignore=shutil.ignore_patterns("__init__.py"))
  before = _tree_text(work / "kernels_tpu")
  command = [part.format(patch=patch) for part in _PATCH_TOOLS[tool]]
  proc = subprocess.run(command, cwd=work, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  assert _tree_text(work / "kernels_gpu") == {
      name: text for name, text in _tree_text(trees.gpu).items() if name != "__init__.py"}
  assert _tree_text(work / "kernels_tpu") == before


def test_published_fix_patch_applies_with_git(built, tmp_path):
  summary, _, _ = built
  if shutil.which("git") is None:
    pytest.skip("needs git")
  shutil.copytree(summary.out_dir / "kernels_tpu", tmp_path / "kernels_tpu")
  subprocess.run(["git", "apply", str(summary.out_dir / "fix.patch")], cwd=tmp_path, check=True)
  assert _tree_text(tmp_path / "kernels_gpu") == _tree_text(summary.out_dir / "kernels_gpu")


def test_card_metadata_and_numbers(built):
  out = built[0].out_dir
  card = DatasetCard.load(out / "README.md")
  data = card.data.to_dict()
  assert data["license"] == "apache-2.0"
  assert {"jax", "pallas", "gpu-kernels", "triton", "benchmark"} <= set(data["tags"])
  configs = {c["config_name"]: c for c in data["configs"]}
  assert set(configs) == {"default", "runs", "artifacts", "sft", "preference"}
  assert configs["default"].get("default") is True
  assert [f["split"] for f in configs["default"]["data_files"]] == ["level_1", "level_2",
                                                                     "level_3"]
  infos = {i["config_name"]: i for i in data["dataset_info"]}
  assert {s["name"]: s["num_examples"] for s in infos["default"]["splits"]} == {
      "level_1": 2, "level_2": 1, "level_3": 1}
  assert datasets.Features._from_yaml_list(infos["runs"]["features"]) == schema.features_of(
      schema.RunRow)
  text = card.text
  # fixed kernels: 4 tasks, 3 pass (gelu is incorrect), 3 of 4 faster than the baseline
  assert "| all | 4 | 3 | 75% | 75% | 0% | 1.529 |" in text
  # originals: 3 pass at 0.5x; flash_attention errored
  assert "| all | 4 | 3 | 75% | 0% | 0% | 0.500 |" in text
  assert "Mosaic block shape (512, 512)" in text
  assert "| run-medium | NVIDIA H200 | 9.0 | 570.86 | 12.8 |" in text
  # release-1 records carry no run info: the ceilings come from the manifest, per GPU
  assert "| run-medium | 0 | 3900.0 | 4000.0 | 400.0 | – | manifest |" in text
  assert "Method: cupti: 1 GiB copy and read-only sum." in text
  assert "org/pb" in text and "Reproducibility" not in text
  assert "against the reference run op by op" not in text  # no eager timings: no eager table
  assert "not comparable" not in text  # a GPU-only build has no CPU note
  # the fixture's records carry no judge version: release-1 (in-process) records
  assert "**Evaluator** (`judge_version` 1, release 1, 8 evaluation(s))" in text
  assert "**Judge**" not in text


def test_card_names_the_judge_of_each_record(tmp_path):
  trees = rf.write_tree(tmp_path)
  records = [dataclasses.replace(r, judge_version="2") if r.variant == "gpu" else r
             for r in rf.standard_records(trees)]
  run = rf.write_run(tmp_path / "run-medium", records, rf.artifacts_for(records))
  text = (build_dataset([run], tmp_path / "out", kernel_trees=trees, repo_id="org/pb")
          .out_dir / "README.md").read_text()
  assert "**Judge** (`judge_version` 2, 4 evaluation(s))" in text
  assert "**Evaluator** (`judge_version` 1, release 1, 4 evaluation(s))" in text
  assert text.index("**Judge**") < text.index("**Evaluator**")


def test_two_builds_are_byte_identical(built, tmp_path):
  summary, trees, run = built
  again = build_dataset([run], tmp_path / "again", kernel_trees=trees, repo_id="org/pb")
  assert _hashes(again.out_dir) == _hashes(summary.out_dir)


def test_rebuild_replaces_folder_and_regenerates_dataset_info(tmp_path, load):
  trees = rf.write_tree(tmp_path)
  records = rf.standard_records(trees)
  full = rf.write_run(tmp_path / "full", records, rf.artifacts_for(records))
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
      "default": [2], "runs": [4], "sft": [2], "preference": [1, 1]}
  assert load(out)["level_1"].num_rows == 2


def test_rebuilt_folder_shows_new_values_to_a_fresh_load(tmp_path, load):
  """A rebuild at the same path with another speedup: the next load must show it. With one
  cache directory shared by both loads, `datasets` returns the first build's rows."""
  trees = rf.write_tree(tmp_path)
  out = tmp_path / "out"
  for name, runtime, expected in [("a", 0.5, 2.0), ("b", 0.25, 4.0)]:
    records = [rf.record(trees, "relu", v, runtime_ms=runtime) for v in ("gpu", "tpu")]
    run = rf.write_run(tmp_path / name, records, tasks=("relu",))
    build_dataset([run], out, kernel_trees=trees)
    assert load(out)["level_1"]["Pallas_Speedup"] == [pytest.approx(expected)]


def test_folder_rebuilds_from_its_own_results_and_trees(tmp_path):
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))  # no artifacts
  out = build_dataset([run], tmp_path / "out", kernel_trees=trees).out_dir
  before = _hashes(out)
  published = KernelTrees(tpu=out / "kernels_tpu", gpu=out / "kernels_gpu")
  build_dataset([out / "results" / "run"], out, kernel_trees=published)
  assert _hashes(out) == before


def test_stale_card_is_caught(built, tmp_path, load):
  copy = shutil.copytree(built[0].out_dir, tmp_path / "copy")
  readme = copy / "README.md"
  text = readme.read_text()
  runs_info = text.index("config_name: runs", text.index("dataset_info:"))
  readme.write_text(text[:runs_info] + text[runs_info:].replace("num_examples: 8",
                                                                "num_examples: 9", 1))
  with pytest.raises(datasets.exceptions.NonMatchingSplitsSizesError):
    load(copy, "runs")
  with pytest.raises(FolderError, match="stale dataset_info"):
    validate_folder(copy)


def test_validate_folder_counts(built):
  counts = validate_folder(built[0].out_dir)
  assert {c: dict(s) for c, s in counts.items()} == {
      "default": {"level_1": 2, "level_2": 1, "level_3": 1}, "runs": {"train": 8},
      "artifacts": {"train": 8}, "sft": {"train": 6}, "preference": {"train": 3, "test": 1}}


def test_reproducibility_from_two_independent_runs(tmp_path, load):
  """Two synthetic runs: the card shows the distribution of the differences and names every
  evaluation above 5 %, and none below it."""
  trees = rf.write_tree(tmp_path)
  first = rf.standard_records(trees)
  factors = {("relu", "gpu"): 1.12, ("gelu", "tpu"): 0.93, ("flash_attention", "gpu"): 1.051,
             ("matmul_relu", "tpu"): 1.049, ("matmul_relu", "gpu"): 1.005}
  repeat = []
  for r in first:
    if r.runtime_ms is not None:
      r = rf.record(trees, r.task, r.variant, r.size,
                    runtime_ms=r.runtime_ms * factors.get((r.task, r.variant), 1.0),
                    baseline_ms=r.baseline_ms, status=r.status, correct=r.correct, error=r.error)
    repeat.append(r)
  runs = [rf.write_run(tmp_path / "a", first), rf.write_run(tmp_path / "b", repeat)]
  summary = build_dataset(runs, tmp_path / "out", kernel_trees=trees)
  stats = summary.reproducibility
  assert stats["n"] == 7  # 8 evaluations, flash_attention's original has no runtime
  assert stats["n_above"] == 3
  assert stats["max"] == pytest.approx(0.12)
  relu = [r for r in load(summary.out_dir, "runs")["train"].to_list()
          if (r["task"], r["variant"]) == ("relu", "gpu")]
  assert relu[0]["runtime_ms"] == 0.5  # the first run given is the row
  assert [(r["run_name"], r["primary"]) for r in relu] == [("a", True), ("b", False)]
  assert dict(summary.rows["runs"]) == {"train": 16}  # every record of both runs
  text = (summary.out_dir / "README.md").read_text()
  section = text[text.index("### Reproducibility"):text.index("### Compile time")]
  assert "timed in two independent runs (runs `a` and `b`)" in section
  assert "maximum 12.00%; 3 above 5%" in section
  for band in ["| 0% – 1% | 3 | 43% |", "| 1% – 2% | 0 | 0% |", "| 2% – 5% | 1 | 14% |",
               "| 5% – 10% | 2 | 29% |", "| > 10% | 1 | 14% |"]:
    assert band in section
  assert "| gpu | medium | 4 |" in section and "| tpu | medium | 3 |" in section
  above = section[section.index("Every evaluation whose kernel-time difference exceeds 5%"):]
  named = re.findall(r"^\| (\w+) \| (gpu|tpu) \| medium \| a \| b \|", above, re.M)
  assert named == [("relu", "gpu"), ("gelu", "tpu"), ("flash_attention", "gpu")]  # largest first
  assert (summary.out_dir / "results/b/records.jsonl").is_file()
  assert summary.verdict_changes == 0
  assert "Every repeated evaluation got the same verdict in both runs." in section


def test_verdicts_that_differ_between_runs_are_named(tmp_path):
  trees = rf.write_tree(tmp_path)
  first = rf.standard_records(trees)
  repeat = [rf.record(trees, r.task, r.variant, r.size, runtime_ms=None, baseline_ms=None,
                      status=Status.TIMEOUT, correct=False,
                      error="compile stage: the compile did not finish within the 60 s budget")
            if (r.task, r.variant) == ("gelu", "tpu") else r for r in first]
  runs = [rf.write_run(tmp_path / "a", first), rf.write_run(tmp_path / "b", repeat)]
  summary = build_dataset(runs, tmp_path / "out", kernel_trees=trees)
  assert summary.verdict_changes == 1
  assert "1 verdict(s) differ" in summary.describe()
  text = (summary.out_dir / "README.md").read_text()
  section = text[text.index("### Reproducibility"):text.index("### Compile time")]
  assert "1 repeated evaluation(s) got a different verdict in the other run" in section
  assert re.search(r"^\| gelu \| tpu \| medium \| a \| b \| pass \| timeout \| – \| compile "
                   r"stage: the compile did not finish", section, re.M)


def test_sizes_merge_and_headline_choice(tmp_path):
  trees = rf.write_tree(tmp_path)
  medium = rf.write_run(tmp_path / "m", rf.standard_records(trees))
  large = rf.write_run(tmp_path / "l", [rf.record(trees, "relu", "gpu", "large")],
                       tasks=("relu",), sizes=("large",), variants=("gpu",))
  summary = build_dataset([large, medium], tmp_path / "out", kernel_trees=trees)
  assert dict(summary.rows["runs"]) == {"train": 9}
  assert summary.tasks == 4 and summary.headline == "medium"  # medium when measured
  # a size nothing was measured at: the error names the flag and the size that works
  with pytest.raises(BuildError, match=r"headline size 'medium' lacks records for every task: "
                     r"the runs measured the fixed kernels at large; pass --headline-size large"):
    build_dataset([large], tmp_path / "out2", kernel_trees=trees, headline_size="medium")
  # left out, the headline follows what was measured
  only_large = build_dataset([large], tmp_path / "out3", kernel_trees=trees)
  assert only_large.headline == "large"
  assert dict(only_large.rows["default"]) == {"level_1": 1}
  assert "Headline\nsize: `large`" in (only_large.out_dir / "README.md").read_text()


def test_headline_is_the_first_size_the_run_planned(tmp_path):
  trees = rf.write_tree(tmp_path, ("relu",))
  records = [rf.record(trees, "relu", "gpu", size) for size in ("small", "large")]
  run = rf.write_run(tmp_path / "run", records, tasks=("relu",), sizes=("large", "small"),
                     variants=("gpu",))
  assert build_dataset([run], tmp_path / "out", kernel_trees=trees).headline == "large"


def test_refuses_runs_without_fixed_kernels(tmp_path):
  trees = rf.write_tree(tmp_path, ("relu",))
  run = rf.write_run(tmp_path / "run", [rf.record(trees, "relu", "tpu")], tasks=("relu",),
                     variants=("tpu",))
  _refused(tmp_path, [run], r"no record of the fixed kernels.*--variants gpu", kernel_trees=trees)


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
                       finished_at=None, per_device=[])
  summary = build_dataset([run, empty], tmp_path / "out", kernel_trees=trees)
  text = (summary.out_dir / "README.md").read_text()
  assert "| resumed | – |" in text
  assert "| resumed | – | – | – | – | – | not recorded |" in text


def test_cpu_run_is_marked_not_comparable(tmp_path, load):
  trees = rf.write_tree(tmp_path, ("relu",))
  records = [rf.record(trees, "relu", v, "small", device="cpu", comparable=False)
             for v in ("tpu", "gpu")]
  run = rf.write_run(tmp_path / "cpu", records, tasks=("relu",), sizes=("small",), device="cpu")
  summary = build_dataset([run], tmp_path / "out", kernel_trees=trees, headline_size="small")
  row = load(summary.out_dir)["level_1"][0]
  assert row["Backend"] == "interpret (CPU)"
  assert "**not comparable**" in (summary.out_dir / "README.md").read_text()


def test_builds_from_the_shipped_trees(tmp_path, load):
  relu_gpu, relu_tpu = (kernels.kernel_path(v, "relu") for v in ("gpu", "tpu"))
  trees = KernelTrees.shipped()
  records = [rf.record(trees, "relu", v) for v in ("tpu", "gpu")]
  run = rf.write_run(tmp_path / "run", records, tasks=("relu",))
  summary = build_dataset([run], tmp_path / "out")
  row = load(summary.out_dir)["level_1"][0]
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

  def broken(records, precision=None):  # a failure half-way through writing the new folder
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


def test_status_enum_survives(built, load):
  statuses = set(load(built[0].out_dir, "runs")["train"]["status"])
  assert statuses <= {s.value for s in Status}


def test_loading_helpers(built, tmp_path, monkeypatch):
  from pallasbench_dataset import analysis
  from pallasbench_dataset.loading import load, to_pandas
  # loading.load has no cache_dir: point the default cache at a folder of this test's own
  monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
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


# ---------------------------------------------------------------------------------------------
# Release 2: eager baseline, functional code, per-GPU run info, lost artifacts, the card's
# commands.

def _eager_records(trees):
  """The standard records with an eager baseline (3 ms) on every timed evaluation."""
  return [rf.record(trees, r.task, r.variant, r.size, runtime_ms=r.runtime_ms,
                    baseline_ms=r.baseline_ms, eager_ms=3.0 if r.runtime_ms else None,
                    status=r.status, correct=r.correct, error=r.error,
                    run=rf.run_info(gpu_index=i % 2), judge_version="2")
          for i, r in enumerate(rf.standard_records(trees))]


def test_eager_baseline_columns_and_card(tmp_path, load):
  trees = rf.write_tree(tmp_path)
  records = _eager_records(trees)
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records))
  out = build_dataset([run], tmp_path / "out", kernel_trees=trees, repo_id="org/pb").out_dir
  rows = {r["Op_Name"]: r for split in load(out).values() for r in split.to_list()}
  relu = rows["relu"]
  assert relu["JAX_Native_Runtime"] == 3.0 and relu["JAX_Baseline_Runtime"] == 1.0
  assert relu["Pallas_Speedup_Native"] == pytest.approx(6.0)    # eager / pallas
  assert relu["Pallas_Speedup_Compiled"] == pytest.approx(2.0)  # jit / pallas
  assert relu["Pallas_Speedup"] == relu["Pallas_Speedup_Compiled"]
  assert relu["Original_Speedup_Native"] == pytest.approx(1.5)  # 3 ms / 2 ms
  assert relu["Original_Speedup_Compiled"] == pytest.approx(0.5)
  text = (out / "README.md").read_text()
  eager = text[text.index("against the reference run op by op"):text.index("Original kernels (")]
  # passing: relu 6x, matmul_relu 3x/0.7 = 4.29x, flash_attention 3x/0.8 = 3.75x; gelu fails
  assert "| all | 4 | 3 | 75% | 75% | 75% | 4.586 |" in eager
  mapping = text[text.index("### Columns and the public schema"):text.index("## Hardware")]
  for public, ours in [("`JAX_XLA_Compiled_Runtime`", "`JAX_Baseline_Runtime`"),
                       ("`Pallas_Speedup_Native` (`CUDA_Speedup_Native`)",
                        "eager / pallas = `JAX_Native_Runtime / Pallas_Runtime`"),
                       ("`Pallas_Speedup_Compiled` (`CUDA_Speedup_Compile`)",
                        "jit / pallas = `JAX_Baseline_Runtime / Pallas_Runtime`"),
                       ("`JAX_Code_Module`", "`JAX_Baseline_Code`")]:
    line = next(l for l in mapping.splitlines() if l.startswith(f"| {public}"))
    assert ours in line


def test_refuses_inconsistent_eager_speedup(tmp_path):
  trees = rf.write_tree(tmp_path)
  records = rf.standard_records(trees)
  records[0] = rf.record(trees, "relu", eager_ms=3.0, speedup_eager=2.0)  # 3.0 / 0.5 is 6.0
  run = rf.write_run(tmp_path / "run", records)
  _refused(tmp_path, [run], r"speedup_eager 2.0 is not eager_baseline_ms / runtime_ms",
           kernel_trees=trees)


@pytest.mark.parametrize("spec", TASKS.values(), ids=lambda s: f"{s.task_id:02d}_{s.name}")
def test_functional_code_draws_the_registry_inputs(spec):
  """JAX_Code_Functional's get_inputs(seed) is the benchmark's make_inputs(size, seed)."""
  namespace = {"__name__": "functional"}
  exec(compile(functional_source(spec, "small"), f"{spec.name}_functional", "exec"), namespace)
  got, want = namespace["get_inputs"](7), spec.make_inputs("small", 7)
  assert len(got) == len(want)
  for g, w, item in zip(got, want, spec.inputs):
    assert (g.shape, g.dtype) == (w.shape, w.dtype), item.name
    assert (g == w).all(), f"{spec.name}: input {item.name} differs"


def test_functional_code_runs_on_its_own(tmp_path):
  """A cell written to a file runs with plain `python`, without this project on the path."""
  source = functional_source(get_task("layernorm_residual"), "small")
  (tmp_path / "functional.py").write_text(source)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  proc = subprocess.run([sys.executable, "functional.py"], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  shape = get_task("layernorm_residual").output_shape("small")
  assert proc.stdout.strip() == f"{shape} float32"
  assert "pallasbench" not in source.split("# The inputs of task")[1]  # nothing imported


def test_run_info_per_gpu_in_card_and_runs_config(tmp_path, load):
  trees = rf.write_tree(tmp_path)
  records = [dataclasses.replace(r, run=rf.run_info(
      gpu_index=1 if r.task in ("gelu", "flash_attention") else 0,
      copy=3800.0 if r.task in ("gelu", "flash_attention") else 3900.0))
      for r in rf.standard_records(trees)]
  run = rf.write_run(tmp_path / "run", records)
  out = build_dataset([run], tmp_path / "out", kernel_trees=trees).out_dir
  runs = load(out, "runs")["train"]
  assert [(r["task"], r["variant"], r["run"]["gpu_index"]) for r in runs][:4] == [
      ("relu", "gpu", 0), ("relu", "tpu", 0), ("gelu", "gpu", 1), ("gelu", "tpu", 1)]
  text = (out / "README.md").read_text()
  assert "| run | 0 | 3900.0 | 4000.0 | 400.0 | 4 | records |" in text
  assert "| run | 1 | 3800.0 | 4000.0 | 400.0 | 4 | records |" in text


def test_manifest_ceilings_of_every_gpu_in_card(tmp_path):
  """Records without run info (release 1): one line per GPU of the manifest, resumes too."""
  trees = rf.write_tree(tmp_path)
  ceilings = [{"copy_gbps": c, "read_gbps": 4000.0, "matmul_tflops": m, "method": "cupti"}
              for c, m in ((3900.0, 400.0), (3850.0, 410.0), (3700.0, 390.0))]
  resume = {"command": "python -m builder.regenerate --resume", "started_at": "x",
            "finished_at": "y", "git_commit": None, "sizes": ["medium"], "variants": ["gpu"],
            "tasks": ["relu"], "per_device": [{"device": 0, "ceilings": ceilings[2]}]}
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees), resumes=[resume],
                     per_device=[{"device": "0", "ceilings": ceilings[0]},
                                 {"device": "1", "ceilings": ceilings[1]}])
  text = (build_dataset([run], tmp_path / "out", kernel_trees=trees).out_dir
          / "README.md").read_text()
  table = text[text.index("| run | GPU | copy GB/s |"):text.index("Method:")]
  assert [l for l in table.splitlines() if l.startswith("| run |")][1:] == [
      "| run | 0 | 3900.0 | 4000.0 | 400.0 | – | manifest |",
      "| run | 1 | 3850.0 | 4000.0 | 410.0 | – | manifest |",
      "| run | 0 | 3700.0 | 4000.0 | 390.0 | – | manifest |"]


def test_records_whose_artifacts_were_lost_are_named(tmp_path):
  """A torn artifacts line and a missing one: each record is named; the build refuses unless
  allow_partial, and then the card lists them. A timeout record has none to lose."""
  trees = rf.write_tree(tmp_path)
  records = rf.standard_records(trees)
  records[7] = rf.record(trees, "flash_attention", "tpu", runtime_ms=None, baseline_ms=None,
                         status=Status.TIMEOUT, correct=False, error="timed out after 60 s",
                         error_type=ErrorType.TIMEOUT)
  lines = [json.dumps(schema.to_json_dict(a)) for a in rf.artifacts_for(records[:7])]
  lines[2] = lines[2][:40]  # gelu/gpu: torn by a disk full
  del lines[5]              # matmul_relu/tpu: never written
  run = rf.write_run(tmp_path / "run", records)
  (run / "artifacts.jsonl").write_text("\n".join(lines) + "\n")
  _refused(tmp_path, [run], r"2 record\(s\) have no line in their run's artifacts.jsonl: "
           r"run: gelu/gpu/medium, run: matmul_relu/tpu/medium\. .*--allow-partial",
           kernel_trees=trees)
  summary = build_dataset([run], tmp_path / "out", kernel_trees=trees, allow_partial=True)
  assert dict(summary.rows["artifacts"]) == {"train": 5}
  text = (summary.out_dir / "README.md").read_text()
  assert "### Artifacts missing" in text
  assert "| run | gelu | gpu | medium |" in text and "| run | matmul_relu | tpu | medium |" in text


def test_run_without_artifacts_file_needs_none(tmp_path):
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))  # no artifacts.jsonl
  summary = build_dataset([run], tmp_path / "out", kernel_trees=trees)
  assert "artifacts" not in summary.rows
  assert "Artifacts missing" not in (summary.out_dir / "README.md").read_text()


_COMMAND = re.compile(r"python -m ([\w.]+)((?: +[^\s`#\\]+)*)")
_PIP = re.compile(r"pip install -e \"?\.\[([\w,-]+)\]\"?")


def _card_commands(text: str) -> list[tuple[str, list[str]]]:
  """(module, flags) of every `python -m` command of the card's prose and code blocks."""
  text = text.replace("\\\n", " ")
  return [(m.group(1), re.findall(r"--[\w-]+", m.group(2))) for m in _COMMAND.finditer(text)]


def test_card_commands_and_extras_match_readme_and_pyproject(built):
  """Every `python -m` module and flag, and every pip extra, of the card is one the README
  documents (flags: also one regenerate accepts) and pyproject declares."""
  text = (built[0].out_dir / "README.md").read_text()
  body = text[text.index("# PallasBench-Robust"):]
  readme = (REPO / "README.md").read_text()
  extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
      "optional-dependencies"]
  commands = _card_commands(body.split("## Hardware and software")[0] +
                            body.split("## How to load")[1])  # not the runs' recorded commands
  assert {m for m, _ in commands} == {"builder.regenerate"}
  readme_flags = {f for m, flags in _card_commands(readme) if m == "builder.regenerate"
                  for f in flags}
  for module, flags in commands:
    assert f"python -m {module}" in readme
    assert set(flags) <= readme_flags, set(flags) - readme_flags
  installs = [set(m.group(1).split(",")) for m in _PIP.finditer(body)]
  assert installs and all(group <= set(extras) for group in installs)
  readme_extras = {e for m in _PIP.finditer(readme) for e in m.group(1).split(",")}
  gpu_extras = {e for group in installs for e in group if e.startswith("cuda")}
  assert gpu_extras == {sections.intro.GPU_EXTRA} and gpu_extras <= readme_extras


def test_card_uses_one_release_tag(built):
  text = (built[0].out_dir / "README.md").read_text()
  tags = set(re.findall(r"--tag (\S+)", text)) | set(re.findall(r'revision="([^"]+)"', text))
  assert tags == {release.TAG}
  assert release.NAME in text and "<org>" not in text


def test_readme_tags_the_release_as_the_card_does():
  """The README's push command tags the release with the card's tag (`builder.release.TAG`)."""
  readme = (REPO / "README.md").read_text().replace("\\\n", " ")
  assert set(re.findall(r"--tag (\S+)", readme)) == {release.TAG}


def test_card_citation(built):
  text = (built[0].out_dir / "README.md").read_text()
  bibtex = text[text.index("```bibtex"):text.index("## License")]
  assert "@misc{pallasbench_robust_h200_2026," in bibtex
  assert "year         = {2026}," in bibtex  # the measurements' year, not the build's
  assert r"howpublished = {\url{https://huggingface.co/datasets/org/pb}}," in bibtex
  assert "author       = {{PallasBench-Robust contributors}}," in bibtex
  assert f"{release.NAME} (tag {release.TAG})" in bibtex and "NVIDIA H200" in bibtex


def test_hardware_of_runs_names_the_default_repo(tmp_path):
  from builder.build import hardware_of  # pylint: disable=import-outside-toplevel
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))
  assert hardware_of([run]) == "h200"


def test_runs_table_names_the_commit_of_every_segment():
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  segment = lambda commit: SimpleNamespace(git_commit=commit)  # noqa: E731
  run = SimpleNamespace(manifest=SimpleNamespace(
      git_commit="a" * 40, resumes=(segment("b" * 40), segment("a" * 40), segment(None))))
  commits = sections.hardware._commits  # pylint: disable=protected-access
  assert commits(run) == "aaaaaaaaaaaa, bbbbbbbbbbbb"
  assert commits(SimpleNamespace(manifest=SimpleNamespace(git_commit=None, resumes=()))) is None
