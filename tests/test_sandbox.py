"""The exporter's sandbox: what it refuses, what it must let jax do, and the launcher's limits.

Every child runs through run_sandboxed(). A child reads a job on stdin, runs its `setup`,
installs the layers it names, then runs its `action`; a refused action must end it with
SANDBOX_EXIT, a `refused <event> ...` report line, and no trace outside its scratch folder.
Children that do not need jax load sandbox.py alone, which starts them in a tenth of a second.
"""

import dis
import functools
import json
import os
import pathlib
import signal
import socket
import struct
import sys
import tempfile
import time
import textwrap
import types
import uuid

import jax
import numpy as np
import pytest

from pallasbench_dataset.evaluation import sandbox
from pallasbench_dataset.evaluation.sandbox import OUTPUT_CAP, SANDBOX_EXIT, run_sandboxed

MEMORY_BYTES = 4 << 30
MARK_ENV = "SANDBOX_TEST_MARK"
LINUX = sys.platform == "linux" and os.uname().machine in ("x86_64", "aarch64")

CHILD = textwrap.dedent("""
    import importlib.util, json, os, pathlib, sys
    job = json.loads(sys.stdin.read())
    target, port = job["target"], job["port"]
    if job["jax"]:
      import jax
      from pallasbench_dataset.evaluation import sandbox
    else:
      spec = importlib.util.spec_from_file_location("sandbox", job["module"])
      sandbox = sys.modules["sandbox"] = importlib.util.module_from_spec(spec)
      spec.loader.exec_module(sandbox)
    exec(job["setup"])
    if job["install"] == "all":
      sandbox.install_from_env()
    elif job["install"] == "seccomp":
      assert sandbox.install_seccomp()
    elif job["install"] == "landlock" and not sandbox.install_landlock(os.getcwd()):
      print("unavailable")
      sys.exit(0)
    exec(job["action"])
    print("survived", flush=True)
    """)

# Collects the outcome of several attempts in one child: "allowed" or the errno's name.
ATTEMPT = textwrap.dedent("""
    import errno, json, socket, subprocess, threading
    results = {}
    def attempt(name, action):
      try:
        action()
        results[name] = "allowed"
      except OSError as e:
        results[name] = errno.errorcode.get(e.errno, str(e.errno))
    """)


def _survivors(mark: str) -> list[int]:
  """Live processes that inherited the run's marker variable (zombies have no environ)."""
  found = []
  for name in os.listdir("/proc"):
    try:
      with open(f"/proc/{name}/environ", "rb") as f:
        if f"{MARK_ENV}={mark}".encode() in f.read().split(b"\0"):
          found.append(int(name))
    except (OSError, ValueError):
      continue
  return found


def run_child(action: str, *, setup: str = "", install: str = "all", with_jax: bool = False,
              target: str = "", port: int = 0, timeout_s: float = 60,
              memory_bytes: int = MEMORY_BYTES) -> sandbox.SandboxRun:
  """Runs CHILD in the sandbox, then checks that none of its processes is left."""
  mark = uuid.uuid4().hex
  job = dict(action=textwrap.dedent(action), setup=textwrap.dedent(setup), install=install,
             jax=with_jax, target=target, port=port, module=sandbox.__file__)
  run = run_sandboxed([sys.executable, "-c", CHILD], stdin=json.dumps(job).encode(),
                      timeout_s=timeout_s, memory_bytes=memory_bytes,
                      extra_env={MARK_ENV: mark})
  survivors = _survivors(mark)
  if survivors:
    for pid in survivors:
      os.kill(pid, signal.SIGKILL)
    run.cleanup()
    pytest.fail(f"processes of the run survived it: {survivors}")
  return run


@pytest.fixture
def target():
  """A path outside any scratch folder, next to them (so '../name' from scratch reaches it)."""
  path = pathlib.Path(tempfile.gettempdir()) / f"pallasbench-test-{uuid.uuid4().hex}"
  yield path
  if path.is_dir():
    path.rmdir()
  path.unlink(missing_ok=True)


@pytest.fixture
def listener():
  with socket.create_server(("127.0.0.1", 0)) as server:
    server.setblocking(False)
    yield server


