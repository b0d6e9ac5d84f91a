"""`python -m builder.regenerate` as a user meets it: the whole job on the CPU, errors before
minutes of measuring, help for every option."""

import json

import datasets
import pytest

from builder import regenerate
from pallasbench_dataset.evaluation.pipeline import suite


def test_every_option_has_help():
  parser = regenerate.build_parser()
  missing = [a.option_strings for a in parser._actions  # pylint: disable=protected-access
             if a.option_strings and a.help in (None, "")]
  assert not missing


def test_measure_build_and_load_end_to_end(tmp_path, capsys):
  """The README's main job, one task: measured through the Dask pipeline, built, loaded."""
  out, run = tmp_path / "dataset", tmp_path / "run"
  code = regenerate.main(["--device", "cpu", "--tasks", "relu", "--variants", "gpu,tpu",
                          "--cpu-workers", "1", "--results", str(run), "--out", str(out)])
  assert code == 0, capsys.readouterr().err[-3000:]
  records = suite.read_records(run)
  assert sorted((r.variant, r.status.value) for r in records) == [("gpu", "pass"), ("tpu", "pass")]
  assert json.loads((run / suite.MANIFEST).read_text())["command"].startswith(
      "python -m builder.regenerate --device cpu --tasks relu")
  default = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"), split="level_1")
  (row,) = default.to_list()
  gpu = next(r for r in records if r.variant == "gpu")
  assert row["Op_Name"] == "relu" and row["Size"] == "small"
  assert row["Pallas_Speedup_Compiled"] == pytest.approx(gpu.speedup)
  assert row["Pallas_Speedup_Native"] == pytest.approx(gpu.speedup_eager)


def test_push_without_a_token_fails_before_measuring(tmp_path, monkeypatch, capsys):
  monkeypatch.delenv("HF_TOKEN", raising=False)
  monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no stored login either
  run = tmp_path / "run"
  code = regenerate.main(["--device", "cpu", "--tasks", "relu", "--results", str(run),
                          "--out", str(tmp_path / "out"), "--push", "--repo-id", "me/data"])
  assert code == 2
  err = capsys.readouterr().err
  assert "error: " in err and "token" in err
  assert not run.exists()  # nothing was measured


@pytest.mark.parametrize("argv, message", [
    (["--push", "--measure-only", "--repo-id", "me/data"], "leave out --measure-only"),
    (["--push", "--repo-id", "not a repo id"], "repo"),
    (["--resume"], "name that folder"),
    (["--kernel-trees", "/nonexistent"], "--kernel-trees takes a folder holding kernels_tpu/"),
])
def test_bad_combinations_are_refused_before_measuring(tmp_path, monkeypatch, capsys, argv, message):
  monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
  code = regenerate.main(["--device", "cpu", "--tasks", "relu", "--out", str(tmp_path / "o"), *argv])
  assert code == 2
  assert message in capsys.readouterr().err
  assert not (tmp_path / "o.runs").exists()


def test_resume_of_a_missing_folder_says_so(tmp_path, capsys):
  code = regenerate.main(["--device", "cpu", "--tasks", "relu", "--results",
                          str(tmp_path / "nowhere"), "--resume", "--measure-only"])
  assert code == 2
  assert "does not exist; leave out --resume" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "want"), [((), False), (("--memcheck",), True)])
def test_memcheck_runs_on_the_project_s_trees_only_when_asked(tmp_path, monkeypatch, flag, want):
  """A release run of the 90 shipped kernels would spend about 4.5 s more per evaluation under
  memcheck on an H200; candidates judged by evaluate() keep it (EvalOptions' default)."""
  seen = []
  monkeypatch.setattr(regenerate, "run_suite", lambda items, *a, **k: seen.extend(items) or 0)
  regenerate.main(["--device", "cpu", "--tasks", "relu", "--measure-only",
                   "--results", str(tmp_path / "run"), *flag])
  assert seen and {item.options.memcheck for item in seen} == {want}
