"""The card as a Hub user reads it: the source that measured the data shipped and archived at
its commit, the prompts and fix recipes, the tolerance, roofline, compile, input-set, clock,
threshold and budget sections, the limitations, the licence and the plots. Each test builds
from release 5's own records (`r5`: its two runs as session 11 committed them, and its kernels,
built by this builder) or from small synthetic runs. Tests named `test_data_*` read the
published folder `data/` itself.
"""
# pylint: disable=protected-access  (the builder's internals are what these call)

import dataclasses
import io
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tarfile

import pandas as pd
import pytest

from builder import plots, sections, source as shipped_source, training
from builder import records as rec
from builder.build import build_dataset
from builder.records import BuildError
from builder.trees import KernelTrees
from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evolve.prompt import GPU_RULES
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.schema import Status
from tests import runfixtures as rf
from tests.paths import RELEASE_5_KERNELS, RELEASE_5_PACKS, REPO

DATA = REPO / "data"


def _section(text: str, title: str) -> str:
  return text.split(f"{title}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


@pytest.fixture(scope="module")
def r5_inputs(tmp_path_factory):
  """Release 5's two runs and its kernel trees, unpacked."""
  root = tmp_path_factory.mktemp("r5-inputs")
  for pack in (*RELEASE_5_PACKS, RELEASE_5_KERNELS):
    with tarfile.open(pack) as t:
      t.extractall(root, filter="data")
  return root


@pytest.fixture(scope="module")
def r5(r5_inputs, tmp_path_factory):
  """Release 5's records and kernels built by this builder."""
  out = tmp_path_factory.mktemp("r5") / "data"
  build_dataset(sorted(r5_inputs.glob("h200-133eada-run*")), out,
                kernel_trees=KernelTrees.within(r5_inputs))
  return out


@pytest.fixture(scope="module")
def r5_card(r5):
  return (r5 / "README.md").read_text()


@pytest.fixture(scope="module")
def r5_runs(r5_inputs):
  return [rec.read_run(p) for p in sorted(r5_inputs.glob("h200-133eada-run*"))]


# ---------------------------------------------------------------------------------------------
# 1. The code that measured the release travels with it, checked to be that commit.

def _tar_of(path: pathlib.Path, commit: str, files: dict[str, str]) -> pathlib.Path:
  """A tar as `git archive` writes it: the commit id in the pax header's comment."""
  with tarfile.open(path, "w", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}) as t:
    for name, text in files.items():
      data = text.encode()
      info = tarfile.TarInfo(f"src/{name}")
      info.size = len(data)
      t.addfile(info, io.BytesIO(data))
  return path


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
  root = tmp_path_factory.mktemp("synthetic")
  trees = rf.write_tree(root / "trees")
  records = rf.standard_records(trees)
  runs = [rf.write_run(root / name, records, rf.artifacts_for(records)) for name in ("r1", "r2")]
  return root, trees, runs


def test_the_measuring_commits_source_is_shipped_and_the_card_says_how_to_use_it(synthetic):
  root, trees, runs = synthetic
  tar = _tar_of(root / "src.tar", rf.ENV.git_commit, {"pyproject.toml": "[project]\n"})
  out = build_dataset(runs, root / "with-source" / "data", kernel_trees=trees, source=tar).out_dir
  shipped = out / "source" / shipped_source.name_of(rf.ENV.git_commit)
  assert shipped.read_bytes() == tar.read_bytes()
  card = (out / "README.md").read_text()
  assert f"`source/{shipped.name}` is the project's source at commit `{rf.ENV.git_commit}`" in card
  assert f"tar -xf source/{shipped.name}" in card
  assert f"--source data/source/{shipped.name}" in card  # the rebuild ships it again


def test_a_source_of_another_commit_is_refused(synthetic):
  root, trees, runs = synthetic
  other = _tar_of(root / "other.tar", "f" * 40, {"pyproject.toml": ""})
  with pytest.raises(BuildError, match="measured at 0123456789abcdef"):
    build_dataset(runs, root / "refused" / "data", kernel_trees=trees, source=other)