# (id, setup, action, the refused event); `target` is a path outside scratch, `port` a
# listening loopback socket of the test.
FORBIDDEN = [
    ("popen", "", "import subprocess; subprocess.Popen(['/bin/sh', '-c', 'touch ' + target])",
     "subprocess.Popen"),
    ("os_system", "", "os.system('touch ' + target)", "os.system"),
    ("fork_setsid_sleep", "", """
        import time
        if os.fork() == 0:
          os.setsid()
          time.sleep(30)
        """, "os.fork"),
    ("dunder_import_subprocess", "", "__import__('subprocess').run(['touch', target])",
     "subprocess.Popen"),
    ("socket_connect", "", "import socket; socket.socket().connect(('127.0.0.1', port))",
     "socket.__new__"),
    ("create_connection", "", "import socket; socket.create_connection(('127.0.0.1', port))",
     "socket.getaddrinfo"),
    ("ctypes_cdll", "", "import ctypes; ctypes.CDLL('libc.so.6')", "ctypes.dlopen"),
    ("write_absolute", "", "open(target, 'w').write('x')", "open"),
    ("write_relative", "", "open(os.path.relpath(target), 'w').write('x')", "open"),
    ("write_append", "", "open(target, 'a').write('x')", "open"),
    ("write_pathlib", "", "pathlib.Path(target).write_text('x')", "open"),
    ("write_through_symlink", "os.symlink(target, 'link')", "open('link', 'w').write('x')",
     "open"),
    ("os_open_with_dir_fd", "", """
        folder = os.open(os.path.dirname(target), os.O_PATH)  # O_RDONLY: Landlock refuses
        os.open(os.path.basename(target), os.O_WRONLY | os.O_CREAT, dir_fd=folder)
        """, "open"),
    ("write_through_symlink_loop", "os.symlink('a', 'b'); os.symlink('b', 'a')",
     "open('a', 'w')", "open"),
    ("read_parent_environ", "", "open(f'/proc/{os.getppid()}/environ').read()", "open"),
    ("read_parent_memory", "", "open(f'/proc/{os.getppid()}/mem', 'rb')", "open"),
    ("read_parent_from_its_cwd", "", "os.chdir(f'/proc/{os.getppid()}'); open('environ')",
     "open"),
    ("read_parent_through_dir_fd", "",
     "os.open(f'../{os.getppid()}/environ', os.O_RDONLY, dir_fd=os.open('/proc/self', 0))",
     "open"),
    ("mkdir_outside", "", "os.mkdir(target)", "os.mkdir"),
    ("symlink_inside", "", "os.symlink(target, 'link')", "os.symlink"),
    ("gc_get_objects", "", "import gc; gc.get_objects()", "gc.get_objects"),
    ("replace_code", "", "def f(): pass\nf.__code__ = (lambda: 0).__code__", "object.__setattr__"),
    ("settrace", "", "sys.settrace(lambda *a: None)", "sys.settrace"),
    ("second_hook", "", "sys.addaudithook(lambda *a: None)", "sys.addaudithook"),
    ("kill_parent", "", "os.kill(os.getppid(), 0)", "os.kill"),
    ("raise_rlimit", "", "import resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0))",
     "resource.setrlimit"),
    ("putenv_xla_flags", "", "os.environ['XLA_FLAGS'] = '--xla_dump_to=' + target", "os.putenv"),
    ("sqlite_file", "", "import sqlite3; sqlite3.connect(target)", "sqlite3.connect"),
    ("subinterpreter", "", "import _xxsubinterpreters; _xxsubinterpreters.create()", "import"),
    ("extension_from_scratch", "", """
        import importlib.util, shutil
        shutil.copyfile(importlib.util.find_spec('_bisect').origin, 'evil.so')
        spec = importlib.util.spec_from_file_location('_bisect', os.path.abspath('evil.so'))
        importlib.util.module_from_spec(spec)
        """, "import"),
    # The hook uses only what it captured at install time: rebinding anything changes nothing.
    ("rebound_globals", "", """
        import builtins
        os.write = os._exit = os.lstat = lambda *a: None
        builtins.type, builtins.str, builtins.BaseException = (lambda *a: str), bytes, int
        sandbox.SANDBOX_EXIT, sandbox._REFUSED_EVENTS = 0, frozenset()
        vars(sandbox).update(os=None, sys=None, stat=None)
        open(target, 'w').write('x')
        """, "open"),
]


@pytest.mark.parametrize(("setup", "action", "event"), [f[1:] for f in FORBIDDEN],
                         ids=[f[0] for f in FORBIDDEN])
