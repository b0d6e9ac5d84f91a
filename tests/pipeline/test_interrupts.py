"""Ctrl-C as a terminal sends it: SIGINT to the whole process group of a running command.

The main job and the `evaluate` command end with one line that says what was kept and the
command that continues (no traceback from a Dask worker, a judge or a compiler), leave no
process behind, and a plain re-run of the main job resumes the run it interrupted.
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import threading
import time

import pytest

from pallasbench_dataset.evaluation.pipeline import suite

from tests.paths import REPO

TASKS = ("relu", "add")


def _default_sigint() -> None:
  """A terminal's foreground job takes SIGINT's default action; a test run started in the
  background of a non-interactive shell (as a CI harness may) inherits SIGINT ignored, and so
  would the command, which Ctrl-C could then not reach."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*argv: str) -> subprocess.Popen:
  """The command in a session of its own, as a terminal's foreground job (the test's
  process group is spared), its output merged and read line by line."""
  return subprocess.Popen([sys.executable, *argv], cwd=REPO, start_new_session=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)},
                          preexec_fn=_default_sigint)


def _lines_until(proc: subprocess.Popen, done, timeout_s: float = 300) -> list[str]:
  """Output lines up to the first for which `done(line)` holds (killing the command past
  `timeout_s`)."""
  timer = threading.Timer(timeout_s, proc.kill)
  timer.start()
  lines = []
  try:
    for line in proc.stdout:
      lines.append(line.rstrip("\n"))
      if done(line):
        return lines
  finally:
    timer.cancel()
  pytest.fail("the command ended before the expected line:\n" + "\n".join(lines[-40:]))


def _ctrl_c(proc: subprocess.Popen, timeout_s: float = 60) -> list[str]:
  os.killpg(proc.pid, signal.SIGINT)
  rest, _ = proc.communicate(timeout=timeout_s)
  return rest.splitlines()


def _children_of(pid: int) -> list[int]:
  found = []
  for entry in pathlib.Path("/proc").iterdir():
    try:
      fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
      continue
    if entry.name.isdigit() and int(fields[1]) == pid:
      found.append(int(entry.name))
  return found


def test_ctrl_c_on_the_main_job_is_one_line_and_a_plain_rerun_resumes(tmp_path):
  out = tmp_path / "ds"
  argv = ["-m", "builder.regenerate", "--device", "cpu", "--measure-only", "--tasks", *TASKS,
          "--variants", "gpu", "--cpu-workers", "1", "--out", str(out)]
  proc = _start(*argv)
  _lines_until(proc, lambda line: f"1/{len(TASKS)} " in line)  # measuring: the cluster is up
  after = _ctrl_c(proc)
  assert proc.returncode == 130, after
  (run_dir,) = (out.parent / "ds.runs").iterdir()
  kept = len(suite.read_records(run_dir))
  assert 1 <= kept < len(TASKS)
  last = after[-1]
  assert not any("Traceback" in line or "KeyboardInterrupt" in line for line in after), after
  assert [line for line in after if not line.startswith("[")] == [last]  # progress, then one line
  head, command = last.split("; continue with: ")
  assert head == (f"interrupted (stopped by SIGINT): the {kept} evaluation(s) measured are kept "
                  f"in {run_dir}")
  python, *rest = shlex.split(command)  # the interpreter that ran it, as the user can type it
  assert (REPO / python).samefile(sys.executable) and python != "python"
  assert rest == [*argv, "--resume", "--results", str(run_dir)]
  manifest = json.loads((run_dir / suite.MANIFEST).read_text())
  assert manifest["interrupted_at"] and manifest["finished_at"] is None

  again = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
  assert again.returncode == 0, again.stderr[-3000:]
  first = again.stderr.splitlines()[0]
  assert first == (f"builder.regenerate: {run_dir} is an unfinished run of this plan: resuming "
                   "it (--new-run starts afresh)")
  assert (f"resuming {run_dir}: {kept} of the {len(TASKS)} planned evaluations are done, "
          f"{len(TASKS) - kept} to measure") in again.stderr
  assert f"] {kept + 1}/{len(TASKS)} " in again.stderr  # the bar counts what was kept
  assert [p.name for p in (out.parent / "ds.runs").iterdir()] == [run_dir.name]
  assert sorted(r.task for r in suite.read_records(run_dir)) == sorted(TASKS)
  assert len(json.loads((run_dir / suite.MANIFEST).read_text())["resumes"]) == 1
  assert "still alive" not in again.stderr and "Traceback" not in again.stderr


def _cmdline(pid: int) -> bytes:
  """The process' command line, empty once it has exited (a child may end between listing it
  and reading it)."""
  try:
    return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
  except OSError:
    return b""


def test_ctrl_c_on_evaluate_is_one_line_and_leaves_no_judge(tmp_path):
  kernel = REPO / "tests" / "controls" / "pos_calls_reference_relu.py"
  proc = _start("-m", "pallasbench_dataset.evaluate", "--task", "relu", "--kernel", str(kernel),
                "--device", "cpu")
  deadline = time.monotonic() + 120
  judges: list[int] = []
  while not judges and time.monotonic() < deadline and proc.poll() is None:
    judges = [pid for pid in _children_of(proc.pid) if b"judge.process" in _cmdline(pid)]
    time.sleep(0.02)
  assert judges, "no judge process started"
  after = _ctrl_c(proc)
  assert proc.returncode == 130, after
  assert after[-1] == f"interrupted: nothing was recorded; run the same command again to evaluate {kernel}"
  assert not any("Traceback" in line or "Error" in line for line in after), after
  assert all(line.startswith("WARNING ") for line in after[:-1]), after  # logs from before
  time.sleep(0.5)
  assert not [pid for pid in judges if pathlib.Path(f"/proc/{pid}").exists()
              and "Z" not in (pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3])]