def test_a_checkout_is_archived_at_the_measuring_commit(synthetic, tmp_path):
  root, trees, _ = synthetic
  repo = tmp_path / "repo"
  (repo / "data").mkdir(parents=True)
  (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
  (repo / "data" / "README.md").write_text("the dataset folder: not shipped twice\n")
  git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
  subprocess.run([*git, "init", "-q"], check=True)
  subprocess.run([*git, "add", "."], check=True)
  subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
  commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
  env = dataclasses.replace(rf.ENV, git_commit=commit)
  records = [dataclasses.replace(r, environment=env) for r in rf.standard_records(trees)]
  run = rf.write_run(tmp_path / "run", records, git_commit=commit)
  out = build_dataset([run], tmp_path / "out" / "data", kernel_trees=trees, source=repo).out_dir
  (tar,) = (out / "source").iterdir()
  assert shipped_source.commit_of(tar) == commit
  with tarfile.open(tar) as t:
    names = t.getnames()
  assert f"{tar.stem}/pyproject.toml" in names and not any("/data/" in n for n in names)


def test_data_ships_the_source_that_measured_it_and_it_runs(tmp_path):
  (tar,) = (DATA / "source").glob("*.tar")
  commits = {r.environment.git_commit for p in (DATA / "results").iterdir()
             for r in rec.read_run(p).records}
  assert {shipped_source.commit_of(tar)} == commits
  assert tar.stat().st_size < 10 * 2**20
  with tarfile.open(tar) as t:
    t.extractall(tmp_path, filter="data")
  (src,) = tmp_path.iterdir()
  assert (src / "pyproject.toml").is_file() and not (src / "data").exists()
  proc = subprocess.run([sys.executable, "-m", "builder.regenerate", "--help"], cwd=src,
                        capture_output=True, text=True, timeout=120,
                        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(src)})
  assert proc.returncode == 0 and "--from-results" in proc.stdout, proc.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# 2. A prompt states the rules of the backend its answer holds, and the judge's error once.

def test_prompts_of_mosaic_gpu_answers_state_mosaic_gpus_rules(r5):
  checked = 0
  for config, answer_column in (("sft", "completion"), ("preference", "chosen")):
    for split in ("train", "test"):
      df = pd.read_parquet(r5 / config / f"{split}-00000-of-00001.parquet")
      for prompt, answer in zip(df["prompt"], df[answer_column]):
        text, code = prompt[0]["content"], answer[0]["content"]
        if "wgmma" in code:
          checked += 1
          assert GPU_RULES not in text and training.MOSAIC_GPU_RULES in text
        else:
          assert GPU_RULES in text
  assert checked >= 2 * 10  # the ten Mosaic GPU kernels, in sft and preference


def test_fix_prompts_give_the_judges_error_once(r5):
  df = pd.read_parquet(r5 / "sft" / "train-00000-of-00001.parquet")
  fixes = df[df["prompt_kind"] == "fix"]
  assert len(fixes)
  def words(text):
    return " ".join(text.split())
  for text in (p[0]["content"] for p in fixes["prompt"]):
    verdict = text.split("Verdict on ", 1)[1].split("\n\nWrite a version", 1)[0]
    head, _, error = verdict.partition("\n- error: ")
    reasons = [ln.removeprefix("- ") for ln in head.splitlines()[1:]]
    assert len(set(reasons)) == len(reasons)
    assert not any(words(reason) in words(error) for reason in reasons), verdict


# ---------------------------------------------------------------------------------------------
# 3. The tolerance table's atol is the records' rule: a fraction of the reference's RMS.

def test_tolerance_table_shows_atol_as_a_fraction_of_the_reference_rms(r5_card):
  table = r5_card.split("| precision | output | class | rtol | atol |", 1)[1].split("\n\n", 1)[0]
  rows = [r for r in table.splitlines() if r.startswith("| float32")]
  assert len(rows) == 4 and all("× RMS(reference)" in r for r in rows)
  assert "| float32 | float32 | exact | 1e-05 | 1e-06 × RMS(reference) |" in table


