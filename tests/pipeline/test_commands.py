"""The newcomer's path: refusals before measuring, commands that say what to run
next, paths that say what is wrong with them, tools that cannot write wrong data, and what a
newcomer looks for (a licence, the tasks, the report command, docs that exist).

Each command runs as a user runs it (its `main`, or a program), checked for its exit status,
its first lines and what it measured or wrote. Ctrl-C is in pipeline/test_interrupts.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from builder import plots, regenerate
from builder.push import PushError, find_token
from builder.records import BuildError, check_headline
from builder.trees import check_sha256
from pallasbench_dataset import autotune, evaluate as evaluate_cli, kernels, scaffold
from pallasbench_dataset.evaluate import DEFAULT_SIZE, evaluate, summary_text
from pallasbench_dataset.evaluation.pipeline import suite
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.kernels import MAX_FRAME_CHARS, KernelLoadError, candidate_frame, tree_dir
from pallasbench_dataset.population import __main__ as population_cli, run as population_run
from pallasbench_dataset.schema import EvalRecord, from_json_dict
from pallasbench_dataset.tasks import list_tasks
from tests import runfixtures as rf
from tests.paths import REPO, STAND_INS

ENV = {"PYTHONPATH": str(REPO)}
RELU = str(REPO / "tests" / "controls" / "pos_calls_reference_relu.py")
CPU_RELU = ["--device", "cpu", "--tasks", "relu", "--variants", "gpu", "--cpu-workers", "1"]


def _program(*argv: str, timeout: int = 120) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                        timeout=timeout, env={**os.environ, **ENV})


# ---------------------------------------------------------------------------------------------
# 1. A release is compared by what its plots show, not by their pixels.

def test_a_plot_is_compared_by_what_it_shows(tmp_path, monkeypatch):
  trees = rf.write_tree(tmp_path)
  records = rf.standard_records(trees)
  png = plots.roofline_png(records)
  shown = plots.content_of(png)
  (axes,) = shown["axes"]
  assert axes["title"] == "Roofline of the fixed kernels (NVIDIA H200)"
  assert axes["xlabel"] == "arithmetic intensity (FLOP / byte)"
  assert [t[0] for t in axes["texts"]] == [f"{r.task} (medium)" for r in records
                                           if r.variant == "gpu"]
  monkeypatch.setattr(plots, "_DPI", 101)  # other pixels, as another machine draws them
  other = plots.roofline_png(records)
  assert other != png and plots.content_of(other) == shown
  slower = [rf.record(trees, "relu", runtime_ms=0.9), *records[1:]]
  assert plots.content_of(plots.roofline_png(slower)) != shown
  assert plots.content_of(b"\x89PNG\r\n\x1a\n") is None


# ---------------------------------------------------------------------------------------------
# 2. Output paths are checked before the first evaluation; a build that fails after
#    measuring keeps the records and says how to build them.

def _foreign_folder(tmp: pathlib.Path) -> pathlib.Path:
  (tmp / "mine").mkdir()
  (tmp / "mine" / "notes.txt").write_text("my notes")
  return tmp / "mine"


def _below_a_file(tmp: pathlib.Path) -> pathlib.Path:
  (tmp / "file").write_text("x")
  return tmp / "file" / "ds"


def _a_file(tmp: pathlib.Path) -> pathlib.Path:
  (tmp / "r").write_text("x")
  return tmp / "r"


@pytest.mark.parametrize("make, flag, message", [
    (_foreign_folder, "--out", "exists and is not a dataset folder"),
    (_below_a_file, "--out", "is not a writable folder"),
    (_a_file, "--results", "is a file, not a run folder"),
])
def test_a_bad_output_path_is_refused_before_measuring(tmp_path, capsys, make, flag, message):
  path = make(tmp_path)
  out = ["--out", str(tmp_path / "ds")] if flag == "--results" else []
  code = regenerate.main([*CPU_RELU, *out, flag, str(path)])
  err = capsys.readouterr().err
  assert code == 2
  assert err.startswith("error: ") and message in err.splitlines()[0]
  assert not list(tmp_path.glob("*.runs")) and "measuring" not in err and "measured" not in err


def test_a_build_that_fails_after_measuring_says_how_to_build_what_was_kept(tmp_path, capsys):
  out, run = tmp_path / "ds", tmp_path / "run"
  code = regenerate.main([*CPU_RELU, "--results", str(run), "--out", str(out),
                          "--headline-size", "medium"])  # measured at small only
  err = capsys.readouterr().err
  assert code == 2, err[-3000:]
  assert [r.task for r in suite.read_records(run)] == ["relu"]  # measured, and kept
  (hint,) = [line for line in err.splitlines() if "are kept in" in line]
  command = shlex.split(hint.split("without measuring again: ", 1)[1])
  assert pathlib.Path(command[0]).samefile(sys.executable) and command[0] != "python"
  assert command[1:5] == ["-m", "builder.regenerate", "--from-results", str(run)]
  fixed = [a for a in command[3:] if a not in ("--headline-size", "medium")]
  assert regenerate.main(fixed) == 0, capsys.readouterr().err[-3000:]
  assert (out / "README.md").is_file() and len(suite.read_records(run)) == 1


# ---------------------------------------------------------------------------------------------
# 4. The autotuner refuses timings that are not comparable, and never tables them.

def test_autotune_refuses_a_host_without_a_gpu(tmp_path, capsys):
  results = tmp_path / "tune.jsonl"
  assert autotune.main(["--tasks", "relu", "--sizes", "small", "--results", str(results)]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: no GPU here") and "--allow-cpu" in err
  assert not results.exists()


def test_write_tables_never_writes_a_line_not_measured_on_a_gpu(tmp_path, monkeypatch, capsys):
  shutil.copy(tree_dir("gpu") / "relu.py", tmp_path / "relu.py")
  before = (tmp_path / "relu.py").read_text()
  gpu = {"task": "relu", "size": "medium", "platform": "gpu", "device_kind": "NVIDIA H200",
         "shape_class": "4x4", "best": {"block": 1024, "num_warps": 4}}
  cpu = {**gpu, "platform": "cpu", "device_kind": "cpu"}
  old_cpu = {k: v for k, v in cpu.items() if k != "platform"}  # a line without `platform`
  for lines in ([cpu], [gpu, old_cpu]):
    with pytest.raises(autotune.TuningError, match="not measured on a GPU"):
      autotune.write_tables(lines, tmp_path)
    assert (tmp_path / "relu.py").read_text() == before
  results = tmp_path / "tune.jsonl"
  results.write_text(json.dumps(cpu) + "\n")
  monkeypatch.setattr(autotune, "tree_dir", lambda variant: tmp_path)
  assert autotune.main(["--write-tables", str(results)]) == 2
  assert "not measured on a GPU" in capsys.readouterr().err
  assert (tmp_path / "relu.py").read_text() == before
  assert autotune.write_tables([gpu], tmp_path) == [str(tmp_path / "relu.py")]


# ---------------------------------------------------------------------------------------------
# 5. A kernel is a path or source text, unambiguously; a bad path says what is wrong.

@pytest.mark.parametrize("make, error, message", [
    (lambda t: _written(t / "k.txt", "def kernel(x):\n  return x\n"), KernelLoadError,
     "is not a .py file: a kernel is a Python file"),
    (lambda t: str(t), KernelLoadError, "is a directory: name the kernel's .py file in it"),
    (lambda t: t / "missing.py", KernelLoadError, "does not exist"),
    (lambda t: None, ValueError, "either as a path to its .py file (kernel=...) or as its source"),
])
def test_evaluate_says_what_is_wrong_with_the_kernel_argument(tmp_path, make, error, message):
  with pytest.raises(error, match=re.escape(message)):
    evaluate("relu", make(tmp_path), device="cpu")


def test_a_kernel_str_of_several_lines_is_its_source_text_as_the_design_says():
  """docs/design.md: `kernel` is a path or source text. No path holds a newline, so a str of
  several lines is the source; one line is a path (and a bad one says why, above)."""
  text = "def kernel(x, interpret=False):\n  return x\n"
  assert evaluate_cli._candidate(text, None) == (text, "<kernel source>")
  assert evaluate_cli._candidate(None, text) == (text, "<kernel source>")


def _written(path: pathlib.Path, text: str) -> str:
  path.write_text(text)
  return str(path)


def test_the_cli_says_a_kernel_directory_is_a_directory(tmp_path, capsys):
  assert evaluate_cli.main(["--task", "relu", "--kernel", str(tmp_path), "--device", "cpu"]) == 2
  assert capsys.readouterr().err == (f"error: {str(tmp_path)!r} is a directory: name the "
                                     "kernel's .py file in it\n")


# ---------------------------------------------------------------------------------------------
# 6. A kernel's exception names its own frame, and what it printed, in both views.

def test_a_kernel_exception_names_its_frame_and_output_in_both_views(tmp_path, capsys):
  path = tmp_path / "my_relu.py"
  path.write_text('"""relu that talks, then fails."""\n\n\ndef kernel(x, interpret=False):\n'
                  '  print("hello from my kernel")\n  raise ValueError("my kernel fails")\n')
  assert evaluate_cli.main(["--task", "relu", "--kernel", str(path), "--device", "cpu",
                            "--json"]) == 1
  data = json.loads(capsys.readouterr().out)
  frame = f'raised in the kernel at {path}:6 in kernel: raise ValueError("my kernel fails")'
  assert data["error"].splitlines() == ["ValueError: my kernel fails", frame]
  assert "hello from my kernel" in data["exporter_output"]
  summary = summary_text(from_json_dict(EvalRecord, data))
  assert f"  error: ValueError: my kernel fails\n    {frame}\n" in summary
  assert "  the kernel printed (" in summary and "    | hello from my kernel" in summary


def test_an_import_error_names_the_line_and_a_frame_is_bounded():
  with pytest.raises(KernelLoadError) as info:
    kernels.load_module("A = 1\nraise RuntimeError('boom')\n", "k.py")
  assert str(info.value) == ("importing k.py raised RuntimeError: boom\nraised in the kernel at "
                             "k.py:2 in <module>: raise RuntimeError('boom')")
  try:
    exec(compile("x = 1\nraise ValueError(" + "'a' * 0 + " * 200 + "'')\n", "long.py", "exec"), {})  # pylint: disable=exec-used
  except ValueError as e:
    frame = candidate_frame(e, "long.py", "x = 1\nraise ValueError(" + "'a' * 0 + " * 200 + "'')\n")
  assert frame.startswith("raised in the kernel at long.py:2 in <module>: raise ValueError(")
  assert len(frame) == MAX_FRAME_CHARS
  assert candidate_frame(ValueError("elsewhere"), "long.py") is None


# ---------------------------------------------------------------------------------------------
# 7. Long refusals summarise and name the flag that fixes them.

def test_refusals_count_what_they_list_and_name_the_flag(tmp_path):
  tasks = [s.name for s in list_tasks()][1:]
  missing = [EvalKey(t, v, "medium") for t in tasks for v in ("tpu", "gpu")]
  with pytest.raises(BuildError) as info:
    check_headline(missing, "medium", allow_partial=False)
  text = str(info.value)
  assert f"lacks records for {len(missing)} evaluation(s): gelu (tpu), gelu (gpu), silu (tpu), " \
         f"silu (gpu), sigmoid (tpu) and {len(missing) - 5} more. To build what was measured, " \
         "pass --allow-partial" in text
  assert len(text) < 400
  trees = rf.write_tree(tmp_path)
  stale = [rf.record(trees, t, v, s, kernel_sha256="0" * 64)
           for t in rf.TASKS for v in ("tpu", "gpu") for s in ("small", "medium")]
  with pytest.raises(BuildError) as info:
    check_sha256(stale, trees)
  assert f"{len(stale)} record(s) measured a kernel" in str(info.value)
  assert f"and {len(stale) - 5} more" in str(info.value)
  assert "pass --kernel-trees with it (e.g. --kernel-trees data" in str(info.value)


# ---------------------------------------------------------------------------------------------
# 8. The small ones.

def test_push_options_without_push_are_refused_before_measuring(tmp_path, capsys):
  code = regenerate.main([*CPU_RELU, "--out", str(tmp_path / "ds"), "--tag", "v2"])
  assert code == 2
  assert capsys.readouterr().err == ("error: --tag applies only to a push: add --push, or "
                                     "leave it out\n")
  assert not (tmp_path / "ds.runs").exists()


def test_the_no_token_message_names_what_the_command_line_accepts(tmp_path, monkeypatch):
  monkeypatch.delenv("HF_TOKEN", raising=False)
  monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
  with pytest.raises(PushError) as info:
    find_token(None)
  text = str(info.value)
  assert "`hf auth login`" in text and "export HF_TOKEN=hf_..." in text
  assert "or pass token=" not in text and "from Python, pass push_folder(..., token=...)" in text


def test_the_scaffold_keeps_an_existing_folder_unless_forced(tmp_path, capsys):
  argv = ["--framework", "openevolve", "--task", "relu", "--out", str(tmp_path)]
  assert scaffold.main(argv) == 0
  program = tmp_path / "openevolve" / "relu-gpu" / "initial_program.py"
  program.write_text("# my evolved kernel\n")
  capsys.readouterr()
  assert scaffold.main(argv) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: 1 scaffold folder(s) exist and hold files") and "--force" in err
  assert program.read_text() == "# my evolved kernel\n"
  assert scaffold.main(["--framework", "openevolve", "--all", "--out", str(tmp_path)]) == 2
  assert sorted(p.name for p in (tmp_path / "openevolve").iterdir()) == ["relu-gpu"]
  assert scaffold.main([*argv, "--force"]) == 0
  assert program.read_text() != "# my evolved kernel\n"


def test_list_options_take_spaces_and_commas_everywhere(tmp_path, capsys):
  args = regenerate.build_parser().parse_args(
      ["--tasks", "relu,gelu", "silu", "--variants", "gpu", "--sizes", "small,", "medium",
       "--levels", "1,2"])
  assert (args.tasks, args.variants, args.sizes, args.levels) == (
      ["relu", "gelu", "silu"], ["gpu"], ["small", "medium"], [1, 2])
  assert regenerate.build_parser().parse_args(["--variants", "tpu", "gpu"]).variants == ["tpu", "gpu"]
  with pytest.raises(SystemExit):
    regenerate.build_parser().parse_args(["--variants", "gpu,cuda"])
  assert "invalid choice(s) ['cuda']" in capsys.readouterr().err
  assert population_cli.main(["generate", "--out", str(tmp_path), "--count", "4",
                              "--tasks", "relu,gelu"]) == 0
  assert "wrote 4 candidates" in capsys.readouterr().out
  assert autotune.main(["--tasks", "relu,nope", "--sizes", "small", "--results", "r",
                        "--allow-cpu"]) == 2
  assert "unknown task(s) ['nope']" in capsys.readouterr().err


def test_evaluate_defaults_to_medium_on_a_gpu_like_the_other_commands(monkeypatch):
  asked = []
  monkeypatch.setattr(evaluate_cli, "run_items", lambda items, *a, on_result: asked.extend(items)
                      or on_result(None, None))
  for device, size in (("gpu", "medium"), ("cpu", "small")):
    monkeypatch.setattr(evaluate_cli, "resolve_device", lambda _, device=device, **words: device)
    evaluate("relu", RELU)
    assert asked.pop().size == size == DEFAULT_SIZE[device]
  assert evaluate_cli.build_parser().parse_args(["--task", "relu", "--kernel", RELU]).size is None
  assert population_run.DEFAULT_SIZE is DEFAULT_SIZE


# ---------------------------------------------------------------------------------------------
# 9. What a newcomer looks for.

def test_the_licence_is_the_apache_2_text_pyproject_declares():
  text = (REPO / "LICENSE").read_bytes()
  # sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt
  assert hashlib.sha256(text).hexdigest() == (
      "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30")
  assert 'license = "Apache-2.0"' in (REPO / "pyproject.toml").read_text()


def test_the_tasks_command_lists_the_tasks_and_shows_one():
  listed = _program("-m", "pallasbench_dataset.tasks")
  assert listed.returncode == 0 and listed.stderr == ""  # no runpy warning either
  lines = listed.stdout.splitlines()
  assert lines[0].split() == ["id", "task", "level", "category", "tolerance"]
  assert [line.split()[1] for line in lines[1:46]] == [s.name for s in list_tasks()]
  shown = _program("-m", "pallasbench_dataset.tasks", "softmax")
  assert shown.returncode == 0, shown.stderr
  assert shown.stdout.startswith("softmax (task 14, level 1, softmax)\n")
  assert ("    x: float32; small (256, 256), medium (2048, 2048), large (8192, 8192), "
          "edge (100, 1000)") in shown.stdout
  assert "  tolerance: reduction (" in shown.stdout
  assert "def reference(x):\n  return jax.nn.softmax(x, axis=-1)" in shown.stdout
  unknown = _program("-m", "pallasbench_dataset.tasks", "sofmax")
  assert unknown.returncode == 2 and unknown.stderr.startswith("error: unknown task 'sofmax'")


def test_the_readme_names_the_report_command_and_the_docs_point_to_what_exists():
  readme = (REPO / "README.md").read_text()
  assert "python -m pallasbench_dataset.evaluation.pipeline.report " in readme
  assert "python -m pallasbench_dataset.evaluation.report" not in readme  # the old room
  check = (REPO / "docs" / "gpu_check.md").read_text()
  assert not re.search(r"\d\s*(ms|GB/s|TFLOP/s)\b", check)  # no release's figures to go stale
  paths = set(re.findall(r"(?<![\w/])((?:data|docs|tests|runs)/[\w.*/-]*\w)", check))
  assert {"data/README.md", "docs/measurements.md", "data/results/h200-7896061-run1"} <= paths
  made_here = {p for p in paths if p.startswith("runs/")}  # what the page's commands create
  assert [p for p in paths - made_here if not list(REPO.glob(p))] == []
  report = _program("-m", "pallasbench_dataset.evaluation.pipeline.report", "--help")
  assert report.returncode == 0 and report.stdout.startswith("usage: ")


# ---------------------------------------------------------------------------------------------
# 10. A trainer's script or notebook: the README's GRPO example runs as printed, without a main
#     guard, and leaves nothing behind; Ctrl-C reaches it as a KeyboardInterrupt.



def _readme_grpo_example() -> str:
  readme = (REPO / "README.md").read_text()
  (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.DOTALL) if "GRPOTrainer" in b]
  return block


def _private_env(tmp: pathlib.Path, *, stand_ins: bool = False) -> dict[str, str]:
  """A private TMPDIR and HOME (so the verdict cache), the checkout importable."""
  for name in ("tmp", "home"):
    (tmp / name).mkdir(exist_ok=True)
  path = [str(STAND_INS)] * stand_ins + [str(REPO)]
  return {**os.environ, "TMPDIR": str(tmp / "tmp"), "HOME": str(tmp / "home"),
          "PYTHONPATH": os.pathsep.join(path)}


def _processes_with(marker: str) -> list[int]:
  """Live processes whose environment holds `marker` (the private TMPDIR: every process a
  command started inherits it, wherever it was reparented)."""
  found = []
  for entry in pathlib.Path("/proc").glob("[0-9]*"):
    try:
      if marker.encode() in (entry / "environ").read_bytes().split(b"\0") and not (
          (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"):
        found.append(int(entry.name))
    except OSError:
      continue
  return found


def _left_in(tmp: pathlib.Path, *, but: str = "\0") -> list[str]:
  """What is left in the private TMPDIR, less the names starting with `but`."""
  return sorted(p.name for p in (tmp / "tmp").iterdir() if not p.name.startswith(but))


def test_the_readme_grpo_example_runs_as_a_script_and_in_python_c(tmp_path):
  example = _readme_grpo_example()
  assert "__main__" not in example
  script = tmp_path / "train.py"
  script.write_text(example)
  env = _private_env(tmp_path, stand_ins=True)
  for argv in ([str(script)], ["-c", example]):  # the second is a notebook's cell
    run = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    # The stand-in scores the first row's own completion: the shipped kernel, which
    # KernelReward rejects as a copy by default (reject_copies).
    assert run.stdout.splitlines() == ["rewards [0.0]"], run.stdout
    assert "Traceback" not in run.stderr and "Nanny failed" not in run.stderr, run.stderr[-3000:]
    assert _left_in(tmp_path) == [] and _processes_with(f"TMPDIR={tmp_path / 'tmp'}") == []


CTRL_C_CELL = """
import pathlib
from pallasbench_dataset.reward import KernelReward
hang = pathlib.Path("tests/controls/hangs_relu.py").read_text()
reward = KernelReward(device="cpu", budget_s=600, cpu_workers=1)
try:
  reward(completions=["```python\\n" + hang + "```\\n"], task="relu")