def test_forbidden_action_ends_the_child_and_leaves_no_trace(setup, action, event, target,
                                                             listener):
  with run_child(action, setup=setup, target=str(target),
                 port=listener.getsockname()[1]) as run:
    assert run.returncode == SANDBOX_EXIT, run.stderr
    assert run.violations and run.violations[0].split()[1] == event, run.violations
    assert "survived" not in run.stdout
    assert "audit-hook" in run.layers
    if LINUX:
      assert "seccomp" in run.layers
  assert not os.path.lexists(target)
  with pytest.raises(BlockingIOError):
    listener.accept()


@pytest.mark.parametrize("operation", ["os.rename(target, 'moved')", "os.remove(target)",
                                       "os.chmod(target, 0o777)", "os.truncate(target, 0)"])
def test_change_to_a_file_outside_is_refused(operation, target):
  target.write_text("kept")
  target.chmod(0o644)
  with run_child(operation, target=str(target)) as run:
    assert run.returncode == SANDBOX_EXIT
    assert run.violations[0].split()[1] == operation.split("(")[0]
  assert target.read_text() == "kept"
  assert target.stat().st_mode & 0o777 == 0o644


def test_link_outside_pointing_inside_is_not_removed(target):
  """os.remove acts on the link itself: that it resolves into scratch does not make it ours."""
  with run_child("os.remove(target)", setup="os.symlink(os.path.abspath('in'), target)",
                 target=str(target)) as run:
    assert run.returncode == SANDBOX_EXIT and run.violations[0].split()[1] == "os.remove"
  assert target.is_symlink()


def test_refusal_holds_when_the_candidate_closes_the_report_fd(target):
  with run_child(f"os.close(int(os.environ[{sandbox.REPORT_FD_ENV!r}])); open(target, 'w')",
                 target=str(target)) as run:
    assert run.returncode == SANDBOX_EXIT and not run.violations and run.violated
  assert not target.exists()


@pytest.mark.skipif(not LINUX, reason="seccomp filters Linux x86_64 and aarch64 only")
def test_fork_exec_without_audit_event_is_stopped_by_seccomp(target):
  """_posixsubprocess.fork_exec raises no audit event: the kernel has to refuse the fork."""
  action = """
      import _posixsubprocess
      r, w = os.pipe()
      try:
        _posixsubprocess.fork_exec(
            [b'/bin/sh', b'-c', b'touch ' + target.encode()], [b'/bin/sh'], True, (), None,
            None, -1, -1, -1, -1, -1, -1, r, w, False, False, -1, None, None, None, -1, None,
            True)
      except PermissionError:
        print('fork refused', flush=True)
      """
  with run_child(action, target=str(target)) as run:
    assert "fork refused" in run.stdout, run.stderr
    assert run.returncode == 0 and not run.violations
  assert not target.exists()


@pytest.mark.skipif(not LINUX, reason="seccomp filters Linux x86_64 and aarch64 only")
def test_seccomp_alone_refuses_processes_sockets_and_signals_but_not_threads():
  action = ATTEMPT + textwrap.dedent("""
      def fork():
        if os.fork() == 0:
          os._exit(0)
      attempt("fork", fork)
      attempt("execv", lambda: os.execv("/bin/true", ["/bin/true"]))
      attempt("subprocess", lambda: subprocess.run(["/bin/true"]))
      attempt("socket", socket.socket)
      attempt("socketpair", socket.socketpair)
      attempt("mkfifo", lambda: os.mkfifo("fifo"))
      attempt("kill_parent", lambda: os.kill(os.getppid(), 0))
      attempt("kill_self", lambda: os.kill(os.getpid(), 0))
      def thread():
        done = []
        worker = threading.Thread(target=lambda: done.append(1))
        worker.start()
        worker.join()
        assert done
      attempt("thread", thread)
      print(json.dumps(results))
      """)
  with run_child(action, install="seccomp") as run:
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.splitlines()[0])
  assert results == dict(fork="EPERM", execv="EPERM", subprocess="EPERM", socket="EPERM",
                         socketpair="EPERM", mkfifo="EPERM", kill_parent="EPERM",
                         kill_self="allowed", thread="allowed")