# ---------------------------------------------------------------------------------------------
# 4. The roofline's roof is the ceilings table's, every kernel is shown or named, labels read.

def test_roofline_roof_is_the_ceilings_tables_and_zero_flop_kernels_are_named(r5, r5_card):
  shown = plots.content_of((r5 / "plots" / "roofline.png").read_bytes())
  (axes,) = shown["axes"]
  (roof,) = [e for e in axes["legend"] if "GB/s" in e]
  table = r5_card.split("| run | GPU | copy GB/s |", 1)[1].split("\n\n", 1)[0]
  run1 = next(r for r in table.splitlines() if r.startswith("| h200-133eada-run1"))
  _, _, _, copy, read, matmul, *_ = [c.strip() for c in run1.split("|")]
  assert f"{max(float(copy), float(read)):.1f} GB/s" in roof and f"{matmul} TFLOP/s" in roof
  assert "h200-133eada-run1" in roof and "4628.1" not in roof
  (note,) = [t[0] for t in shown["texts"]]
  assert "embedding_lookup (medium)" in note and "embedding_lookup (large)" in note
  assert all(t[3] >= 7 for t in axes["texts"])


# ---------------------------------------------------------------------------------------------
# 5. The speedup plot names its size and run, its bars start at 1.0, failing originals show.

def test_speedup_plot_says_size_and_run_bars_start_at_one_and_failures_are_marked(r5):
  (axes,) = plots.content_of((r5 / "plots" / "speedup.png").read_bytes())["axes"]
  assert "size medium" in axes["title"] and "run h200-133eada-run1" in axes["title"]
  assert axes["bars"] and all(bar[0] == 1.0 for bar in axes["bars"])
  default = pd.concat(pd.read_parquet(p) for p in sorted((r5 / "default").glob("*.parquet")))
  failed = int((default["Original_Status"] != Status.PASS.value).sum())
  (marks,) = [ln for ln in axes["lines"] if ln["label"] == "original kernel fails (no speedup)"]
  assert failed == 30 and len(marks["y"]) == failed


# ---------------------------------------------------------------------------------------------
# 6. Compile conditions per run, overlap named as what it counts, spread as |b - a| / a.

def test_compile_paragraph_is_per_run_with_the_cards_own_spread(r5_card, r5_runs):
  section = _section(r5_card, "### Compile time")
  assert "180 of 180" not in section and "running at once" not in section
  assert "`h200-133eada-run1`: 90 fixed kernel(s) compiled" in section
  assert "overlapping compiles median 12, max 33 (90 of 90" in section.replace("\n  ", " ")
  first, second = ({EvalKey.of(r): r.compile.compile_s for r in run.records
                    if r.variant == "gpu" and r.compile and r.compile.compile_s}
                   for run in r5_runs)
  spreads = [abs(second[k] - a) / a for k, a in first.items() if k in second]
  expected = f"median {statistics.median(spreads):.0%}, max {max(spreads):.0%}"
  assert expected in section.replace("\n  ", " ")


# ---------------------------------------------------------------------------------------------
# 7. Numbers read as numbers; no stale text; the threshold in the headers.

def test_input_sets_clocks_and_clock_reasons_read_as_numbers(r5_card):
  sets = re.search(r"input sets rotated between\s+calls: ([^.]*)\.", r5_card).group(1)
  counts = [int(m) for m in re.findall(r"(\d+) \(\d+\)", sets)]
  assert counts == sorted(counts) and counts[:3] == [1, 2, 3]
  state = r5_card.split("| run | GPU | L2 MiB |", 1)[1].split("\n\n", 1)[0]
  assert "e+03" not in state and "| 1965 | 1980 | 3201 |" in state
  assert "0x4 (SW power cap)" in state
  assert sections.hardware.clock_event_reasons("0x0000000000000044") == (
      "0x44 (SW power cap, HW thermal slowdown)")
  assert sections.hardware.clock_event_reasons("0x0") == "0x0 (none)"