except Exception as e:
  print("an Exception:", type(e).__name__)
except KeyboardInterrupt as e:
  print("a KeyboardInterrupt:", type(e).__name__, e)
reward.close()
print("closed")
"""


def _descendants(pid: int) -> list[tuple[int, str]]:
  parents = {}
  for entry in pathlib.Path("/proc").glob("[0-9]*"):
    try:
      parents[int(entry.name)] = (int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]),
                                  (entry / "cmdline").read_bytes().decode(errors="replace"))
    except (OSError, IndexError, ValueError):
      continue
  found, todo = [], [pid]
  while todo:
    parent = todo.pop()
    children = [(p, cmd) for p, (pp, cmd) in parents.items() if pp == parent]
    found += children
    todo += [p for p, _ in children]
  return found


def test_ctrl_c_inside_the_reward_is_a_keyboard_interrupt(tmp_path):
  proc = subprocess.Popen([sys.executable, "-c", CTRL_C_CELL], cwd=REPO, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=_private_env(tmp_path), start_new_session=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  deadline, started = time.monotonic() + 300, []
  while time.monotonic() < deadline and proc.poll() is None and not any(
      "exporter" in cmd for _, cmd in started):  # the cluster is up, the candidate is running
    started = _descendants(proc.pid)
    time.sleep(0.2)
  assert proc.poll() is None, proc.communicate()
  os.killpg(proc.pid, signal.SIGINT)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == 0, err[-3000:]
  assert out.splitlines() == ["a KeyboardInterrupt: Interrupted batch 1 stopped by SIGINT: no "
                              "reward was computed", "closed"], (out, err[-3000:])
  assert "Traceback" not in err, err[-3000:]
  time.sleep(1)
  alive = [(pid, cmd) for pid, cmd in started if pathlib.Path(f"/proc/{pid}").exists()
           and (pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z")]
  assert alive == [] and _left_in(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# 11. Messages: the closest task name, the fix for a missing `interpret`, each reason once, the
#     caller's own words, a homepage that exists.

def test_an_unknown_task_names_the_closest_one(capsys):
  assert evaluate_cli.main(["--task", "rellu", "--kernel", RELU, "--device", "cpu"]) == 2
  assert capsys.readouterr().err.startswith("error: unknown task 'rellu' (did you mean 'relu'?); "
                                            "known tasks: relu, gelu,")


def test_a_kernel_without_interpret_is_told_to_add_it_and_each_reason_is_printed_once(
    tmp_path, capsys):
  path = tmp_path / "relu.py"
  path.write_text("def kernel(x):\n  return x\n")
  assert evaluate_cli.main(["--task", "relu", "--kernel", str(path), "--device", "cpu"]) == 1
  lines = capsys.readouterr().out.splitlines()
  reason = "TypeError: kernel() got an unexpected keyword argument 'interpret'"
  assert lines[0] == "relu [small, cpu]: error"
  assert [line for line in lines if reason in line] == [f"  error: {reason}"]
  assert lines[-1] == ("  to fix: the entry point takes `interpret`: define `def kernel(..., "
                       "interpret: bool = False)` and pass it on to "
                       "`pl.pallas_call(..., interpret=interpret)`")


def test_no_gpu_is_said_in_python_s_words_from_python_and_in_flags_from_the_command(capsys):
  with pytest.raises(RuntimeError) as info:
    evaluate("relu", RELU, device="gpu")
  assert str(info.value).startswith("device='gpu', but no usable NVIDIA GPU")
  assert str(info.value).endswith("or pass device='cpu')") and "--device" not in str(info.value)
  assert evaluate_cli.main(["--task", "relu", "--kernel", RELU, "--device", "gpu"]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: --device gpu, but no usable") and "use --device cpu" in err


def test_the_homepage_is_the_dataset_s_hub_page():
  hub = "https://huggingface.co/datasets/pallasbench-robust/pallasbench-robust-gpu-h200"
  assert f'Homepage = "{hub}"' in (REPO / "pyproject.toml").read_text()


def test_the_readme_says_which_configs_data_holds_and_times_are_load_dependent():
  from huggingface_hub import DatasetCard  # pylint: disable=import-outside-toplevel
  card = DatasetCard.load(REPO / "data" / "README.md").data.to_dict()
  configs = {c["config_name"] for c in card["configs"]}
  readme = (REPO / "README.md").read_text()
  words = " ".join(readme.split())
  for config in set(re.findall(r'to_pandas\("data", "(\w+)"\)', readme)) - configs:
    assert f'`to_pandas("data", "{config}")` fails there' in words, config
  opening = " ".join(readme.split("\n\n")[2].split())  # the paragraph under the two commands
  assert "depends on load" in opening
  timings = re.findall(r"(\d+ min \d+ s) at ([0-9a-f]{7,40})", opening)
  assert len(timings) >= 2, opening  # the main job's and the suite's
  log = (REPO / "docs" / "measurements.md").read_text()
  for duration, commit in timings:
    assert commit in log, f"{duration} at {commit}: the measurements log never names that commit"
