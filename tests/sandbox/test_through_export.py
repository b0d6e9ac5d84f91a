"""Three walls of the exporter's sandbox, tested as a candidate meets them: through the driver's
`export`, the public path every candidate takes (exporter program, sandbox, outcome); and what
an evaluation leaves in TMPDIR when it is interrupted (nothing).

Each candidate does its deed at import time, after the sandbox is in force, and the test reads
only what any caller sees: the outcome's failure and message, what the candidate printed, and
the files outside. Nothing here names a private part of the sandbox, so the tests hold
whatever the layers look like inside.
"""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

import pytest

import pallasbench_dataset
from pallasbench_dataset.evaluation import protocol, sandbox
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.evaluation.pipeline import driver
from pallasbench_dataset.tasks import get_task
from tests.paths import CONTROLS

LIMITS = Limits(timeout_s=120, memory_bytes=4 << 30)
ORIGINAL = "the file as the project shipped it\n"


def _export(source: str):
  """The exporter's outcome for a candidate `source` (its relu kernel is never reached)."""
  item = driver.WorkItem(task="relu", variant="candidate", size="small",
                         source=textwrap.dedent(source), filename="candidate.py",
                         options=EvalOptions(check_edge=False))
  return driver.export(item, "cpu", LIMITS)


@pytest.fixture
def outside():
  """A path outside every scratch folder, that nothing may create."""
  path = pathlib.Path(tempfile.gettempdir()) / f"pallasbench-behaviour-{uuid.uuid4().hex}"
  yield path
  path.unlink(missing_ok=True)


@pytest.fixture
def project_file():
  """A file in the project's own package folder: readable from the sandbox (the exporter
  imports the project), writable by anyone, so only the sandbox stands between a candidate
  and its bytes."""
  path = pathlib.Path(pallasbench_dataset.__file__).parent / f".behaviour-{uuid.uuid4().hex}"
  path.write_text(ORIGINAL)
  path.chmod(0o666)
  yield path
  path.unlink(missing_ok=True)


def test_posix_spawn_is_a_sandbox_violation_not_a_failed_spawn(outside):
  """Where seccomp holds, a spawn the audit hook let through would fail as an OSError (an
  import error of the kernel); where seccomp is missing, a process would start. Either way
  the candidate must be stopped as a violation, with no process started."""
  outcome = _export(f"""
      import os
      os.posix_spawn("/bin/sh", ["/bin/sh", "-c", "touch {outside}"], {{}})
      print("spawned", flush=True)
      """)
  assert outcome.failure == "violation", (outcome.failure, outcome.message, outcome.report)
  assert "os.posix_spawn" in outcome.message
  assert "spawned" not in outcome.output
  assert not outside.exists()


def test_no_file_can_be_written_not_even_in_scratch():
  """The walls give the candidate no change right anywhere: a write into its own scratch
  folder fails, and nothing is left there."""
  outcome = _export("""
      import os
      try:
        with open("big", "wb") as f:
          f.write(b"x")
        print("written", flush=True)
      except OSError as e:
        print("refused", e.errno, flush=True)
      print("files", len(os.listdir(".")), flush=True)
      """)
  printed = outcome.output.splitlines()
  assert "written" not in printed and "files 0" in printed, outcome.output


def test_the_exporter_cannot_fill_a_compile_cache():
  """The run's persistent compilation cache is written by the compile stage and read by the
  judges, which load an entry by its name alone (test_judge_units: a well-formed entry under
  an artifact's name is trusted). A candidate that points JAX's cache at that folder and
  compiles, or writes an entry file there itself, must leave it empty, although the folder
  is open to anyone."""
  cache = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-run-")) / "compile-cache"
  cache.mkdir()
  cache.chmod(0o777)
  try:
    outcome = _export(f"""
        import jax, jax.numpy as jnp
        for name, value in (("jax_compilation_cache_dir", "{cache}"),
                            ("jax_persistent_cache_min_compile_time_secs", 0.0),
                            ("jax_persistent_cache_min_entry_size_bytes", 0)):
          jax.config.update(name, value)
        try:
          jax.jit(lambda x: x * 3.0)(jnp.ones(8)).block_until_ready()
          with open("{cache}/jit_pallasbench_candidate-{'0' * 64}-cache", "wb") as f:
            f.write(b"planted")
        except OSError as e:
          print("refused", e.errno, flush=True)
        """)
    assert list(cache.iterdir()) == [], (outcome.failure, outcome.message, outcome.output)
  finally:
    shutil.rmtree(cache.parent, ignore_errors=True)