def test_no_stale_text_of_earlier_releases_and_judges(r5_card):
  assert "(release 2 on)" not in r5_card
  assert "`judge_version` 1" not in r5_card and "judge version 2 also" not in r5_card


def test_the_over_threshold_table_shows_the_change_and_headers_name_the_threshold(r5_card):
  above = r5_card.split("whose kernel-time difference exceeds 5%", 1)[1].split("\n\n", 2)[1]
  for row in above.splitlines()[2:]:
    cells = [c.strip() for c in row.split("|")]
    assert cells[6] != cells[7], row  # runtime_a_ms and runtime_b_ms differ as printed
  assert "n_above" not in r5_card and r5_card.count("| n above 5% |") == 2


# ---------------------------------------------------------------------------------------------
# 8. Limitations: load-dependent timeouts; both runs on one GPU, back to back.

def test_limitations_name_load_dependent_timeouts_and_same_gpu_back_to_back(r5_card):
  limits = " ".join(_section(r5_card, "## Limitations").split())
  assert "**Timeouts depend on load**: each compile had a 60 s budget" in limits
  assert "up to 15 compiles side by side" in limits
  assert "1 repeated evaluation(s) timed out in one run and not in the other" in limits
  assert "**One GPU, back to back**" in limits
  assert "GPU-b672a480-1179-9640-da83-fdad741572cd" in limits and "same-GPU" in limits


# ---------------------------------------------------------------------------------------------
# 9. Which run the counts are from; the eager column's exemption; the claim's reference;
#    the licence files.

def test_protocol_counts_and_ceiling_sources_name_their_run(r5_card):
  protocol = " ".join(_section(r5_card, "## Measurement protocol").split())
  assert "(`primary` in `runs`: run `h200-133eada-run1`)" in protocol
  assert "- `h200-133eada-run1`: bandwidth baseline: 2;" in protocol
  assert "- `h200-133eada-run2`: bandwidth baseline: 2;" in protocol


def test_the_eager_column_is_exempted_from_the_ceilings_by_name(r5_card):
  protocol = " ".join(_section(r5_card, "## Measurement protocol").split())
  assert "the eager reference's is not checked against them" in protocol
  assert "| reduce_max | gpu | large | float32 |" in r5_card  # the eager rate above its ceiling


def test_the_claim_on_the_public_rows_names_its_evidence(r5_card):
  intro = " ".join(r5_card.split("## Contents", 1)[0].split())
  assert ("published numbers that no code produced: its "
          "`data/pallasbench_sakana_style.jsonl`") in intro
  assert "scripts/gen_full_pallasbench.py" in intro and "runs no kernel" in intro


def test_the_folder_carries_the_licence_and_its_notice(r5):
  assert (r5 / "LICENSE").read_text() == (REPO / "LICENSE").read_text()
  notice = (r5 / "NOTICE").read_text()
  assert "https://github.com/Tyronita/PallasBench" in notice and "Apache License" in notice
  assert "kernels_tpu/" in notice and "FIX_REASON" in notice


# ---------------------------------------------------------------------------------------------
# #39.5: the card lists only the configs built; its fix recipe works inside a git checkout.

def test_a_card_lists_only_the_fine_tuning_configs_built(tmp_path):
  trees = rf.write_tree(tmp_path / "trees")
  records = [rf.record(trees, t, v, device="cpu", comparable=False)
             for t in rf.TASKS for v in ("gpu", "tpu")]  # every original passes: no pair
  run = rf.write_run(tmp_path / "cpu-run", records)
  out = build_dataset([run], tmp_path / "cpu" / "data", kernel_trees=trees).out_dir
  card = (out / "README.md").read_text()
  assert (out / "sft").is_dir() and not (out / "preference").exists()
  assert "`preference`" not in card and "`sft`" in card


def _fix_recipes(card: str) -> list[str]:
  section = _section(card, "## How to apply the fix")
  block = section.split("```bash\n", 1)[1].split("```", 1)[0]
  git_line = re.search(r"`(git apply --directory=[^`]*)`", section).group(1)
  return [block, "mkdir fixed && cp -r kernels_tpu fixed/ && cd fixed\n" + git_line
          + "\ndiff -r kernels_gpu ../kernels_gpu && echo identical\n"]