@pytest.mark.skipif(not LINUX, reason="Landlock is Linux only")
def test_landlock_alone_keeps_changes_inside_scratch(target):
  action = ATTEMPT + textwrap.dedent("""
      attempt("write_inside", lambda: open("inside", "w").write("x"))
      attempt("rename_inside", lambda: os.rename("inside", "renamed"))
      attempt("read_outside", lambda: open(sys.executable, "rb").read(4))
      attempt("write_outside", lambda: open(target, "w"))
      attempt("mkdir_outside", lambda: os.mkdir(target))
      attempt("mkfifo_outside", lambda: os.mkfifo(target))
      attempt("move_out", lambda: os.rename("renamed", target))
      print(json.dumps(results))
      """)
  with run_child(action, install="landlock", target=str(target)) as run:
    if run.stdout.startswith("unavailable"):
      pytest.skip("this kernel has no Landlock")
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.splitlines()[0])
  assert results.pop("write_inside") == results.pop("rename_inside") == "allowed"
  assert results.pop("read_outside") == "allowed"
  assert all(outcome in ("EACCES", "EPERM", "EXDEV") for outcome in results.values()), results
  assert not os.path.lexists(target)


@pytest.fixture
def secret():
  """A token file in a HOME-like folder outside every allowed root, readable by anyone (so
  only the sandbox can stop the child, also when it runs as nobody)."""
  home = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-home-"))
  token = home / ".cache" / "huggingface" / "token"
  token.parent.mkdir(parents=True)
  token.write_text(f"hf_secret_{uuid.uuid4().hex}")
  for folder in (home, home / ".cache", token.parent):
    folder.chmod(0o755)
  token.chmod(0o644)
  yield token
  token.unlink()
  for folder in (token.parent, home / ".cache", home):
    folder.rmdir()


# Reads the child tries, by name; `target` is the secret token. The outcome is "allowed" or
# the errno's name.
READS = ATTEMPT + textwrap.dedent("""
    def read(path):
      with open(path, "rb") as f:
        f.read(16)
    attempt("secret", lambda: read(target))
    attempt("secret_os_open", lambda: os.close(os.open(target, os.O_RDONLY)))
    attempt("secret_via_proc_root", lambda: read("/proc/self/root" + target))
    attempt("secret_folder", lambda: os.listdir(os.path.dirname(target)))
    attempt("etc_shadow", lambda: read("/etc/shadow"))
    attempt("etc_passwd", lambda: read("/etc/passwd"))
    attempt("root_folder", lambda: os.listdir("/"))
    attempt("parent_status", lambda: read(f"/proc/{os.getppid()}/status"))
    attempt("interpreter_prefix", lambda: read(os.__file__))
    attempt("interpreter", lambda: read(sys.executable))
    attempt("project", lambda: read(sandbox.__file__))
    libc = next(line.split()[-1] for line in open("/proc/self/maps") if "/libc." in line)
    attempt("system_library", lambda: read(libc))
    attempt("own_proc", lambda: read("/proc/self/status"))
    attempt("cpuinfo", lambda: read("/proc/cpuinfo"))
    attempt("urandom", lambda: read("/dev/urandom"))
    attempt("scratch", lambda: (open("mine", "w").write("x"), read("mine")))
    print(json.dumps(results))
    """)
READABLE = ("interpreter_prefix", "interpreter", "project", "system_library", "own_proc",
            "cpuinfo", "urandom", "scratch")


def _check_reads(run: sandbox.SandboxRun, secret: pathlib.Path) -> None:
  assert secret.read_text() not in run.stdout + run.stderr + "".join(run.violations)
  assert run.returncode == 0 and not run.violations, (run.violations, run.stderr)
  results = json.loads(run.stdout.splitlines()[0])
  assert {name: results.pop(name) for name in READABLE} == dict.fromkeys(READABLE, "allowed")
  if not os.path.exists("/etc/shadow"):
    assert results.pop("etc_shadow") == "ENOENT"
  assert results == dict.fromkeys(results, "EACCES"), results