def test_the_file_size_limit_alone_refuses_a_write():
  """The rlimit wall by itself (Landlock off, so the file can be made): one byte written
  fails with EFBIG, and the file stays empty. Without the limit a candidate could fill the
  disk wherever some other wall gave way."""
  code = textwrap.dedent("""
      import errno, os
      try:
        with open("big", "wb") as f:
          f.write(b"x")
          f.flush()
        print("written", flush=True)
      except OSError as e:
        print("refused", errno.errorcode[e.errno], flush=True)
      print("size", os.stat("big").st_size, flush=True)
      """)
  with sandbox.run_sandboxed([sys.executable, "-c", code], stdin=b"", timeout_s=60,
                             memory_bytes=4 << 30,
                             walls=("veil", "unprivileged", "rlimits")) as run:
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["refused", "EFBIG", "size", "0"], run.stdout


# Where the read-write open is made from: the candidate's own thread, a thread it starts, and a
# host callback that XLA runs on a thread of its own (one jax started before the candidate
# ran). Each attempt overwrites the file if it gets a descriptor.
OPEN_RDWR = """
    import os
    def overwrite(*_):
      fd = os.open({target!r}, os.O_RDWR)
      try:
        os.write(fd, b"overwritten by the candidate")
      finally:
        os.close(fd)
      print("opened for writing", flush=True)
    """
FROM = {
    "main_thread": "overwrite()",
    "started_thread": """
        import threading
        worker = threading.Thread(target=overwrite)
        worker.start()
        worker.join()
        """,
    "xla_callback_thread": """
        import jax, jax.numpy as jnp
        def callback(y):
          overwrite()
          return y
        big = jax.jit(lambda x: jnp.tanh(x @ x))
        call = jax.jit(lambda y: jax.pure_callback(
            callback, jax.ShapeDtypeStruct(y.shape, y.dtype), y) + 1)
        x = jnp.ones((256, 256))
        for _ in range(40):  # an input still being computed: XLA runs the callback itself
          try:
            call(big(x)).block_until_ready()
          except Exception as e:  # a refusal that raised instead of ending the process
            print("callback failed", type(e).__name__, flush=True)
        """,
}


@pytest.mark.parametrize("where", list(FROM))
def test_os_open_read_write_outside_scratch_is_refused_as_a_write(project_file, where):
  """O_RDWR writes: the sandbox must take it for a write, refuse it as a violation on every
  thread, and leave the file as it was (a read-only reading would let a thread that Landlock
  does not confine overwrite the checkout)."""
  outcome = _export(textwrap.dedent(OPEN_RDWR.format(target=str(project_file)))
                    + textwrap.dedent(FROM[where]))
  assert project_file.read_text() == ORIGINAL
  assert outcome.failure == "violation", (outcome.failure, outcome.message, outcome.output)
  assert "opened for writing" not in outcome.output


def _children(pid: int, program: bytes) -> list[int]:
  """The processes `pid` started whose command line names `program`."""
  found = []
  for entry in pathlib.Path("/proc").iterdir():
    try:
      parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
      if parent == pid and program in (entry / "cmdline").read_bytes():
        found.append(int(entry.name))
    except (OSError, IndexError, ValueError):
      continue
  return found


def test_an_interrupted_evaluation_leaves_nothing_in_a_private_tmpdir(tmp_path):
  """Ctrl-C (SIGINT to the command's group) once the judge runs: the exporter's scratch and
  the judge's analysis helper's are gone, as after a finished evaluation (the CLI test in
  judge/test_attacks.py checks that one)."""
  private = tmp_path / "private-tmp"
  private.mkdir(mode=0o700)
  kernel = CONTROLS / "pos_calls_reference_relu.py"
  command = subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, "-m", "pallasbench_dataset.evaluate", "--task", "relu", "--kernel",
       str(kernel), "--device", "cpu"], start_new_session=True, stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(private)},
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  try:
    deadline, helpers = time.monotonic() + 300, []
    while not helpers and time.monotonic() < deadline and command.poll() is None:
      helpers = [helper for judge in _children(command.pid, b"judge.process")
                 for helper in _children(judge, b"analysis_process")]
      time.sleep(0.02)
    assert helpers, "the judge never started its analysis helper"
    os.killpg(command.pid, signal.SIGINT)
    assert command.wait(timeout=120) == 130
  finally:
    if command.poll() is None:
      os.killpg(command.pid, signal.SIGKILL)
      command.wait()
  time.sleep(0.5)  # the judge's helper dies with it (the kernel's parent-death signal)
  assert list(private.iterdir()) == []


def test_the_exporter_is_told_the_inputs_it_may_not_derive():
  """A precision's dtypes come from the references, which the exporter cannot read: the
  driver's request carries the inputs of every size it asks for, and they survive the trip."""
  item = driver.WorkItem(task="softmax", variant="candidate", size="small", source="",
                         filename="k.py", precision="bfloat16")
  request = driver.export_request(item, "cpu")
  spec = get_task("softmax").at_precision("bfloat16")
  for size, _ in request.exports:
    assert request.input_structs(size) == tuple(
        (tuple(s.shape), s.dtype.name) for s in spec.input_structs(size))
  assert {dtype for _, dtype in request.input_structs("small")} == {"bfloat16"}
  assert protocol.ExportRequest.from_json(request.to_json()) == request