def test_the_cards_fix_recipes_work_inside_a_git_checkout(r5, r5_card, tmp_path):
  for i, recipe in enumerate(_fix_recipes(r5_card)):
    clone = tmp_path / f"clone{i}"
    clone.mkdir()
    for name in ("kernels_tpu", "kernels_gpu"):
      shutil.copytree(r5 / name, clone / name)
    shutil.copyfile(r5 / "fix.patch", clone / "fix.patch")
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    proc = subprocess.run(["bash", "-ec", recipe], cwd=clone, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("identical"), (
        recipe, proc.stdout[-1000:], proc.stderr[-1000:])


# ---------------------------------------------------------------------------------------------
# #36/#38: judge 3's stage budgets in the protocol; budget overruns beside timeouts between
# runs, at either precision, and the reason of a changed verdict that is a rejection.

def test_judge_3_names_each_stages_budget_and_that_an_overrun_is_a_kept_rejection(
    r5_card, tmp_path, monkeypatch):
  trees = rf.write_tree(tmp_path / "trees")
  run = rf.write_run(tmp_path / "run", [dataclasses.replace(r, judge_version="3")
                                        for r in rf.standard_records(trees)])
  def protocol(name):
    out = build_dataset([run], tmp_path / name / "data", kernel_trees=trees).out_dir
    return _section((out / "README.md").read_text(), "## Measurement protocol")
  text = protocol("real")
  gpu, cpu = budgets.STAGE_BUDGETS_S["gpu"], budgets.STAGE_BUDGETS_S["cpu"]
  for stage in (budgets.EXPORT, budgets.COMPILE, budgets.CORRECTNESS, budgets.TIMING):
    assert f"\n  - {stage}: {gpu[stage]:.0f} s / {cpu[stage]:.0f} s\n" in text
  words = " ".join(text.split())
  assert "Each stage that works on the candidate has its own time budget" in words
  assert ("its process is killed and the record is `rejected`, with a reason naming the stage "
          "and its budget; that is a verdict on the candidate, which the verdict cache keeps"
          ) in words
  monkeypatch.setattr(budgets, "STAGE_BUDGETS_S", {"gpu": {"a stage": 1234.0},
                                                   "cpu": {"a stage": 4321.0}})
  patched = protocol("patched")
  assert "\n  - a stage: 1234 s / 4321 s\n" in patched and f"- {budgets.EXPORT}:" not in patched
  assert "own time budget" not in r5_card  # judge 2's records: no such stages


def test_judge_4_s_records_describe_inputs_drawn_for_each_call_not_rotated(r5_card, tmp_path):
  """A release of judge 4's records says how its timing fed the calls (drawn for each, the L2
  flushed), not the rotation of judges 1-3, which the cards of their records keep."""
  trees = rf.write_tree(tmp_path / "trees")
  run = rf.write_run(tmp_path / "run", [dataclasses.replace(r, judge_version="4")
                                        for r in rf.standard_records(trees)])
  out = build_dataset([run], tmp_path / "data", kernel_trees=trees).out_dir
  words = " ".join(_section((out / "README.md").read_text(), "## Measurement protocol").split())
  assert "Each call's inputs are drawn from new seeds just before it" in words
  assert "- **Ceilings** measured in the same run" in words
  assert "rotated between calls" not in words and "rotated between calls" in " ".join(
      r5_card.split())


@pytest.fixture(scope="module")
def overruns(tmp_path_factory):
  """Two runs at both precisions; the second's verdicts differ: float32 relu/gpu ran past the
  correctness runs' budget and flash_attention/gpu timed out, bfloat16 relu/tpu ran past the
  compile budget (a reason longer than the table shows) and matmul_relu/tpu was rejected for
  something else."""
  root = tmp_path_factory.mktemp("overruns")
  trees = rf.write_tree(root / "trees")
  f32 = rf.standard_records(trees)
  half = [dataclasses.replace(r, precision="bfloat16") for r in rf.standard_records(trees)]
  failed = dict(correct=False, runtime_ms=None, baseline_ms=None)
  compile_out = "compile stage: " + budgets.compile_overrun(60.0, "ptxas, " + "x" * 200)
  again = {("relu", "gpu", "float32"): dict(status=Status.REJECTED, reasons=(
               budgets.overrun(budgets.CORRECTNESS, 120.0),)),
           ("flash_attention", "gpu", "float32"): dict(status=Status.TIMEOUT, error="slow"),
           ("relu", "tpu", "bfloat16"): dict(status=Status.REJECTED, reasons=(compile_out,)),
           ("matmul_relu", "tpu", "bfloat16"): dict(status=Status.REJECTED, reasons=(
               "stateful ops ['rng'] in the artifact",))}
  second = [rf.record(trees, r.task, r.variant, precision=r.precision, **failed,
                      **again[r.task, r.variant, r.precision])
            if (r.task, r.variant, r.precision) in again else r for r in f32 + half]
  both = ["float32", "bfloat16"]
  runs = [rf.write_run(root / "r1", f32 + half, precisions=both),
          rf.write_run(root / "r2", second, precisions=both)]
  out = build_dataset(runs, root / "data", kernel_trees=trees).out_dir
  return (out / "README.md").read_text()


def test_limitations_count_budget_overruns_that_flipped_at_either_precision(overruns):
  limits = " ".join(_section(overruns, "## Limitations").split())
  assert ("3 repeated evaluation(s) timed out or were rejected at a stage's budget in one run "
          "and not in the other") in limits  # not matmul_relu's rejection for stateful ops


def test_the_changed_verdicts_show_a_rejections_reason_shortened(overruns):
  repro = overruns.split("### Reproducibility\n", 1)[1].split("\n## ", 1)[0]
  float32, bf16 = repro.split("#### bfloat16\n")
  assert ("| relu | gpu | medium | r1 | r2 | pass | rejected | – | – | – | the correctness runs "
          "stage ran past its 120 s budget; its process was killed |") in float32
  assert "| flash_attention | gpu | medium | r1 | r2 | pass | timeout | – | slow | – | – |" in (
      float32)
  assert "`reason_a`, `reason_b`: a `rejected` verdict's first reason, shortened" in " ".join(
      bf16.split())
  assert ("| matmul_relu | tpu | medium | r1 | r2 | pass | rejected | – | – | – | stateful ops "
          "\\['rng'\\] in the artifact |") in bf16  # brackets escaped: no link
  (row,) = [ln for ln in bf16.splitlines() if ln.startswith("| relu | tpu |")]
  reason = row.split(" | ")[-1].removesuffix(" |")
  assert reason.startswith("compile stage: the compile did not finish within the 60 s compile "
                           "budget (ptxas, xxx") and reason.endswith("…") and len(reason) == 100


def test_a_timeout_in_one_run_and_an_overrun_in_the_other_is_no_flip():
  """Both verdicts are ones a loaded host can cause: the evaluation did not finish in either
  run. A rejection for another reason against a pass is no flip either."""
  over = budgets.overrun(budgets.TIMING, 200.0)
  def changes(*rows):
    return pd.DataFrame([dict(status_a=a, status_b=b, reasons_a=ra, reasons_b=rb)
                         for a, b, ra, rb in rows])
  f32 = changes(("timeout", "rejected", [], [over]), ("rejected", "pass", ["stateful ops"], []))
  bf16 = changes(("rejected", "timeout", [over], []), ("pass", "rejected", [], ["x", over]))
  nothing = dataclasses.make_dataclass("Nothing", [("published", list)])([])
  facts = sections.limitations.load_facts([], nothing, f32, None, bf16)
  assert (facts["flipped"], facts["flipped_overruns"]) == (1, True)
  facts = sections.limitations.load_facts([], nothing, changes(("pass", "timeout", [], [])))
  assert (facts["flipped"], facts["flipped_overruns"]) == (1, False)