def test_read_allow_list_holds_what_the_exporter_needs_and_no_secret():
  scratch = tempfile.mkdtemp(prefix="pallasbench-sandbox-")
  try:
    allowed = sandbox.read_allow_list(os.path.realpath(scratch))
  finally:
    os.rmdir(scratch)

  def readable(path: str) -> bool:
    path = os.path.realpath(path)
    return path in allowed.files or any(
        path == f or path.startswith(f + "/") for f in allowed.folders)

  assert readable(sys.executable) and readable(os.__file__) and readable(np.__file__)
  assert readable(sandbox.__file__) and readable(jax.__file__)
  home = os.path.expanduser("~")
  for secret in ("/etc/shadow", "/etc/passwd", "/etc/ssh/ssh_host_rsa_key", "/root/.bashrc",
                 os.path.join(home, ".ssh/id_rsa"), os.path.join(home, ".netrc"),
                 os.path.join(home, ".cache/huggingface/token"), "/proc/1/environ",
                 f"/proc/{os.getppid()}/environ", scratch, os.path.dirname(scratch)):
    assert not readable(secret), secret
  for folder in allowed.folders:
    assert folder not in ("/", "/etc", "/root", "/home", "/proc", "/sys", "/dev", "/tmp", home)
  system_files = {os.path.realpath(f) for f in ("/etc/ld.so.cache", "/etc/localtime",
                                                "/proc/cpuinfo", "/dev/null", "/dev/zero",
                                                "/dev/random", "/dev/urandom")}
  assert set(allowed.files) <= system_files | {
      os.path.realpath(p) for p in sys.path if os.path.isfile(p)}


@pytest.mark.skipif(not LINUX, reason="Landlock is Linux only")
def test_landlock_alone_confines_reads_to_the_allow_list(secret):
  """The kernel layer by itself, no audit hook: a secret outside the allowed roots is EACCES,
  the interpreter, the project and the system libraries stay readable."""
  with run_child(READS, install="landlock", target=str(secret)) as run:
    if run.stdout.startswith("unavailable"):
      pytest.skip("this kernel has no Landlock")
    _check_reads(run, secret)


def test_secret_reads_are_refused_under_the_whole_sandbox(secret):
  with run_child(READS.replace('attempt("parent_status"', '# attempt("parent_status"'),
                 target=str(secret)) as run:
    if "landlock-read" not in run.layers:
      pytest.skip("reads are confined only where Landlock is available")
    _check_reads(run, secret)


@pytest.mark.skipif(not LINUX, reason="Landlock is Linux only")
def test_xla_callback_threads_cannot_read_a_secret(secret):
  """XLA runs Python callbacks on threads jax started before install(), which Landlock (no
  TSYNC before ABI 8) does not confine: the audit hook answers EACCES there."""
  setup = """
      jax.devices()
      before = {int(t) for t in os.listdir("/proc/self/task")} - {threading.get_native_id()}
      """
  action = """
      import errno, threading
      import jax.numpy as jnp
      outcomes = set()
      def steal(x):
        try:
          with open(target) as f:
            outcomes.add((threading.get_native_id() in before, f.read()))
        except OSError as e:
          outcomes.add((threading.get_native_id() in before, errno.errorcode[e.errno]))
        return x
      big = jax.jit(lambda x: jnp.tanh(x @ x))
      call = jax.jit(lambda y: jax.pure_callback(steal, jax.ShapeDtypeStruct(y.shape, y.dtype),
                                                 y) + 1)
      x = jnp.ones((512, 512))
      for _ in range(50):  # an input still being computed: the callback runs on XLA's thread
        call(big(x)).block_until_ready()
        if any(unconfined for unconfined, _ in outcomes):
          break
      print(json.dumps(sorted(outcomes)))
      """
  with run_child(action, setup="import threading\n" + textwrap.dedent(setup), with_jax=True,
                 target=str(secret)) as run:
    if "landlock-read" not in run.layers:
      pytest.skip("reads are confined only where Landlock is available")
    assert secret.read_text() not in run.stdout + run.stderr
    assert run.returncode == 0 and not run.violations, (run.violations, run.stderr[-2000:])
    outcomes = json.loads(run.stdout.splitlines()[0])
  assert [True, "EACCES"] in outcomes, outcomes  # an unconfined thread tried, and was refused
  assert all(outcome == "EACCES" for _, outcome in outcomes), outcomes


def test_jax_still_exports_and_honest_work_passes(target):
  """After install(): files in scratch, reads anywhere, imports, threads, tempfile and a full
  jax.export of relu for cpu (interpret) and cuda (Triton); then a refused write still ends
  the child."""
  action = """
      import dataclasses, functools, itertools, tempfile, threading, warnings
      import decimal, fractions, statistics  # fresh imports, one of them native (_decimal)
      from pallasbench_dataset import get_task, lowering
      from pallasbench_dataset.kernels import load_kernel
      with open("notes.txt", "w") as f:
        f.write("inside")
      os.mkdir("sub")
      os.replace("notes.txt", "sub/notes.txt")
      os.remove("sub/notes.txt")
      os.rmdir("sub")
      with tempfile.TemporaryDirectory() as folder:  # rmtree: unlink with dir_fd
        with open(os.path.join(folder, "t"), "wb") as f:
          f.write(b"t")
      assert open(sandbox.__file__).read(1) and open(os.__file__).read(1)
      assert open("/proc/self/status").read(1) and open(f"/proc/{os.getpid()}/stat").read(1)
      assert open("/proc/cpuinfo").read(1) and open("/proc/thread-self/comm").read(1)
      assert open("/dev/urandom", "rb").read(1) and os.listdir(os.path.dirname(os.__file__))
      assert int(jax.numpy.arange(5).sum()) == 10  # XLA CPU compiles and runs
      out = []
      worker = threading.Thread(target=lambda: out.append(sum(itertools.repeat(1, 10))))
      worker.start()
      worker.join()
      assert out == [10]
      spec = get_task("relu")
      avals = [jax.ShapeDtypeStruct(i.concrete_shape(spec.dims("small")), i.dtype)
               for i in spec.inputs]
      kernel = load_kernel("gpu", "relu").kernel
      cpu = jax.export.export(jax.jit(functools.partial(kernel, interpret=True)),
                              platforms=["cpu"])(*avals)
      with lowering.abstract_gpu():
        cuda = jax.export.export(
            jax.jit(functools.partial(kernel, interpret=False)), platforms=["cuda"],
            disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(
                lowering.TRITON_CUSTOM_CALL)])(*avals)
      for name, exported in (("cpu.bin", cpu), ("cuda.bin", cuda)):
        with open(name, "wb") as f:
          f.write(exported.serialize())
      print("honest work done", flush=True)
      open(target, "w")
      """
  with run_child(action, with_jax=True, target=str(target)) as run:
    assert "honest work done" in run.stdout, run.stderr
    assert run.returncode == SANDBOX_EXIT and run.violations[0].split()[1] == "open"
    cpu = jax.export.deserialize(run.read_file("cpu.bin", max_bytes=1 << 20))
    cuda = jax.export.deserialize(run.read_file("cuda.bin", max_bytes=1 << 20))
  assert cpu.platforms == ("cpu",) and cuda.platforms == ("cuda",)
  x = np.random.default_rng(0).standard_normal(cpu.in_avals[0].shape, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(cpu.call(x)), np.maximum(x, 0))
  assert not target.exists()


def test_all_kernels_export_in_one_sandboxed_child():
  """Every kernel of both trees, traced, lowered and serialized at `small` under install()."""
  action = """
      import collections, functools
      from pallasbench_dataset import list_tasks, lowering
      from pallasbench_dataset.kernels import load_kernel
      tpu = jax.sharding.AbstractMesh((1,), ("_",), abstract_device=jax.sharding.AbstractDevice(
          device_kind=lowering.DEFAULT_TPU, num_cores=1, platform="tpu"))
      triton = [jax.export.DisabledSafetyCheck.custom_call(lowering.TRITON_CUSTOM_CALL)]
      exported, failed = collections.Counter(), []
      for spec in list_tasks():
        avals = [jax.ShapeDtypeStruct(i.concrete_shape(spec.dims("small")), i.dtype)
                 for i in spec.inputs]
        for variant in ("gpu", "tpu"):
          fn = jax.jit(functools.partial(load_kernel(variant, spec.name).kernel, interpret=False))
          try:
            if variant == "gpu":
              with lowering.abstract_gpu():
                exported_fn = jax.export.export(fn, platforms=["cuda"], disabled_checks=triton)
                exported_fn(*avals).serialize()
            else:
              with jax.sharding.use_abstract_mesh(tpu):
                jax.export.export(fn, platforms=["tpu"])(*avals).serialize()
            exported[variant] += 1
          except Exception as e:  # a kernel that does not lower: fine here
            failed.append(f"{variant}/{spec.name}: {e!r}"[:200])
      print(json.dumps(dict(exported=exported, failed=failed)))
      """
  with run_child(action, with_jax=True, timeout_s=300) as run:
    assert run.returncode == 0 and not run.violations, (run.violations, run.stderr[-2000:])
    result = json.loads(run.stdout.splitlines()[0])
  assert result["exported"]["gpu"] == 45, result["failed"]
  assert result["exported"]["gpu"] + result["exported"].get("tpu", 0) + len(
      result["failed"]) == 90


def test_audit_hook_reads_no_global_name():
  """A candidate can rebind module globals and builtins: the hook must use only its closure."""
  hook = sandbox._make_audit_hook(  # pylint: disable=protected-access
      tempfile.gettempdir(), 2, (), sandbox.read_allow_list(tempfile.gettempdir()))
  functions, pending = {}, [hook]
  while pending:
    function = pending.pop()
    if function.__code__ in functions:
      continue
    functions[function.__code__] = function
    for cell in function.__closure__ or ():
      value = cell.cell_contents
      values = value.values() if isinstance(value, types.MappingProxyType) else [value]
      pending += [v for v in values if isinstance(v, types.FunctionType)]
  assert len(functions) > 5
  loads = [(code.co_name, i.argval) for code in functions for i in dis.get_instructions(code)
           if i.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS")]
  assert not loads


def _filter(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
  """Runs a classic-BPF seccomp program on one syscall, as the kernel would; its action."""
  data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
  acc, pc = 0, 0
  while True:
    code, jt, jf, k = struct.unpack_from("=HBBI", program, pc * 8)
    pc += 1
    if code == 0x20:  # ld [k]
      acc = struct.unpack_from("=I", data, k)[0]
    elif code == 0x06:  # ret k
      return k
    else:
      taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
      pc += jt if taken else jf


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_seccomp_program_decides_like_the_table(machine):
  arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[machine]
  nrs = sandbox._SYSCALL_NUMBERS[machine]  # pylint: disable=protected-access
  program = sandbox._seccomp_program(machine, 4321)  # pylint: disable=protected-access
  kill, allow, eperm, enosys = 0x80000000, 0x7FFF0000, 0x50001, 0x50026
  decide = functools.partial(_filter, program, arch)
  assert _filter(program, 0x40000003, nrs["execve"]) == kill      # i386 on x86_64: foreign
  assert _filter(program, arch ^ 1, 0) == kill
  assert decide(nrs["execve"]) == decide(nrs["socket"]) == decide(nrs["ptrace"]) == eperm
  assert decide(nrs["open_by_handle_at"]) == decide(nrs["bpf"]) == decide(nrs["mount"]) == eperm
  assert decide(nrs["clone"], 0x11) == eperm                       # fork: SIGCHLD, no thread
  assert decide(nrs["clone"], 0x3D0F00) == allow                   # pthread_create's flags
  assert decide(nrs["clone3"]) == enosys
  assert decide(nrs["kill"], 4321) == decide(nrs["kill"], 0) == allow
  assert decide(nrs["kill"], -4321 & 0xFFFFFFFF) == allow
  assert decide(nrs["kill"], 1) == decide(nrs["tgkill"], 4322) == eperm
  assert decide(0) == decide(nrs["seccomp"]) == allow              # read; more filters
  if machine == "x86_64":
    assert decide(0x40000000 + 59) == kill                         # x32 execve


# --------------------------------------------------------------------------------------------
# The launcher.

def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat", "rb") as f:
      return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
  except OSError:
    return False


def test_timeout_kills_the_child_and_its_grandchildren():
  action = """
      import subprocess, time
      stays = subprocess.Popen(["sleep", "60"])
      leaves = subprocess.Popen(["sleep", "60"], start_new_session=True)
      orphan = subprocess.run(  # another process group, and its parent is gone
          ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True,
          process_group=0).stdout
      print(stays.pid, leaves.pid, orphan, flush=True)
      time.sleep(60)
      """
  with run_child(action, install="none", timeout_s=2) as run:
    assert run.timed_out and run.returncode == -9
    assert 2 <= run.wall_s < 10
    grandchildren = [int(pid) for pid in run.stdout.split()]
  assert len(grandchildren) == 3
  assert not any(_alive(pid) for pid in grandchildren)


def test_memory_limit_kills_a_growing_child():
  action = """
      import time
      chunks = []
      for _ in range(64):  # 1 GiB, touched
        chunks.append(b"x" * (16 << 20))
        time.sleep(0.005)
      print("allocated", flush=True)
      """
  with run_child(action, install="none", memory_bytes=300 << 20) as run:
    assert run.out_of_memory and not run.timed_out and run.returncode == -9
    assert "allocated" not in run.stdout


def test_output_is_captured_apart_and_truncated():
  with run_child("sys.stdout.write('o' * 100_000); sys.stderr.write('err')",
                 install="none") as run:
    assert run.returncode == 0
    assert run.stdout.startswith("o" * OUTPUT_CAP + "\n[sandbox: ")
    assert run.stdout.endswith(f"{100_000 + len('survived') + 1 - OUTPUT_CAP} more bytes cut]")
    assert run.stderr == "err"


def test_environment_is_scrubbed_and_identity_matches_the_layers(monkeypatch):
  monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
  with run_child("print(json.dumps(dict(env=dict(os.environ), uid=os.getuid())))",
                 install="none") as run:
    seen = json.loads(run.stdout.splitlines()[0])
    scratch = str(run.scratch)
    layers = run.layers
  env = seen["env"]
  assert "HF_TOKEN" not in env
  assert set(env) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE",
                      "PYTHONNOUSERSITE", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "PYTHONPATH",
                      sandbox.REPORT_FD_ENV, sandbox.PARENT_PID_ENV, MARK_ENV}
  assert env["HOME"] == env["TMPDIR"] == scratch and env["CUDA_VISIBLE_DEVICES"] == ""
  assert {"new-session", "scrubbed-env", "rlimits"} <= set(layers)
  assert seen["uid"] == (sandbox.NOBODY if "setuid-nobody" in layers else os.getuid())


def test_scratch_is_removed_also_when_the_caller_raises():
  action = "os.makedirs('a/b'); open('a/b/f', 'w').write('x'); os.chmod('a', 0)"
  with run_child(action, install="none") as run:
    scratch = run.scratch
    assert (scratch / "a").is_dir()
  assert not scratch.exists()
  with pytest.raises(RuntimeError), run_child("", install="none") as run:
    scratch = run.scratch
    raise RuntimeError("the caller fails")
  assert not scratch.exists()


def test_read_file_refuses_links_and_oversized_files():
  action = """
      open("plain", "w").write("12345")
      os.symlink("/etc/passwd", "soft")
      open("shared", "w").write("x")
      os.link("shared", "hard")
      """
  with run_child(action, install="none") as run:
    assert run.read_file("plain", max_bytes=5) == b"12345"
    with pytest.raises(ValueError):
      run.read_file("plain", max_bytes=4)
    with pytest.raises(OSError):
      run.read_file("soft", max_bytes=1 << 20)
    with pytest.raises(ValueError):
      run.read_file("hard", max_bytes=1 << 20)
    with pytest.raises(ValueError):
      run.read_file("../plain", max_bytes=1 << 20)


# The parent of a sandboxed run, killed while its child sleeps: stands in for a killed worker.
MIDDLE = textwrap.dedent("""
    import json, sys
    from pallasbench_dataset.evaluation.sandbox import run_sandboxed
    job, mark = sys.argv[1], sys.argv[2]
    run_sandboxed([sys.executable, "-c", sys.argv[3]], stdin=job.encode(), timeout_s=120,
                  memory_bytes=2**31, extra_env={sys.argv[4]: mark})
    """)


def _sleeping(pids: list[int]) -> bool:
  """Whether one of `pids` sleeps in the kernel's nanosleep: the child then runs its action,
  which comes after every layer it installs."""
  for pid in pids:
    try:
      if "nanosleep" in pathlib.Path(f"/proc/{pid}/wchan").read_text():
        return True
    except OSError:
      continue
  return False


def test_exporter_dies_with_the_process_that_started_it():
  mark = uuid.uuid4().hex
  job = dict(action="import time; print('started', flush=True); time.sleep(100)", setup="",
             install="all", jax=False, target="", port=0, module=sandbox.__file__)
  import subprocess  # pylint: disable=import-outside-toplevel
  middle = subprocess.Popen([sys.executable, "-c", MIDDLE, json.dumps(job), mark, CHILD, MARK_ENV])
  deadline = time.monotonic() + 60
  while not _sleeping(_survivors(mark)) and time.monotonic() < deadline:
    time.sleep(0.1)
  assert _sleeping(_survivors(mark)), "the sandboxed child never reached its action's sleep"
  middle.kill()
  middle.wait()
  deadline = time.monotonic() + 10
  while _survivors(mark) and time.monotonic() < deadline:
    time.sleep(0.1)
  left = _survivors(mark)
  for pid in left:
    os.kill(pid, signal.SIGKILL)
  assert not left, "the exporter outlived the process that started it"
