"""The exporter's sandbox: its walls on every thread, its tripwire, and the launcher's limits.

Every child runs through run_sandboxed(), so the walls are up before the child's first line
(boot.py). A child reads a job on stdin, optionally starts jax and arms the tripwire, then
runs its `action`. Attempts the walls refuse come back as errno names; an action the tripwire
refuses must end the child with SANDBOX_EXIT, a `refused <event> ...` report line and no trace
outside its scratch folder. Each attempt is made from the main thread, from a thread the
candidate starts and from an XLA worker thread (a host callback queued behind a computation):
a wall tested only from the main thread is not a wall.
"""

import dataclasses
import dis
import errno
import functools
import itertools
import json
import os
import pathlib
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import textwrap
import types
import uuid

import jax
import numpy as np
import pytest
from jax.experimental import pallas as pl

from pallasbench_dataset.evaluation import sandbox
from pallasbench_dataset.evaluation.sandbox import (
    ALL_WALLS, OUTPUT_CAP, SANDBOX_EXIT, WallsUnavailable, launch, run_sandboxed, tripwire,
    walls)
from pallasbench_dataset.tasks import TASKS
from tests.paths import REPO

MEMORY_BYTES = 4 << 30
MARK_ENV = "SANDBOX_TEST_MARK"
LINUX = sys.platform == "linux" and os.uname().machine in ("x86_64", "aarch64")
ROOT = os.geteuid() == 0
# What a child of root needs to run at all; the launcher tests add nothing else, so their
# children may start processes of their own.
BARE = ("veil", "unprivileged")

CHILD = textwrap.dedent("""
    import json, os, pathlib, sys
    job = json.loads(sys.stdin.read())
    target, port = job["target"], job["port"]
    if job["jax"]:
      import jax
      jax.devices()
    from pallasbench_dataset.evaluation import sandbox
    if job["tripwire"]:
      sandbox.arm(os.getcwd(), int(os.environ[sandbox.REPORT_FD_ENV]))
    exec(job["action"])
    print("survived", flush=True)
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


def run_child(action: str, *, walls_: tuple[str, ...] = ALL_WALLS, tripwire_: bool = True,
              with_jax: bool = False, target: str = "", port: int = 0, timeout_s: float = 60,
              memory_bytes: int = MEMORY_BYTES, result_cap: int = 0) -> sandbox.SandboxRun:
  """Runs CHILD in the sandbox, then checks that none of its processes is left."""
  mark = uuid.uuid4().hex
  job = dict(action=textwrap.dedent(action), tripwire=tripwire_, jax=with_jax, target=target,
             port=port)
  run = run_sandboxed([sys.executable, "-c", CHILD], stdin=json.dumps(job).encode(),
                      timeout_s=timeout_s, memory_bytes=memory_bytes,
                      extra_env={MARK_ENV: mark}, walls=walls_, result_cap=result_cap,
                      tripwire=tripwire_)
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
  shutil.rmtree(home)


# --------------------------------------------------------------------------------------------
# The walls, from every thread.

# Runs `attempts` (name -> a function of no argument) from the main thread, from a thread it
# starts and from an XLA worker thread, into `results` {context: {name: outcome}} with outcome
# "allowed" or what was raised (the errno's name for an OSError); CONTEXTS prints them.
PROBED = textwrap.dedent("""
    import threading
    import jax, jax.numpy as jnp
    main_thread, results = threading.get_native_id(), {}
    results["main"] = probe()
    worker = threading.Thread(target=lambda: results.update(thread=probe()))
    worker.start()
    worker.join()
    def callback(x):
      results["xla"] = probe()
      results["xla_thread"] = threading.get_native_id()
      return x
    big = jax.jit(lambda x: jnp.tanh(x @ x))
    call = jax.jit(lambda y: jax.pure_callback(callback, jax.ShapeDtypeStruct(y.shape, y.dtype),
                                               y) + 1)
    x = jnp.ones((512, 512))
    for _ in range(20):  # an input still being computed: the callback runs on XLA's thread
      call(big(x)).block_until_ready()
      if results.get("xla_thread", main_thread) != main_thread:
        break
    results["main_thread"] = main_thread
    """)
CONTEXTS = PROBED + "print(json.dumps(results))\n"

# Every capability the walls deny, as the candidate would try it without the tripwire; probe()
# gives {name: outcome}, the outcome "allowed" or what was raised (an OSError's errno name).
WALL_ATTEMPTS = textwrap.dedent("""
    import ctypes, errno, fcntl, resource, signal, socket, subprocess
    libc = ctypes.CDLL(None, use_errno=True)
    def raw(name, *args):
      numbers = {"x86_64": dict(mount=165, ptrace=101, io_uring_setup=425, bpf=321, keyctl=250,
                                personality=135, kcmp=312, memfd_secret=447, syslog=103,
                                shmget=29, semget=64, msgget=68, mq_open=240, inotify_init1=294,
                                io_setup=206),
                 "aarch64": dict(mount=40, ptrace=117, io_uring_setup=425, bpf=280, keyctl=219,
                                 personality=92, kcmp=272, memfd_secret=447, syslog=116,
                                 shmget=194, semget=190, msgget=186, mq_open=180,
                                 inotify_init1=26, io_setup=0)}
      nr = numbers[os.uname().machine][name]
      if libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args]) < 0:
        raise OSError(ctypes.get_errno(), name)
    def fork():
      if os.fork() == 0:
        os._exit(0)
    def prctl(option, value):
      if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl")
    parent = os.getppid()
    pipe_r, pipe_w = os.pipe()
    attempts = {
        "fork": fork,
        "posix_spawn": lambda: os.posix_spawn("/bin/true", ["/bin/true"], {}),
        "subprocess": lambda: subprocess.run(["/bin/true"]),
        "socket": socket.socket,
        "socketpair": socket.socketpair,
        "memfd_create": lambda: os.memfd_create("m"),
        "memfd_secret": lambda: raw("memfd_secret", 0),
        "fcntl_setown_parent": lambda: fcntl.fcntl(pipe_r, fcntl.F_SETOWN, parent),
        "fcntl_setsig": lambda: fcntl.fcntl(pipe_r, 10, signal.SIGKILL),
        "fcntl_setpipe_sz": lambda: fcntl.fcntl(pipe_w, 1031, 1 << 20),
        "setpriority_parent": lambda: os.setpriority(os.PRIO_PROCESS, parent, 10),
        "setpriority_user": lambda: os.setpriority(os.PRIO_USER, 0, 10),
        "setaffinity_parent": lambda: os.sched_setaffinity(parent, {0}),
        "prlimit_parent": lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE, (8, 8)),
        "raise_own_memory_limit": lambda: resource.setrlimit(resource.RLIMIT_AS, (-1, -1)),
        "kill_parent": lambda: os.kill(parent, 0),
        "prctl_undo_parent_death": lambda: prctl(1, 0),
        "prctl_let_a_tracer_in": lambda: prctl(0x59616D61, -1),
        "ptrace_parent": lambda: raw("ptrace", 16, parent, 0, 0),
        "mount": lambda: raw("mount", 0, 0, 0, 0, 0),
        "unshare": lambda: os.unshare(os.CLONE_NEWUSER),
        "io_uring": lambda: raw("io_uring_setup", 8, 0),
        "bpf": lambda: raw("bpf", 0, 0, 0),
        "keyctl": lambda: raw("keyctl", 0, 0),
        "personality": lambda: raw("personality", 0x0400000),
        "kcmp_parent": lambda: raw("kcmp", parent, os.getpid(), 0, 0, 0),
        "syslog": lambda: raw("syslog", 3, 0, 0),
        "shmget": lambda: raw("shmget", 0, 4096, 0o1600),     # IPC_PRIVATE, IPC_CREAT | 0600
        "semget": lambda: raw("semget", 0, 1, 0o1600),
        "msgget": lambda: raw("msgget", 0, 0o1600),
        "mq_open": lambda: raw("mq_open", 0, 0o100, 0o600, 0),  # EFAULT were it let through
        "inotify_init1": lambda: raw("inotify_init1", 0),
        "io_setup": lambda: raw("io_setup", 1, 0),            # EFAULT were it let through
        "write_outside": lambda: open(target, "w"),
        "rdwr_outside": lambda: os.close(os.open(target, os.O_RDWR | os.O_CREAT)),
        "write_inside": lambda: open("inside", "w"),
        "read_secret": lambda: open(job["secret"]).read(),
        "read_parent_environ": lambda: open(f"/proc/{parent}/environ").read(),
        "readlink_parent_cwd": lambda: os.readlink(f"/proc/{parent}/cwd"),
        "list_root_home": lambda: os.listdir("/root"),
    }
    def probe():
      found = {}
      for name, action in attempts.items():
        try:
          action()
          found[name] = "allowed"
        except OSError as e:
          found[name] = errno.errorcode.get(e.errno, str(e.errno))
        except Exception as e:
          found[name] = type(e).__name__
      return found
    """)
# An attempt that returns normally here would be a hole. Where the answer is not an errno
# (prctl's wrapper raises as it can), only these names are a refusal.
REFUSALS = {"EPERM", "EACCES", "ENOENT", "ValueError"}
NOT_ROOT_ONLY = {"readlink_parent_cwd", "list_root_home"}  # denied by the change of user


def _assert_denied_everywhere(results: dict) -> None:
  """Every attempt of WALL_ATTEMPTS refused, from every context of PROBED."""
  assert results["xla_thread"] != results["main_thread"], "the callback ran on the main thread"
  for context in ("main", "thread", "xla"):
    outcomes = results[context]
    if not ROOT:
      outcomes = {k: v for k, v in outcomes.items() if k not in NOT_ROOT_ONLY}
    allowed = {name: outcome for name, outcome in outcomes.items() if outcome not in REFUSALS}
    assert not allowed, (context, allowed)


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
def test_walls_deny_every_capability_from_every_thread(target, secret):
  action = (WALL_ATTEMPTS.replace('job["secret"]', repr(str(secret))) + CONTEXTS)
  with run_child(action, tripwire_=False, with_jax=True, target=str(target),
                 timeout_s=120) as run:
    assert run.returncode == 0 and not run.violations, run.stderr[-3000:]
    assert {"landlock", "seccomp"} | ({"unprivileged"} if ROOT else set()) <= set(run.layers)
    results = json.loads(run.stdout.splitlines()[0])
  assert secret.read_text() not in run.stdout + run.stderr
  _assert_denied_everywhere(results)
  assert not os.path.lexists(target)


# The judge's analysis helper as an exploit of MLIR's parser would leave it: its own program,
# but its answer to a request is the wall probes' results (as a refusal, the one answer that
# carries text back), made from its main thread, a thread and an XLA worker thread.
SUBVERTED_ANALYSER = textwrap.dedent("""
    import json, os, sys
    from pallasbench_dataset.evaluation.judge import analysis_process
    job = {{"secret": {secret!r}}}
    target = {target!r}
    PROBES = {probes!r}
    def answer(_request):
      namespace = dict(globals())
      exec(PROBES, namespace)
      return json.dumps({{"refused": json.dumps(namespace["results"])}}).encode()
    analysis_process._answer = answer
    sys.exit(analysis_process.serve())
    """)


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
def test_the_judges_analysis_helper_is_behind_the_same_walls(monkeypatch, target, secret):
  from pallasbench_dataset.evaluation.judge import analysis_process  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.judge.module_analysis import ModuleAnalysisError  # pylint: disable=import-outside-toplevel
  code = SUBVERTED_ANALYSER.format(secret=str(secret), target=str(target),
                                   probes=WALL_ATTEMPTS + PROBED)
  monkeypatch.setattr(analysis_process, "_PROGRAM", (sys.executable, "-c", code))
  analyser = analysis_process.ModuleAnalyser(timeout_s=120)
  try:
    with pytest.raises(ModuleAnalysisError) as answered:
      analyser.analyse(b"any module")
  finally:
    analyser.close()
  assert {"landlock", "seccomp", "rlimits", "dies-with-parent", "own-tasks"} | (
      {"unprivileged"} if ROOT else set()) <= set(analyser.layers), analyser.layers
  assert secret.read_text() not in str(answered.value)
  _assert_denied_everywhere(json.loads(str(answered.value)))
  assert not os.path.lexists(target)


@pytest.mark.skipif(not ROOT, reason="only a child of root can fail to leave root")
def test_an_analysis_helper_that_cannot_be_walled_parses_nothing(monkeypatch):
  """A helper whose walls fail in the child (here: no identity to take) reports so and exits
  before its program's first line; the analyser raises WallsUnavailable, it never answers."""
  from pallasbench_dataset.evaluation.judge import analysis_process  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.evaluation.sandbox import launch  # pylint: disable=import-outside-toplevel
  config = launch._config  # pylint: disable=protected-access
  monkeypatch.setattr(launch, "_config", lambda *a: dataclasses.replace(config(*a), uid=None))
  analyser = analysis_process.ModuleAnalyser()
  with pytest.raises(WallsUnavailable, match="started as root with no identity to take"):
    analyser.analyse(b"any module")
  assert analyser.layers == () and analyser._child is None  # pylint: disable=protected-access


@pytest.mark.skipif(not ROOT, reason="only a child of root changes user")
def test_every_thread_runs_as_nobody_with_no_capability_no_new_privileges_and_seccomp():
  status = textwrap.dedent("""
      def probe():
        found = {}
        for task in os.listdir("/proc/self/task"):
          fields = dict(line.split(":", 1) for line in open(f"/proc/self/task/{task}/status"))
          found[task] = {k: fields[k].split() for k in ("Uid", "Gid", "CapEff", "CapPrm",
                                                        "CapBnd", "NoNewPrivs", "Seccomp")}
        return found
      """)
  with run_child(status + CONTEXTS, tripwire_=False, with_jax=True, timeout_s=120) as run:
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.splitlines()[0])
  threads = {tid: fields for context in ("main", "thread", "xla")
             for tid, fields in results[context].items()}
  assert len(threads) > 2
  for fields in threads.values():
    assert set(fields["Uid"]) == set(fields["Gid"]) == {str(walls.NOBODY)}
    assert int(fields["CapEff"][0], 16) == int(fields["CapPrm"][0], 16) == 0
    assert fields["NoNewPrivs"] == ["1"] and fields["Seccomp"] == ["2"]


# --------------------------------------------------------------------------------------------
# The tripwire: a refusal ends the process, whichever thread made it.

# (id, action, the refused event); `target` is a path outside scratch, `port` a listening
# loopback socket of the test.
FORBIDDEN = [
    ("popen", "import subprocess; subprocess.Popen(['/bin/sh', '-c', 'touch ' + target])",
     "subprocess.Popen"),
    ("os_system", "os.system('touch ' + target)", "os.system"),
    ("posix_spawn", "os.posix_spawn('/bin/touch', ['touch', target], {})", "os.posix_spawn"),
    ("fork_setsid_sleep", """
        import time
        if os.fork() == 0:
          os.setsid()
          time.sleep(30)
        """, "os.fork"),
    ("dunder_import_subprocess", "__import__('subprocess').run(['touch', target])",
     "subprocess.Popen"),
    ("socket_connect", "import socket; socket.socket().connect(('127.0.0.1', port))",
     "socket.__new__"),
    ("create_connection", "import socket; socket.create_connection(('127.0.0.1', port))",
     "socket.getaddrinfo"),
    ("ctypes_cdll", "import ctypes; ctypes.CDLL('libc.so.6')", "ctypes.dlopen"),
    ("write_absolute", "open(target, 'w').write('x')", "open"),
    ("write_relative", "open(os.path.relpath(target), 'w').write('x')", "open"),
    ("write_append", "open(target, 'a').write('x')", "open"),
    ("write_pathlib", "pathlib.Path(target).write_text('x')", "open"),
    ("os_open_read_write", "os.open(target, os.O_RDWR | os.O_CREAT)", "open"),
    ("os_open_with_dir_fd", """
        folder = os.open(os.path.dirname(target), os.O_PATH)
        os.open(os.path.basename(target), os.O_WRONLY | os.O_CREAT, dir_fd=folder)
        """, "open"),
    ("read_parent_environ", "open(f'/proc/{os.getppid()}/environ').read()", "open"),
    ("read_parent_memory", "open(f'/proc/{os.getppid()}/mem', 'rb')", "open"),
    ("read_parent_from_its_cwd", "os.chdir('/proc'); open(f'{os.getppid()}/environ')", "open"),
    ("read_parent_through_dir_fd",
     "os.open(f'../{os.getppid()}/environ', os.O_RDONLY, dir_fd=os.open('/proc/self', 0))",
     "open"),
    ("mkdir_outside", "os.mkdir(target)", "os.mkdir"),
    ("symlink_inside", "os.symlink(target, 'link')", "os.symlink"),
    ("gc_get_objects", "import gc; gc.get_objects()", "gc.get_objects"),
    ("gc_get_referrers", "import gc; gc.get_referrers(sys.audit)", "gc.get_referrers"),
    ("replace_code", "def f(): pass\nf.__code__ = (lambda: 0).__code__", "object.__setattr__"),
    ("settrace", "sys.settrace(lambda *a: None)", "sys.settrace"),
    ("second_hook", "sys.addaudithook(lambda *a: None)", "sys.addaudithook"),
    ("kill_parent", "os.kill(os.getppid(), 0)", "os.kill"),
    ("raise_rlimit", "import resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0))",
     "resource.setrlimit"),
    ("fcntl_setown", "import fcntl; fcntl.fcntl(0, fcntl.F_SETOWN, os.getppid())",
     "fcntl.fcntl"),
    ("putenv_xla_flags", "os.environ['XLA_FLAGS'] = '--xla_dump_to=' + target", "os.putenv"),
    ("sqlite_file", "import sqlite3; sqlite3.connect(target)", "sqlite3.connect"),
    ("subinterpreter", "import _xxsubinterpreters; _xxsubinterpreters.create()", "import"),
    ("extension_from_outside", """
        import importlib.util
        spec = importlib.util.spec_from_file_location('_bisect', target + '.so')
        importlib.util.module_from_spec(spec)
        """, "import"),
    # The hook uses only what it captured when it was armed: rebinding anything changes nothing.
    ("rebound_globals", """
        import builtins
        from pallasbench_dataset.evaluation.sandbox import tripwire, walls
        os.write = os._exit = os.lstat = lambda *a: None
        builtins.type, builtins.str, builtins.BaseException = (lambda *a: str), bytes, int
        walls.SANDBOX_EXIT, tripwire.REFUSED_EVENTS = 0, frozenset()
        vars(tripwire).update(os=None, sys=None, stat=None)
        open(target, 'w').write('x')
        """, "open"),
]


@pytest.mark.parametrize(("action", "event"), [f[1:] for f in FORBIDDEN],
                         ids=[f[0] for f in FORBIDDEN])
def test_forbidden_action_ends_the_child_and_leaves_no_trace(action, event, target, listener):
  with run_child(action, target=str(target), port=listener.getsockname()[1]) as run:
    assert run.returncode == SANDBOX_EXIT, run.stderr
    assert run.violations and run.violations[0].split()[1] == event, run.violations
    assert "survived" not in run.stdout
  assert not os.path.lexists(target)
  with pytest.raises(BlockingIOError):
    listener.accept()


# The same refusals from a thread the candidate starts and from an XLA worker thread; the
# process ends there too (not just the thread), and nothing after the action runs.
THREADED = {
    "thread": """
        import threading
        worker = threading.Thread(target=lambda: exec(ACTION))
        worker.start()
        worker.join()
        """,
    "xla": """
        import threading
        import jax.numpy as jnp
        main_thread = threading.get_native_id()
        def callback(x):
          if threading.get_native_id() != main_thread:
            exec(ACTION)
          return x
        big = jax.jit(lambda x: jnp.tanh(x @ x))
        call = jax.jit(lambda y: jax.pure_callback(callback, jax.ShapeDtypeStruct(y.shape, y.dtype), y))
        x = jnp.ones((512, 512))
        for _ in range(20):
          call(big(x)).block_until_ready()
        print("never on an XLA thread", flush=True)
        """,
}
THREADED_ACTIONS = {f[0]: f[1:] for f in FORBIDDEN
                    if f[0] in ("write_absolute", "popen", "ctypes_cdll", "gc_get_referrers")}


@pytest.mark.parametrize("context", sorted(THREADED))
@pytest.mark.parametrize("name", sorted(THREADED_ACTIONS))
def test_forbidden_action_from_another_thread_ends_the_whole_child(context, name, target):
  action, event = THREADED_ACTIONS[name]
  code = f"ACTION = {textwrap.dedent(action)!r}\n" + textwrap.dedent(THREADED[context])
  with run_child(code, target=str(target), with_jax=context == "xla", timeout_s=120) as run:
    assert "never on an XLA thread" not in run.stdout
    assert run.returncode == SANDBOX_EXIT, run.stderr[-2000:]
    assert run.violations and run.violations[0].split()[1] == event, run.violations
    assert "survived" not in run.stdout
  assert not os.path.lexists(target)


def test_refusal_holds_when_the_candidate_closes_the_report_fd(target):
  with run_child(f"os.close(int(os.environ[{sandbox.REPORT_FD_ENV!r}])); open(target, 'w')",
                 target=str(target)) as run:
    assert run.returncode == SANDBOX_EXIT and not run.violations and run.violated
  assert not target.exists()


def test_tripwire_reads_no_global_name():
  """A candidate can rebind module globals and builtins: the hook must use only its closure."""
  hook = tripwire.make_hook(tempfile.gettempdir(), 2, ())
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


# --------------------------------------------------------------------------------------------
# Single walls, each alone.

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


@pytest.mark.skipif(not LINUX, reason="Landlock is Linux only")
def test_landlock_alone_refuses_every_change_and_reads_outside_the_allow_list(target, secret):
  action = textwrap.dedent(f"""
      import errno
      results = {{}}
      for name, act in dict(write_inside=lambda: open("inside", "w"),
                            write_outside=lambda: open(target, "w"),
                            mkdir_outside=lambda: os.mkdir(target),
                            mkfifo_inside=lambda: os.mkfifo("fifo"),
                            read_secret=lambda: open({str(secret)!r}).read(),
                            read_interpreter=lambda: open(sys.executable, "rb").read(4),
                            read_project=lambda: open(sandbox.__file__).read(4),
                            read_own_proc=lambda: open("/proc/self/status").read(4)).items():
        try:
          act()
          results[name] = "allowed"
        except OSError as e:
          results[name] = errno.errorcode[e.errno]
      print(json.dumps(results))
      """)
  with run_child(action, walls_=(*BARE, "landlock"), tripwire_=False,
                 target=str(target)) as run:
    if "landlock" not in run.layers:
      pytest.skip("this kernel has no Landlock")
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.splitlines()[0])
  readable = ("read_interpreter", "read_project", "read_own_proc")
  assert {k: results.pop(k) for k in readable} == dict.fromkeys(readable, "allowed")
  assert results == dict.fromkeys(results, "EACCES"), results
  assert not os.path.lexists(target)


@pytest.mark.skipif(not ROOT, reason="only a child of root is veiled")
def test_veil_shows_the_interpreter_to_nobody_and_hides_the_rest_of_its_folder():
  plan = walls.plan_veil([os.path.realpath(sys.base_prefix)], walls.NOBODY)
  if not plan:
    pytest.skip("user nobody can reach the interpreter without a veil here")
  covered, shown = plan[0]
  hidden = sorted(set(os.listdir(covered)) - {p[len(covered):].strip("/").split("/")[0]
                                               for p in shown})
  action = f"print(json.dumps(sorted(os.listdir({covered!r}))))"
  with run_child(action, walls_=BARE, tripwire_=False) as run:
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[0])
  assert seen and not set(seen) & set(hidden)


@pytest.mark.skipif(not ROOT, reason="only a child of root changes user")
def test_a_private_tmpdir_still_gives_nobody_its_scratch(monkeypatch, tmp_path):
  private = tmp_path / "private-tmp"
  private.mkdir(mode=0o700)
  monkeypatch.setenv("TMPDIR", str(private))
  monkeypatch.setattr(tempfile, "tempdir", None)
  with run_child("print(os.getcwd(), os.getuid(), flush=True)") as run:
    assert run.returncode == 0, run.stderr
    cwd, uid = run.stdout.split()[:2]
  assert cwd.startswith(str(private)) and int(uid) == walls.NOBODY


@pytest.mark.skipif(not ROOT, reason="only root could run the child with privileges")
def test_a_child_of_root_is_refused_rather_than_run_privileged():
  with pytest.raises(WallsUnavailable):
    run_sandboxed([sys.executable, "-c", "pass"], stdin=b"", timeout_s=10,
                  memory_bytes=MEMORY_BYTES, walls=("seccomp", "landlock"))


def _allow_list_for_a_fresh_scratch() -> tuple[walls.ReadAllowList, str]:
  """The read allow-list an exporter started now would get, and its scratch (made, removed)."""
  scratch = tempfile.mkdtemp(prefix="pallasbench-sandbox-")
  try:
    return walls.read_allow_list(os.path.realpath(scratch)), scratch
  finally:
    os.rmdir(scratch)


def _readable(allowed: walls.ReadAllowList, path: str) -> bool:
  """As Landlock decides: by the real paths of the file and of each rule's folder."""
  path = os.path.realpath(path)
  return (path in {os.path.realpath(f) for f in allowed.files}
          or any(walls.is_within(path, os.path.realpath(f)) for f in allowed.folders))


# What no exporter may read, as the controls of copied solutions and of the checkout try it.
PROJECT_SECRETS = ("kernels_gpu/relu.py", "kernels_tpu/relu.py", "data/README.md", ".git",
                   "tests/controls/adv_ctypes_relu.py", "builder/build.py", "scripts/setup.sh",
                   "pallasbench_dataset/references/relu.py", "pyproject.toml")
def _around_libraries() -> set[str]:
  """The folders that hold a hidden kernel library (walls._KERNEL_LIBRARIES): listed only."""
  return {os.path.realpath(p) for name in walls._KERNEL_LIBRARIES  # pylint: disable=protected-access
          for folder in walls._package_folders(name)  # pylint: disable=protected-access
          for p in pathlib.Path(folder).parents}


# JAX's own Pallas kernels (red team round 11 called its softmax and attention as the kernel).
LIBRARY_KERNELS = ("ops/__init__.py", "ops/gpu/softmax.py", "ops/gpu/attention.py",
                   "ops/gpu/hopper_matmul_mgpu.py", "ops/tpu/flash_attention.py")


@pytest.mark.parametrize("where", ["script", "checkout on sys.path", "checkout on PYTHONPATH"])
def test_read_allow_list_holds_what_the_exporter_needs_and_no_secret(monkeypatch, where):
  """Whatever the working directory or the parent's sys.path (`python -m` from the checkout
  puts the checkout there), the library and the interpreter are readable; the kernel trees,
  released data, references, .git and the rest of the checkout are not, and the checkout is
  at most listed (when PYTHONPATH names it, so the import system can search it)."""
  monkeypatch.delenv("PYTHONPATH", raising=False)
  if where == "checkout on sys.path":
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "path", [str(REPO), *sys.path])
  elif where == "checkout on PYTHONPATH":
    monkeypatch.setenv("PYTHONPATH", str(REPO))
  allowed, scratch = _allow_list_for_a_fresh_scratch()
  assert _readable(allowed, sys.executable) and _readable(allowed, os.__file__)
  assert _readable(allowed, np.__file__) and _readable(allowed, jax.__file__)
  assert _readable(allowed, sandbox.__file__) and _readable(allowed, tripwire.__file__)
  assert _readable(allowed, str(REPO / "pallasbench_dataset" / "tasks" / "__init__.py"))
  for name in PROJECT_SECRETS:
    assert not _readable(allowed, str(REPO / name)), name
  pallas = pathlib.Path(pl.__file__).parent
  for name in LIBRARY_KERNELS:
    assert not _readable(allowed, str(pallas / name)), name
  assert _readable(allowed, str(pallas / "triton.py")) and str(pallas) in allowed.listed
  test_util = pathlib.Path(jax.__file__).parent / "_src" / "internal_test_util"
  assert not _readable(allowed, str(test_util / "__init__.py"))
  for entry in (*allowed.folders, *allowed.files, *allowed.listed):
    assert os.path.realpath(entry) == entry, entry  # a link's rule would hold its target
  assert str(REPO / "pallasbench_dataset") in allowed.listed
  around = _around_libraries()
  assert set(allowed.listed) - around <= {str(REPO), str(REPO / "pallasbench_dataset")}
  assert (str(REPO) in allowed.listed) == (where == "checkout on PYTHONPATH")
  home = os.path.expanduser("~")
  for secret in ("/etc/shadow", "/etc/passwd", "/etc/ssh/ssh_host_rsa_key", "/root/.bashrc",
                 os.path.join(home, ".ssh/id_rsa"), os.path.join(home, ".netrc"),
                 os.path.join(home, ".cache/huggingface/token"),
                 os.path.join(home, ".cache/pallasbench/verdicts"), "/proc/1/environ",
                 f"/proc/{os.getppid()}/environ", scratch, os.path.dirname(scratch)):
    assert not _readable(allowed, secret), secret
  for folder in allowed.folders:
    assert folder not in ("/", "/etc", "/root", "/home", "/proc", "/sys", "/dev", "/tmp", home)
  system_files = {os.path.realpath(f) for f in ("/etc/ld.so.cache", "/etc/localtime",
                                                "/proc/cpuinfo", "/dev/null", "/dev/zero",
                                                "/dev/random", "/dev/urandom")}
  library = {str(p) for p in (REPO / "pallasbench_dataset").iterdir() if p.is_file()}
  beside_hidden = {f for f in allowed.files if os.path.dirname(f) in around}
  assert set(allowed.files) - beside_hidden <= system_files | library


def test_read_allow_list_keeps_only_what_exists_outside_scratch(monkeypatch, tmp_path):
  """Each source of the allow-list on a made-up PYTHONPATH: folders that exist and neither lie
  in scratch nor contain it, the library wherever it is, zip files on PYTHONPATH and the
  system's files, none listed twice (a file within an allowed folder) and nothing that does
  not exist. The parent's own sys.path adds nothing."""
  scratch, outside = tmp_path / "scratch", tmp_path / "outside"
  (scratch / "fakepkg").mkdir(parents=True)
  (outside / "lib").mkdir(parents=True)
  for zipped in (outside / "lib.zip", outside / "lib" / "inner.zip", scratch / "inner.zip"):
    zipped.write_bytes(b"PK")
  project = os.path.realpath(os.path.dirname(sandbox.__file__).rsplit("/evaluation", 1)[0])
  entries = ["", "/", str(outside / "lib"), str(outside / "lib.zip"),
             str(outside / "lib" / "inner.zip"), str(tmp_path / "missing"),
             str(tmp_path / "missing.zip"), str(scratch), str(scratch / "inner.zip"),
             str(tmp_path)]
  monkeypatch.setenv("PYTHONPATH", os.pathsep.join(entries))
  monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere"), *sys.path])
  root = os.path.realpath(scratch)
  prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                            sys.base_exec_prefix)}
  assert set(walls.trusted_roots(root)) == {os.path.realpath(outside / "lib")} | prefixes
  allowed = walls.read_allow_list(root)
  assert os.path.realpath(outside / "lib") in allowed.folders
  assert project in allowed.listed and f"{project}/evaluation" in allowed.folders
  assert not any(walls.is_within(f, root) or walls.is_within(root, f)
                 for f in (*allowed.folders, *allowed.files, *allowed.listed))
  system = {os.path.realpath(f) for f in walls._SYSTEM_READ_FILES if os.path.exists(f)}  # pylint: disable=protected-access
  system -= {f for f in system if any(walls.is_within(f, g) for g in allowed.folders)}
  assert "/dev/null" in system  # /etc/localtime's zone file is within /usr
  library = {f for f in allowed.files if walls.is_within(f, project)}
  beside_hidden = {f for f in allowed.files if os.path.dirname(f) in _around_libraries()}
  assert (set(allowed.files) - library - beside_hidden
          == system | {os.path.realpath(outside / "lib.zip")})


def _fake_library(monkeypatch, site: pathlib.Path, *, checkout: bool) -> pathlib.Path:
  """A library `fakelib` (with its references) in `site`, a checkout or not, importable and
  named the sandbox's library for this test; `site` holds another module beside it."""
  library = site / "fakelib"
  (library / "references").mkdir(parents=True)
  (library / "__init__.py").write_text("")
  (library / "references" / "relu.py").write_text("")
  (site / "other.py").write_text("")
  if checkout:
    (site / "pyproject.toml").write_text("")
  monkeypatch.syspath_prepend(str(site))
  monkeypatch.setattr(walls, "_LIBRARY", "fakelib")
  return library


@pytest.mark.parametrize("checkout", [False, True])
def test_read_allow_list_hides_only_a_checkout_around_the_library_wherever_run_from(
    monkeypatch, tmp_path, checkout):
  """The folder the library lies in is hidden when it is a checkout (its pyproject.toml), not
  when it is an installation's site-packages, whatever the parent's working directory: the
  library's references are hidden either way."""
  site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
  elsewhere.mkdir()
  library = _fake_library(monkeypatch, site, checkout=checkout)
  monkeypatch.chdir(elsewhere)
  monkeypatch.setenv("PYTHONPATH", str(site))
  allowed = walls.read_allow_list(os.path.realpath(tmp_path / "scratch"))
  assert _readable(allowed, str(library / "__init__.py"))
  assert not _readable(allowed, str(library / "references" / "relu.py"))
  assert _readable(allowed, str(site / "other.py")) != checkout


def test_read_allow_list_walks_links_once_and_grants_no_outside_target(
    monkeypatch, tmp_path):
  """A folder listed entry by entry (the library, its references hidden) may hold links: one
  back to the folder itself is walked once, one to a folder nothing allows grants nothing."""
  library = _fake_library(monkeypatch, tmp_path / "site", checkout=False)
  outside = tmp_path / "outside"
  outside.mkdir()
  (outside / "secret.txt").write_text("")
  (library / "loop").symlink_to(library)
  (library / "escape").symlink_to(outside)
  monkeypatch.delenv("PYTHONPATH", raising=False)
  allowed = walls.read_allow_list(os.path.realpath(tmp_path / "scratch"))
  assert _readable(allowed, str(library / "__init__.py"))
  assert str(library) in allowed.listed
  assert not _readable(allowed, str(outside / "secret.txt"))
  assert not _readable(allowed, str(library / "references" / "relu.py"))


def test_read_allow_list_grants_nothing_in_scratch_even_a_library_there(monkeypatch, tmp_path):
  """Scratch is the candidate's: a library the parent finds within it (a planted package of
  the library's name) is granted nowhere, folder, file or listing."""
  scratch = tmp_path / "scratch"
  _fake_library(monkeypatch, scratch, checkout=False)
  monkeypatch.delenv("PYTHONPATH", raising=False)
  root = os.path.realpath(scratch)
  allowed = walls.read_allow_list(root)
  assert not any(walls.is_within(f, root)
                 for f in (*allowed.folders, *allowed.files, *allowed.listed))


def test_read_allow_list_does_not_even_list_a_hidden_folder_on_pythonpath(monkeypatch):
  """PYTHONPATH naming a kernel tree makes it no trusted root: neither readable nor listed
  (its listing names the shipped solutions), as nothing allowed lies within it."""
  tree = REPO / "kernels_gpu"
  monkeypatch.setenv("PYTHONPATH", str(tree))
  allowed, _ = _allow_list_for_a_fresh_scratch()
  assert not _readable(allowed, str(tree / "relu.py"))
  assert os.path.realpath(tree) not in allowed.listed


def test_is_within_is_a_prefix_of_whole_path_components():
  assert walls.is_within("/a/bX", "/a/bX") and walls.is_within("/a/bX/c", "/a/bX")
  assert walls.is_within("/a/b/c", "/a/b/") and walls.is_within("/a", "/")
  assert not walls.is_within("/a/bc", "/a/b") and not walls.is_within("/a", "/a/b")


def _filter(program: bytes, arch: int, nr: int, *args: int) -> int:
  """Runs a classic-BPF seccomp program on one syscall, as the kernel would; its action."""
  padded = [a & 0xFFFFFFFFFFFFFFFF for a in args] + [0] * (6 - len(args))
  data = struct.pack("=iIQ6Q", nr, arch, 0, *padded)
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
  nrs = walls._SYSCALL_NUMBERS[machine]  # pylint: disable=protected-access
  program = walls.seccomp_program(machine, 4321)
  kill, allow, eperm, enosys = 0x80000000, 0x7FFF0000, 0x50001, 0x50026
  decide = functools.partial(_filter, program, arch)
  assert _filter(program, 0x40000003, nrs["execve"]) == kill      # i386 on x86_64: foreign
  assert _filter(program, arch ^ 1, 0) == kill
  assert decide(nrs["execve"]) == decide(nrs["socket"]) == decide(nrs["ptrace"]) == eperm
  assert decide(nrs["open_by_handle_at"]) == decide(nrs["bpf"]) == decide(nrs["mount"]) == eperm
  assert decide(nrs["memfd_create"]) == decide(nrs["memfd_secret"]) == eperm
  assert decide(nrs["personality"]) == decide(nrs["kcmp"]) == decide(nrs["syslog"]) == eperm
  pools = ["shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
           "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
           "mq_timedreceive", "mq_notify", "mq_getsetattr", "inotify_init1", "inotify_add_watch",
           "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents"]
  pools += ["inotify_init"] * (machine == "x86_64")  # aarch64 has only inotify_init1
  assert {name: decide(nrs[name]) for name in pools} == dict.fromkeys(pools, eperm)
  assert decide(nrs["inotify_add_watch"], 3, 0, 0) == eperm  # whatever its arguments
  assert decide(nrs["clone"], 0x11) == eperm                       # fork: SIGCHLD, no thread
  assert decide(nrs["clone"], 0x3D0F00) == allow                   # pthread_create's flags
  assert decide(nrs["clone3"]) == enosys
  assert decide(nrs["sched_setaffinity"], 0) == decide(nrs["sched_setaffinity"], 4321) == eperm
  for name in ("kill", "prlimit64", "sched_setscheduler"):
    assert decide(nrs[name], 4321) == decide(nrs[name], 0) == allow, name
    assert decide(nrs[name], 1) == decide(nrs[name], 4322) == eperm, name
  assert decide(nrs["kill"], -4321) == allow and decide(nrs["tgkill"], 4322) == eperm
  assert decide(nrs["setpriority"], 0, 0) == decide(nrs["setpriority"], 0, 4321) == allow
  assert decide(nrs["setpriority"], 0, 1) == decide(nrs["setpriority"], 2, 0) == eperm
  assert decide(nrs["setpriority"], 1, 4321) == eperm              # PRIO_PGRP
  assert decide(nrs["setpriority"], -4321, 0) == eperm             # no other `which`
  assert decide(nrs["prlimit64"], 0, 7) == decide(nrs["kill"], 0, 9) == allow  # its own limits
  for command in walls.DENIED_FCNTL:
    assert decide(nrs["fcntl"], 3, command) == eperm, command
  assert decide(nrs["fcntl"], 3, 3) == decide(nrs["fcntl"], 3, 1030) == allow  # GETFL, DUPFD
  for option in walls.DENIED_PRCTL:
    assert decide(nrs["prctl"], option) == eperm, option
  assert decide(nrs["prctl"], 15) == decide(nrs["prctl"], 38) == allow  # SET_NAME, NO_NEW_PRIVS
  read = {"x86_64": 0, "aarch64": 63}[machine]                     # (aarch64's 0 is io_setup)
  assert decide(read) == decide(nrs["seccomp"]) == allow           # read; more filters
  if machine == "x86_64":
    assert decide(0x40000000 + 59) == kill                         # x32 execve


def test_plan_veil_covers_the_highest_closed_folder_and_binds_back_only_what_is_needed():
  base = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-veil-"))
  base.chmod(0o755)
  try:
    _check_veil_plan(base)
  finally:
    shutil.rmtree(base)


@pytest.mark.skipif(not ROOT, reason="only root can hand folders to user nobody")
def test_searchable_reads_the_bits_that_apply_to_nobody(tmp_path):
  """The owner's bits when nobody owns the folder, else the group's when its group is
  nobody's, else the others' bits: each class alone decides, as the kernel checks."""
  cases = [((walls.NOBODY, 0), 0o100, True), ((walls.NOBODY, 0), 0o077, False),
           ((0, walls.NOBODY), 0o010, True), ((0, walls.NOBODY), 0o701, False),
           ((0, 0), 0o001, True), ((0, 0), 0o770, False)]
  for (uid, gid), mode, searchable in cases:
    folder = tmp_path / f"{uid}-{gid}-{mode:o}"
    folder.mkdir()
    os.chown(folder, uid, gid)
    folder.chmod(mode)
    assert walls._searchable(str(folder), walls.NOBODY) is searchable, (uid, gid, oct(mode))  # pylint: disable=protected-access


def test_plan_veil_covers_each_closed_folder_apart_and_refuses_a_closed_root(monkeypatch):
  base = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-veil-"))
  base.chmod(0o755)
  try:
    _check_separate_covers(monkeypatch, base)
  finally:
    shutil.rmtree(base)


def _check_separate_covers(monkeypatch, tmp_path: pathlib.Path) -> None:
  for name in ("a", "b"):
    (tmp_path / name / "inside").mkdir(parents=True)
    (tmp_path / name).chmod(0o700)
  plan = walls.plan_veil([str(tmp_path / "b" / "inside"), str(tmp_path / "a" / "inside")],
                         walls.NOBODY)
  assert plan == ((str(tmp_path / "a"), (str(tmp_path / "a" / "inside"),)),
                  (str(tmp_path / "b"), (str(tmp_path / "b" / "inside"),)))
  if ROOT:  # a closed folder nobody owns is open to nobody
    os.chown(tmp_path / "a", walls.NOBODY, walls.NOBODY)
    assert walls.plan_veil([str(tmp_path / "a" / "inside")], walls.NOBODY) == ()
  monkeypatch.setattr(walls, "_searchable", lambda folder, uid: folder != "/")
  with pytest.raises(WallsUnavailable, match="user 65534 may not search '/'"):
    walls.plan_veil([str(tmp_path)], walls.NOBODY)


def test_plan_veil_shows_a_needed_folder_that_is_closed_itself():
  """A checkout cloned straight into `mktemp -d` (0700, root's) is itself on the read
  allow-list: its own entries are bound back under the cover, or nobody sees none of it."""
  base = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-veil-"))
  base.chmod(0o755)
  try:
    checkout = base / "checkout"
    (checkout / "pallasbench_dataset").mkdir(parents=True)
    (checkout / "README.md").write_text("x")
    checkout.chmod(0o700)
    plan = walls.plan_veil([str(checkout), str(checkout / "pallasbench_dataset")], walls.NOBODY)
    assert plan == ((str(checkout), (str(checkout / "README.md"),
                                     str(checkout / "pallasbench_dataset"))),)
  finally:
    shutil.rmtree(base)


def _check_veil_plan(base: pathlib.Path) -> None:
  closed = base / "home"
  (closed / "py" / "lib").mkdir(parents=True)
  (closed / "py" / "bin").mkdir()
  (closed / "secrets").mkdir()
  open_folder = base / "open"
  open_folder.mkdir()
  for folder in (closed / "py", open_folder):
    folder.chmod(0o755)
  closed.chmod(0o700)
  plan = walls.plan_veil([str(closed / "py" / "lib"), str(closed / "py"), str(open_folder)],
                         walls.NOBODY)
  assert plan == ((str(closed), (str(closed / "py"),)),)


# --------------------------------------------------------------------------------------------
# Honest work under every wall.

def test_jax_still_exports_and_honest_work_passes(target):
  """Behind every wall and the tripwire: imports (a native one among them), reads of what the
  exporter needs, threads, XLA CPU, a full jax.export of relu (its source passed in, as a
  candidate's is) for cpu (interpret) and cuda (Triton) sent through the result pipe; then a
  refused write still ends the child."""
  action = """
      import base64, dataclasses, functools, itertools, threading, warnings
      import decimal, fractions, statistics  # fresh imports, one of them native (_decimal)
      from pallasbench_dataset import get_task, lowering
      from pallasbench_dataset.kernels import load_module
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
      kernel = load_module(@SOURCE@).kernel
      cpu = jax.export.export(jax.jit(functools.partial(kernel, interpret=True)),
                              platforms=["cpu"])(*avals)
      with lowering.abstract_gpu():
        cuda = jax.export.export(
            jax.jit(functools.partial(kernel, interpret=False)), platforms=["cuda"],
            disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(
                lowering.TRITON_CUSTOM_CALL)])(*avals)
      answer = json.dumps({name: base64.b64encode(e.serialize()).decode()
                           for name, e in (("cpu", cpu), ("cuda", cuda))}).encode()
      os.write(int(os.environ[sandbox.RESULT_FD_ENV]), answer)
      print("honest work done", flush=True)
      open(target, "w")
      """.replace("@SOURCE@", repr((REPO / "kernels_gpu" / "relu.py").read_text()))
  with run_child(action, with_jax=True, target=str(target), result_cap=1 << 22) as run:
    assert "honest work done" in run.stdout, run.stderr
    assert run.returncode == SANDBOX_EXIT and run.violations[0].split()[1] == "open"
    answer = {k: __import__("base64").b64decode(v) for k, v in json.loads(run.result).items()}
  cpu, cuda = jax.export.deserialize(answer["cpu"]), jax.export.deserialize(answer["cuda"])
  assert cpu.platforms == ("cpu",) and cuda.platforms == ("cuda",)
  x = np.random.default_rng(0).standard_normal(cpu.in_avals[0].shape, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(cpu.call(x)), np.maximum(x, 0))
  assert not target.exists()


def test_all_kernels_export_in_one_sandboxed_child():
  """Every kernel of both trees (their sources passed in: the trees themselves are not
  readable there), traced, lowered and serialized at `small` behind every wall."""
  sources = {f"{tree}/{path.stem}": path.read_text()
             for tree in ("gpu", "tpu") for path in (REPO / f"kernels_{tree}").glob("*.py")}
  action = """
      import collections, functools
      from pallasbench_dataset import list_tasks, lowering
      from pallasbench_dataset.kernels import load_module
      sources = @SOURCES@
      tpu = jax.sharding.AbstractMesh((1,), ("_",), abstract_device=jax.sharding.AbstractDevice(
          device_kind=lowering.DEFAULT_TPU, num_cores=1, platform="tpu"))
      triton = [jax.export.DisabledSafetyCheck.custom_call(lowering.TRITON_CUSTOM_CALL)]
      exported, failed = collections.Counter(), []
      for spec in list_tasks():
        avals = [jax.ShapeDtypeStruct(i.concrete_shape(spec.dims("small")), i.dtype)
                 for i in spec.inputs]
        for variant in ("gpu", "tpu"):
          kernel = load_module(sources[f"{variant}/{spec.name}"]).kernel
          fn = jax.jit(functools.partial(kernel, interpret=False))
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
      """.replace("@SOURCES@", repr(sources))
  with run_child(action, with_jax=True, timeout_s=300) as run:
    assert run.returncode == 0 and not run.violations, (run.violations, run.stderr[-2000:])
    result = json.loads(run.stdout.splitlines()[0])
  assert result["exported"]["gpu"] == len(TASKS), result["failed"]
  assert result["exported"]["gpu"] + result["exported"].get("tpu", 0) + len(
      result["failed"]) == 90


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
  with run_child(action, walls_=BARE, tripwire_=False, timeout_s=2) as run:
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
  with run_child(action, walls_=BARE, tripwire_=False, memory_bytes=300 << 20) as run:
    assert run.out_of_memory and not run.timed_out and run.returncode == -9
    assert "allocated" not in run.stdout


def _throwaway_mount_namespace() -> None:
  """Puts this (forked) process in a private mount namespace of its own before the code under
  test mounts anything: a wrong veil (a bug, a mutant under mutation testing) then mounts
  there, never in the host's namespace (once one hid /root from the whole machine)."""
  import ctypes  # pylint: disable=import-outside-toplevel
  libc = ctypes.CDLL(None, use_errno=True)
  if libc.unshare(0x20000) != 0 or libc.mount(None, b"/", None, ctypes.c_ulong(0x4000 | 0x40000),
                                             None) != 0:
    raise OSError(ctypes.get_errno(), "no throwaway mount namespace")


def _in_fork(fn):
  """fn() in a forked copy of this process (its limits change there, not here); its JSON."""
  read_fd, write_fd = os.pipe()
  pid = os.fork()
  if pid == 0:  # the copy: only the standard library runs here
    code = 0
    try:
      os.write(write_fd, json.dumps(fn()).encode())
    except BaseException:  # pylint: disable=broad-except
      code = 1
    os._exit(code)
  os.close(write_fd)
  with os.fdopen(read_fd, "rb") as f:
    data = f.read()
  assert os.waitpid(pid, 0)[1] == 0, data
  return json.loads(data)


def test_resource_limits_are_the_documented_ones_and_never_above_the_hard_limits():
  import resource  # pylint: disable=import-outside-toplevel
  kinds = {"core": resource.RLIMIT_CORE, "fsize": resource.RLIMIT_FSIZE,
           "nofile": resource.RLIMIT_NOFILE, "as": resource.RLIMIT_AS}

  def limited(lower_nofile=None):
    if lower_nofile is not None:
      resource.setrlimit(resource.RLIMIT_NOFILE, (lower_nofile, lower_nofile))
    held = walls.limit_resources(600 << 20)
    return held, {name: resource.getrlimit(kind) for name, kind in kinds.items()}

  held, limits = _in_fork(limited)
  address_space = 2 * (600 << 20) + walls.ADDRESS_SPACE_HEADROOM
  assert held is True
  assert limits == {"core": [0, 0], "fsize": [0, 0], "nofile": [1024, 1024],
                    "as": [address_space, address_space]}
  assert _in_fork(lambda: limited(lower_nofile=100))[1]["nofile"] == [100, 100]


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
def test_confine_in_a_forked_copy_puts_up_every_wall(target, secret):
  """confine() as boot.py runs it, in a forked copy of this process (one thread, like a fresh
  child): the walls it reports hold there."""
  from pallasbench_dataset.evaluation.sandbox import launch  # pylint: disable=import-outside-toplevel
  scratch = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-sandbox-"))
  try:
    config = launch._config(scratch, 600 << 20, ALL_WALLS, False)  # pylint: disable=protected-access

    def confined():
      import ctypes, errno, resource  # pylint: disable=import-outside-toplevel,multiple-imports
      if ROOT:
        _throwaway_mount_namespace()
      layers = walls.confine(config)
      found = {"layers": list(layers), "uid": os.getresuid(), "gid": os.getresgid(),
               "as": resource.getrlimit(resource.RLIMIT_AS)[0],
               "nproc": resource.getrlimit(resource.RLIMIT_NPROC),
               "sigpending": resource.getrlimit(resource.RLIMIT_SIGPENDING)}
      death = ctypes.c_int(0)
      ctypes.CDLL(None).prctl(2, ctypes.byref(death), 0, 0, 0)
      found["death_signal"] = death.value
      attempts = {"socket": socket.socket, "write_outside": lambda: open(target, "w"),
                  "write_scratch": lambda: open("inside", "w"), "read_secret": secret.read_text,
                  "fork": os.fork, "kill_parent": lambda: os.kill(os.getppid(), 0),
                  "more_cores": lambda: os.sched_setaffinity(0, range(os.cpu_count())),
                  "higher_priority": lambda: os.setpriority(os.PRIO_PROCESS, 0, 0)}
      found["cores"] = sorted(os.sched_getaffinity(0))
      found["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
      for name, attempt in attempts.items():
        try:
          attempt()
          found[name] = "allowed"
        except OSError as e:
          found[name] = errno.errorcode.get(e.errno, str(e.errno))
      found["read_scratch"] = os.listdir(config.scratch)
      try:
        found["parent_cwd"] = os.readlink(f"/proc/{os.getppid()}/cwd")
      except OSError as e:
        found["parent_cwd"] = errno.errorcode.get(e.errno, str(e.errno))
      found["pid"] = os.getpid()
      return found

    found = _in_fork(confined)
  finally:
    shutil.rmtree(scratch)
  wanted = ["private-proc", "dies-with-parent", "rlimits", "one-core", "own-tasks", "landlock",
            "seccomp"]
  if ROOT:
    wanted = ["veil"] * bool(config.veil) + ["unprivileged"] + wanted
    assert found["uid"] == found["gid"] == [walls.NOBODY] * 3
  assert found["layers"] == wanted
  assert found["as"] == 2 * (600 << 20) + walls.ADDRESS_SPACE_HEADROOM
  assert found["nproc"] == [walls.task_limit(1)] * 2  # on its one core
  assert found["sigpending"] == [walls.MAX_PENDING_SIGNALS] * 2
  assert found["death_signal"] == signal.SIGKILL and found["read_scratch"] == []
  assert found["cores"] == [config.cpu] and found["nice"] == walls.ONE_CORE_NICE
  assert found["more_cores"] == "EPERM" and found["higher_priority"] in {"EACCES", "EPERM"}
  assert {name: found[name] for name in ("socket", "fork", "kill_parent")} == dict.fromkeys(
      ("socket", "fork", "kill_parent"), "EPERM")
  assert {found["write_outside"], found["write_scratch"], found["read_secret"]} <= {"EACCES"}
  assert found["parent_cwd"] == "ENOENT"
  assert not os.path.lexists(target)


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
def test_share_one_core_pins_the_core_lowers_the_priority_and_never_raises_it():
  """share_one_core in a forked copy: the core named (not the first one), nice ONE_CORE_NICE
  from the parent's, a nicer start kept rather than raised to ONE_CORE_NICE, RLIMIT_NICE 0 even
  where the parent allowed more (so that nothing later raises the priority again); a core it
  cannot have (negative, or not the machine's) is False, the process left as it was."""
  import resource  # pylint: disable=import-outside-toplevel
  cores, base = sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0)

  def shared(cpu, nice=None):
    if nice is not None:
      os.setpriority(os.PRIO_PROCESS, 0, nice)
    hard = resource.getrlimit(resource.RLIMIT_NICE)[1]  # a parent allowing what it may
    resource.setrlimit(resource.RLIMIT_NICE, (hard, hard))
    held = walls.share_one_core(cpu)
    return {"held": held, "cores": sorted(os.sched_getaffinity(0)),
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "rlimit_nice": list(resource.getrlimit(resource.RLIMIT_NICE))}

  assert _in_fork(lambda: shared(cores[-1])) == {
      "held": True, "cores": [cores[-1]], "nice": max(base, walls.ONE_CORE_NICE),
      "rlimit_nice": [0, 0]}
  nicer = max(base, walls.ONE_CORE_NICE) + 5
  assert _in_fork(lambda: shared(cores[-1], nicer))["nice"] == nicer
  hard = resource.getrlimit(resource.RLIMIT_NICE)[1]
  unchanged = {"held": False, "cores": cores, "nice": base, "rlimit_nice": [hard, hard]}
  assert _in_fork(lambda: shared(-1)) == unchanged          # Python refuses it: ValueError
  assert _in_fork(lambda: shared(1 << 16)) == unchanged     # the kernel refuses it: EINVAL


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
@pytest.mark.parametrize("named,cpu", [(True, True), (True, False), (False, True)],
                         ids=["named_with_a_core", "named_without_a_core", "a_core_unnamed"])
def test_confine_shares_one_core_only_when_the_wall_is_named_and_the_parent_chose_a_core(
    named, cpu):
  """The "one-core" layer needs both the wall in `walls` and a core in `WallsConfig.cpu` (none
  by default): either alone leaves the child's cores and priority as they were, no layer said."""
  cores, base = sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0)
  config = walls.WallsConfig(
      scratch="/", readable=walls.ReadAllowList(folders=(), files=()), parent_pid=os.getpid(),
      memory_bytes=600 << 20, walls=("one-core",) if named else (),
      uid=walls.NOBODY if ROOT else None, **({"cpu": cores[-1]} if cpu else {}))

  def confined():
    import encodings.ascii  # pylint: disable=import-outside-toplevel,unused-import
    layers = walls.confine(config)  # as nobody, /proc/self/status is read in ascii
    return {"layers": list(layers), "cores": sorted(os.sched_getaffinity(0)),
            "nice": os.getpriority(os.PRIO_PROCESS, 0)}

  found = _in_fork(confined)
  assert found["layers"] == ["unprivileged"] * ROOT + ["one-core"] * (named and cpu)
  if named and cpu:
    assert found["cores"] == [cores[-1]] and found["nice"] == max(base, walls.ONE_CORE_NICE)
  else:
    assert found["cores"] == cores and found["nice"] == base


ONE_CORE_PROBE = """
    import resource, time
    while resource.getrlimit(resource.RLIMIT_CPU)[0] == resource.RLIM_INFINITY:
      time.sleep(0.01)  # the parent sets the backstop once the child runs
    print(json.dumps(dict(cores=sorted(os.sched_getaffinity(0)),
                          nice=os.getpriority(os.PRIO_PROCESS, 0),
                          cpu_s=resource.getrlimit(resource.RLIMIT_CPU)[0])), flush=True)
    """


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
@pytest.mark.parametrize("walls_", [ALL_WALLS, BARE], ids=["all_walls", "bare"])
def test_a_launched_child_gets_one_core_and_its_cpu_backstop_only_behind_the_one_core_wall(
    walls_):
  """Through the launcher (the parent's core crossing to boot.py in WallsConfig's JSON): behind
  every wall the child runs on one of the parent's cores at nice ONE_CORE_NICE and its CPU-time
  backstop is that one core busy for the wall-clock limit; without "one-core" it keeps the
  parent's cores and priority, and the backstop allows every one of them busy that long."""
  parent, base = sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0)
  with run_child(ONE_CORE_PROBE, walls_=walls_, tripwire_=False, timeout_s=30) as run:
    seen, layers = json.loads(run.stdout.splitlines()[0]), run.layers
  if "one-core" in walls_:
    assert "one-core" in layers and len(seen["cores"]) == 1 and seen["cores"][0] in parent
    assert seen["nice"] == max(base, walls.ONE_CORE_NICE) and seen["cpu_s"] == 30 + 1
  else:
    assert "one-core" not in layers and seen["cores"] == parent and seen["nice"] == base
    assert seen["cpu_s"] == 30 * len(parent) + 1


# A sandboxed helper that takes every task and every queued signal it can get, says how many,
# and holds them until its second descriptor reads.
TASK_HOG = textwrap.dedent("""
    import os, signal, sys, threading
    out, hold = int(sys.argv[1]), int(sys.argv[2])
    threading.stack_size(64 << 10)
    release, started, queued = threading.Event(), 0, 0
    while started < 4096:
      try:
        threading.Thread(target=release.wait, daemon=True).start()
      except RuntimeError:  # "can't start new thread"
        break
      started += 1
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
    while queued < 4096:
      try:  # tgkill queues an RT signal against RLIMIT_SIGPENDING (kill() would not)
        signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
      except OSError:
        break
      queued += 1
    os.write(out, f"{started} {queued}".encode())
    os.read(hold, 1)
    """)


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
def test_each_sandboxed_child_holds_its_own_share_of_the_task_pool():
  """Red team round 15, finding 1: every sandboxed process runs as one user, and a thread hog
  emptied the pool its neighbours start threads from. Two helpers of the launcher, one user:
  the first takes every task and queued signal it can and holds them, and the second still
  gets exactly as many. Each count is the "own-tasks" limit on one core (the interpreter's
  own thread is one task), far below the 1024 threads of round 15's probe: a limit set before
  the child's user namespace, or on it from the parent, would be one count for both (the
  second would get none), and no limit would let each take all 4096."""
  assert walls.task_limit(1) <= 128  # the policy the constants' comment argues for
  pipes, helpers, said = [], [], []
  try:
    for _ in range(2):
      (out_r, out_w), (hold_r, hold_w) = os.pipe(), os.pipe()
      pipes += [out_r, out_w, hold_r, hold_w]
      helpers.append(sandbox.start_sandboxed(
          [sys.executable, "-c", TASK_HOG, str(out_w), str(hold_r)], memory_bytes=MEMORY_BYTES,
          pass_fds=(out_w, hold_r)))
      os.close(out_w)
      pipes.remove(out_w)
      said.append(os.read(out_r, 100).decode())  # the first holds all it took meanwhile
    for helper in helpers:
      layers, unavailable = helper.walls()
      assert unavailable is None and {"one-core", "own-tasks"} <= set(layers), layers
    counts = [tuple(map(int, text.split())) for text in said]
  finally:
    for helper in helpers:
      helper.close()
    for fd in pipes:
      os.close(fd)
  assert counts == [(walls.task_limit(1) - 1, walls.MAX_PENDING_SIGNALS)] * 2, counts


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
@pytest.mark.parametrize("refused", [None, "user namespace", "mount", "low hard limit",
                                     "low soft limit"])
def test_own_tasks_is_put_up_only_in_a_user_namespace_of_the_child_s_own(monkeypatch, refused):
  """The "own-tasks" limits cap the count of the user namespace the process is in: in the one
  it started in they would cap every process of its user together (every child, and the judge
  on a host that is not root), a smaller shared pool. So where user namespaces are refused
  nothing is set and no layer is said; where only a mount in one is refused ("private-proc"
  not up) the namespace is the child's own and the limits are set. A hard limit already lower
  is kept, never raised; a soft limit lower than its hard one is not the bound."""
  import resource  # pylint: disable=import-outside-toplevel
  before = [resource.getrlimit(k) for k in (resource.RLIMIT_NPROC, resource.RLIMIT_SIGPENDING)]
  scratch = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-sandbox-"))
  try:
    config = launch._config(scratch, 600 << 20,  # pylint: disable=protected-access
                            ("veil", "unprivileged", "private-proc", "own-tasks"), False)
    if refused == "user namespace":
      monkeypatch.setattr(walls, "private_proc", lambda _: False)
    elif refused == "mount":
      def no_mount(*_):
        raise PermissionError(1, "mount refused")
      monkeypatch.setattr(walls, "_stage_proc", no_mount)

    def confined():
      import encodings.ascii  # pylint: disable=import-outside-toplevel,unused-import
      if ROOT:
        _throwaway_mount_namespace()
      if refused == "low hard limit":
        resource.setrlimit(resource.RLIMIT_NPROC, (50, 50))
      elif refused == "low soft limit":
        resource.setrlimit(resource.RLIMIT_NPROC, (10, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
      layers = walls.confine(config)
      return {"layers": list(layers), "limits": [
          resource.getrlimit(k) for k in (resource.RLIMIT_NPROC, resource.RLIMIT_SIGPENDING)]}

    found = _in_fork(confined)
  finally:
    shutil.rmtree(scratch)
  cores = len(os.sched_getaffinity(0))
  wanted = ["veil"] * bool(config.veil) + ["unprivileged"] * ROOT
  if refused in (None, "low hard limit", "low soft limit"):
    wanted += ["private-proc", "own-tasks"]
  elif refused == "mount":
    wanted += ["own-tasks"]
  assert found["layers"] == wanted
  if refused == "user namespace":
    assert found["limits"] == [list(limit) for limit in before]
  elif refused == "low hard limit":
    assert found["limits"] == [[50, 50], [walls.MAX_PENDING_SIGNALS] * 2]
  else:
    assert found["limits"] == [[walls.task_limit(cores)] * 2, [walls.MAX_PENDING_SIGNALS] * 2]


def test_task_limit_grows_with_the_cores_from_its_base():
  assert [walls.task_limit(n) for n in (1, 2, 64)] == [96, 128, 2112]
  assert walls.task_limit(0) == walls.TASKS_BASE


def test_next_core_takes_the_parent_s_cores_in_turn_from_an_offset_of_its_pid(monkeypatch):
  """One worker's children take its cores in turn (each once a round), the first child of
  workers with consecutive pids each a different core, and only cores the parent may use (not
  the host's first ones): the children of several workers spread over their cores."""
  cores = {3, 8, 13}
  monkeypatch.setattr(launch.os, "sched_getaffinity", lambda pid: set(cores))

  def children(pid, n):
    monkeypatch.setattr(launch.os, "getpid", lambda: pid)
    monkeypatch.setattr(launch, "_CHILDREN", itertools.count())
    return [launch._next_core() for _ in range(n)]  # pylint: disable=protected-access

  taken = children(4000, 6)
  assert set(taken[:3]) == cores and taken[3:] == taken[:3]
  assert {children(pid, 1)[0] for pid in (4000, 4001, 4002)} == cores


@pytest.mark.skipif(not ROOT, reason="takes another user's identity to start as a non-root host")
def test_private_proc_as_a_non_root_host_hides_every_other_process_s_links():
  """A host that is not root has no user to run the child as, and Landlock never governs
  reading a link: without the private /proc the child reads its parent's cwd, exe and open
  files. Started as user nobody (a non-root host's child), after the wall: only its own
  entry, and no capability from the user namespace that made it."""
  scratch = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-sandbox-"))  # nobody reaches it
  os.chown(scratch, walls.NOBODY, walls.NOBODY)
  parent = os.getpid()

  def as_nobody():
    import ctypes, encodings.ascii, errno  # pylint: disable=import-outside-toplevel,multiple-imports,unused-import
    os.setgroups([])
    os.setresgid(walls.NOBODY, walls.NOBODY, walls.NOBODY)
    os.setresuid(walls.NOBODY, walls.NOBODY, walls.NOBODY)
    before = os.path.lexists(f"/proc/{parent}/cwd")
    up = walls.private_proc(str(scratch))
    links = {}
    for path in (f"/proc/{parent}/cwd", f"/proc/{parent}/exe", "/proc/1/cwd", "/proc/self/exe"):
      try:
        links[path] = os.readlink(path)
      except OSError as e:
        links[path] = errno.errorcode.get(e.errno, str(e.errno))
    with open("/proc/self/status", encoding="ascii") as f:
      caps = {line.split()[0]: line.split()[1] for line in f if line.startswith("Cap")}
    with open("/proc/cpuinfo", encoding="ascii") as f:
      cpuinfo = bool(f.read(100))
    return {"up": up, "links": links, "caps": caps, "cpuinfo": cpuinfo, "before": before,
            "pid": os.getpid(), "proc": sorted(os.listdir("/proc")),
            "scratch": os.listdir(scratch), "uid": os.getresuid()}

  try:
    found = _in_fork(as_nobody)
  finally:
    shutil.rmtree(scratch)
  assert found["up"] and found["before"] and found["uid"] == [walls.NOBODY] * 3, found
  assert found["proc"] == sorted([str(found["pid"]), "cpuinfo", "self", "thread-self"])
  assert found["links"]["/proc/self/exe"] == os.path.realpath(sys.executable)
  assert [found["links"][p] for p in (f"/proc/{parent}/cwd", f"/proc/{parent}/exe",
                                      "/proc/1/cwd")] == ["ENOENT"] * 3
  assert found["caps"]["CapEff:"] == found["caps"]["CapPrm:"] == "0" * 16
  assert found["cpuinfo"] and found["scratch"] == []


@pytest.mark.skipif(not ROOT, reason="takes another user's identity to start as a non-root host")
def test_a_refused_private_proc_leaves_proc_as_it_was_and_no_capability(monkeypatch):
  """A host whose user namespaces refuse a mount (some containers) must still run its
  children, walls otherwise up: /proc unchanged, nothing staged left in scratch, and none of
  the capabilities the new namespace gave."""
  scratch = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-sandbox-"))
  os.chown(scratch, walls.NOBODY, walls.NOBODY)
  parent = os.getpid()

  def refused(libc, staging, pid):  # the tmpfs made and half filled, then a bind refused
    del pid
    walls._mount(libc, "tmpfs", staging, "tmpfs", 0, "size=16k")  # pylint: disable=protected-access
    os.mkdir(os.path.join(staging, "half"))
    raise PermissionError(1, "mount refused")
  monkeypatch.setattr(walls, "_stage_proc", refused)

  def as_nobody():
    import ctypes, encodings.ascii  # pylint: disable=import-outside-toplevel,multiple-imports,unused-import
    os.setgroups([])
    os.setresgid(walls.NOBODY, walls.NOBODY, walls.NOBODY)
    os.setresuid(walls.NOBODY, walls.NOBODY, walls.NOBODY)
    up = walls.private_proc(str(scratch))
    with open("/proc/self/status", encoding="ascii") as f:
      caps = {line.split()[0]: line.split()[1] for line in f if line.startswith("Cap")}
    return {"up": up, "parent_seen": os.path.lexists(f"/proc/{parent}"), "caps": caps,
            "scratch": os.listdir(scratch)}

  try:
    found = _in_fork(as_nobody)
  finally:
    shutil.rmtree(scratch)
  assert found["up"] is False and found["parent_seen"] and found["scratch"] == [], found
  assert found["caps"]["CapEff:"] == found["caps"]["CapPrm:"] == "0" * 16


def test_walls_config_crosses_to_the_child_unchanged():
  config = walls.WallsConfig(
      scratch="/tmp/s", readable=walls.ReadAllowList(folders=("/usr", "/opt/py"), files=("/f",)),
      parent_pid=4321, memory_bytes=600 << 20, walls=("rlimits", "seccomp"), uid=walls.NOBODY,
      veil=(("/root", ("/root/py", "/root/lib")), ("/home", ("/home/x",))), cpu=3)
  assert walls.WallsConfig.from_json(config.to_json()) == config
  bare = walls.WallsConfig(scratch="/tmp/s", readable=walls.ReadAllowList(folders=(), files=()),
                           parent_pid=1, memory_bytes=1)
  assert walls.WallsConfig.from_json(bare.to_json()) == bare


def test_die_with_parent_exits_when_its_parent_is_not_the_one_named():
  pid = os.fork()
  if pid == 0:
    walls.die_with_parent(os.getppid() + 1)
    os._exit(0)
  assert os.waitpid(pid, 0)[1] == 1 << 8


def test_resource_limits_arithmetic():
  import resource  # pylint: disable=import-outside-toplevel
  names = {resource.RLIMIT_CORE: "core", resource.RLIMIT_FSIZE: "fsize",
           resource.RLIMIT_NOFILE: "nofile", resource.RLIMIT_AS: "as"}
  address_space = 2 * (600 << 20) + walls.ADDRESS_SPACE_HEADROOM
  unlimited = walls.resource_limits(600 << 20, lambda _: resource.RLIM_INFINITY)
  assert {names[k]: v for k, v in unlimited} == {"core": 0, "fsize": 0, "nofile": 1024,
                                                 "as": address_space}
  assert [k for k, _ in unlimited] == list(names)
  lower = walls.resource_limits(600 << 20, lambda k: 100 if k == resource.RLIMIT_NOFILE
                                else address_space + 1)
  assert {names[k]: v for k, v in lower} == {"core": 0, "fsize": 0, "nofile": 100,
                                             "as": address_space}
  at = walls.resource_limits(600 << 20, lambda k: 1024 if k == resource.RLIMIT_NOFILE
                             else address_space - 1)
  assert dict(at)[resource.RLIMIT_NOFILE] == 1024 and dict(at)[resource.RLIMIT_AS] == address_space - 1


def test_landlock_ruleset_handles_every_right_of_each_abi():
  def words(attr):
    return list(struct.unpack(f"={len(attr) // 8}Q", attr))
  fs_v1 = 0x1FF2 | 0x4 | 0x8 | 0x1   # the changes, read file, read dir, execute
  assert words(walls.landlock_ruleset_attr(1)) == [fs_v1]
  assert words(walls.landlock_ruleset_attr(2)) == [fs_v1 | 0x2000]
  assert words(walls.landlock_ruleset_attr(3)) == [fs_v1 | 0x6000]
  assert words(walls.landlock_ruleset_attr(4)) == [fs_v1 | 0x6000, 0x3]
  assert words(walls.landlock_ruleset_attr(5)) == [fs_v1 | 0xE000, 0x3]
  assert words(walls.landlock_ruleset_attr(6)) == [fs_v1 | 0xE000, 0x3, 0x3]
  assert words(walls.landlock_ruleset_attr(7)) == [fs_v1 | 0xE000, 0x3, 0x3]


def test_address_space_limit_refuses_mappings_beyond_the_memory_limit():
  """Shared anonymous memory never touched is in no process' RSS: the rlimit refuses more
  address space than twice the memory limit and the headroom."""
  action = """
      import mmap, resource
      print(resource.getrlimit(resource.RLIMIT_AS)[0], flush=True)
      try:
        held = mmap.mmap(-1, 64 << 30, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        print("mapped", flush=True)
      except (OSError, MemoryError) as e:
        print("refused", type(e).__name__, flush=True)
      """
  with run_child(action, walls_=(*BARE, "rlimits"), tripwire_=False,
                 memory_bytes=600 << 20) as run:
    assert run.returncode == 0, run.stderr
    limit, outcome = run.stdout.splitlines()[:2]
  assert int(limit) == 2 * (600 << 20) + walls.ADDRESS_SPACE_HEADROOM
  assert outcome.startswith("refused"), outcome


def test_output_is_captured_apart_and_truncated():
  with run_child("sys.stdout.write('o' * 100_000); sys.stderr.write('err')", walls_=BARE,
                 tripwire_=False) as run:
    assert run.returncode == 0
    assert run.stdout.startswith("o" * OUTPUT_CAP + "\n[sandbox: ")
    assert run.stdout.endswith(f"{100_000 + len('survived') + 1 - OUTPUT_CAP} more bytes cut]")
    assert run.stderr == "err"


def test_result_pipe_keeps_its_cap_and_says_when_it_was_cut():
  write = "os.write(int(os.environ[sandbox.RESULT_FD_ENV]), b'r' * {n})"
  with run_child(write.format(n=1000), walls_=BARE, tripwire_=False, result_cap=1000) as run:
    assert run.result == b"r" * 1000 and not run.result_cut
  with run_child(write.format(n=1001), walls_=BARE, tripwire_=False, result_cap=1000) as run:
    assert run.result == b"r" * 1000 and run.result_cut


def test_environment_is_scrubbed_and_identity_matches_the_layers(monkeypatch):
  monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
  with run_child("print(json.dumps(dict(env=dict(os.environ), uid=os.getuid())))") as run:
    seen = json.loads(run.stdout.splitlines()[0])
    scratch = str(run.scratch)
    layers = run.layers
  env = seen["env"]
  assert "HF_TOKEN" not in env
  assert set(env) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE",
                      "PYTHONNOUSERSITE", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "PYTHONPATH",
                      sandbox.REPORT_FD_ENV, sandbox.RESULT_FD_ENV, MARK_ENV}
  assert env["HOME"] == env["TMPDIR"] == scratch and env["CUDA_VISIBLE_DEVICES"] == ""
  assert {"new-session", "scrubbed-env", "rlimits", "dies-with-parent"} <= set(layers)
  assert seen["uid"] == (walls.NOBODY if ROOT else os.getuid())
  assert ("unprivileged" in layers) == ROOT


def test_scratch_is_removed_also_when_the_caller_raises():
  with run_child("") as run:
    scratch = run.scratch
    assert scratch.is_dir()
  assert not scratch.exists()
  with pytest.raises(RuntimeError), run_child("") as run:
    scratch = run.scratch
    raise RuntimeError("the caller fails")
  assert not scratch.exists()


# Forges walls on every pipe the child holds but the result pipe, as a candidate that found the
# report's number would; `where` runs it on this thread, on a thread of its own or on an XLA
# worker thread (a host callback).
FORGE = textwrap.dedent("""
    import stat, threading
    import jax, jax.numpy as jnp
    result = os.environ.get(sandbox.RESULT_FD_ENV)
    def forge(layer):
      for name in os.listdir("/proc/self/fd"):
        if int(name) > 2 and name != result:
          try:
            if stat.S_ISFIFO(os.fstat(int(name)).st_mode):
              os.write(int(name), f"layers {layer}\\n".encode())
          except OSError:
            pass
    forge("forged-main")
    thread = threading.Thread(target=forge, args=("forged-thread",))
    thread.start()
    thread.join()
    main = threading.get_native_id()
    def callback(x):
      if threading.get_native_id() != main:
        forge("forged-xla")
      return x
    jax.jit(lambda y: jax.pure_callback(callback, jax.ShapeDtypeStruct(y.shape, y.dtype), y))(
        jnp.tanh(jnp.ones((256, 256)) @ jnp.ones((256, 256)))).block_until_ready()
    print(sorted(os.environ), flush=True)
    """)


@pytest.mark.parametrize("armed", [True, False])
def test_the_walls_report_is_closed_before_the_program_can_forge_it(armed):
  """The layers come from a report the child closed before any untrusted line: boot.py closes
  it, or the tripwire once it has added itself. Nothing written later, on any thread and to
  any pipe, becomes a layer."""
  with run_child(FORGE, tripwire_=armed, with_jax=True, timeout_s=120) as run:
    assert run.returncode == 0, run.stderr[-2000:]
    layers, printed = run.layers, run.stdout
  assert not [layer for layer in layers if "forged" in layer], layers
  assert ("tripwire" in layers) == armed and {"rlimits", "dies-with-parent"} <= set(layers)
  assert walls.LAYERS_FD_ENV not in printed


# Starts the judge's kind of helper (start_sandboxed) and sleeps: stands in for a judge that is
# killed while its module analysis helper is alive.
OWNER = textwrap.dedent("""
    import sys, time
    from pallasbench_dataset.evaluation.sandbox import start_sandboxed
    helper = start_sandboxed([sys.executable, "-c", "import time; time.sleep(600)"],
                             memory_bytes=2**31)
    print(helper.process.pid, flush=True)
    time.sleep(600)
    """)


def test_a_killed_owner_leaves_no_helper_and_nothing_in_tmpdir(tmp_path):
  """A helper's scratch folder is gone once its walls are up: a judge killed with its helper
  alive leaves an empty private TMPDIR (the helper dies with it)."""
  private = tmp_path / "private-tmp"
  private.mkdir(mode=0o700)
  owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "TMPDIR": str(private)})
  try:
    helper = int(owner.stdout.readline())
    assert os.path.exists(f"/proc/{helper}") and list(private.iterdir()) == []
  finally:
    owner.kill()
    owner.wait()
  for _ in range(200):
    if not _survivors_of(helper):
      break
    time.sleep(0.05)
  assert not _survivors_of(helper) and list(private.iterdir()) == []


def _survivors_of(pid: int) -> bool:
  """Whether `pid` is alive and not a zombie."""
  try:
    return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


def test_only_scratch_folders_of_ended_owners_are_removed(tmp_path):
  """A folder named for a process that ended (or for a pid now running another process) is an
  orphan; one of a running owner, one made in another pid namespace (its pid means nothing
  here: another container's, or an `unshare --pid` run's beside this one), one named before
  namespaces were, and anything not named as scratch, stay."""
  ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                         capture_output=True, text=True, check=True)
  mine = pathlib.Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19]
  ns = os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]")
  assert ns.isdigit()
  names = {"orphan": f"pallasbench-sandbox-{ended.stdout.strip()}-1-{ns}-abc",
           "reused": f"pallasbench-sandbox-{os.getpid()}-{int(mine) + 1}-{ns}-abc",
           "alive": f"pallasbench-sandbox-{os.getpid()}-{mine}-{ns}-abc",
           "elsewhere": f"pallasbench-sandbox-{ended.stdout.strip()}-1-{int(ns) + 1}-abc",
           "unnamespaced": f"pallasbench-sandbox-{ended.stdout.strip()}-1-abc",
           "unnamed": "pallasbench-sandbox-abc", "other": "something-else"}
  for name in names.values():
    (tmp_path / name).mkdir()
  (tmp_path / names["orphan"] / "inside").mkdir(mode=0o000)
  assert sandbox.remove_orphaned_scratch(str(tmp_path)) == 2
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
      names[k] for k in ("alive", "elsewhere", "unnamespaced", "unnamed", "other"))


def test_a_scratch_folder_is_named_for_its_owner_and_its_pid_namespace(tmp_path, monkeypatch):
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  monkeypatch.setattr(launch, "_config", lambda *_: None)  # the walls are not the question
  scratch, _ = launch._prepare(1 << 30, (), tripwire=False)  # pylint: disable=protected-access
  try:
    pid, started, ns, _ = scratch.name.removeprefix(launch.SCRATCH_PREFIX).split("-", 3)
    assert (int(pid), int(started)) == (os.getpid(), launch._started(os.getpid()))  # pylint: disable=protected-access
    assert f"pid:[{ns}]" == os.readlink("/proc/self/ns/pid")
  finally:
    launch._remove_tree(scratch)  # pylint: disable=protected-access


# The parent of a sandboxed run, killed while its child sleeps: stands in for a killed worker.
MIDDLE = textwrap.dedent("""
    import sys
    from pallasbench_dataset.evaluation.sandbox import run_sandboxed
    run_sandboxed([sys.executable, "-c", sys.argv[1]], stdin=b"", timeout_s=120,
                  memory_bytes=2**31, extra_env={sys.argv[2]: sys.argv[3]})
    """)


def _sleeping(pids: list[int]) -> bool:
  """Whether one of `pids` sleeps in the kernel's nanosleep: the child then runs its action,
  which comes after every wall."""
  for pid in pids:
    try:
      if "nanosleep" in pathlib.Path(f"/proc/{pid}/wchan").read_text():
        return True
    except OSError:
      continue
  return False


def test_exporter_dies_with_the_process_that_started_it():
  mark = uuid.uuid4().hex
  middle = subprocess.Popen([sys.executable, "-c", MIDDLE, "import time; time.sleep(100)",
                             MARK_ENV, mark])
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


class _RecordingLibc:
  """A libc whose unshare succeeds without doing anything and whose mount only records."""

  def __init__(self):
    self.mounts = []

  def unshare(self, _flags):
    return 0

  def mount(self, source, target, kind, flags, data):
    self.mounts.append((source, target, kind, flags.value, data))
    return 0


def test_shared_mounts_are_read_from_mountinfo():
  info = ("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
          "23 22 0:5 / /dev rw,nosuid master:2 - devtmpfs udev rw\n"
          "24 22 0:21 / /proc rw,nosuid - proc proc rw\n"
          "25 22 0:22 / /run rw shared:7 master:3 - tmpfs tmpfs rw\n")
  assert walls._shared_mounts(info) == ["/", "/run"]  # pylint: disable=protected-access
  assert walls._shared_mounts("") == []  # pylint: disable=protected-access


def test_the_veil_mounts_nothing_while_in_the_parents_mount_namespace(monkeypatch, tmp_path):
  """An unshare that left the process in its parent's namespace (a bug, a kernel that ignored
  the flag): the veil refuses before its first mount, so nothing reaches the host's mounts."""
  libc = _RecordingLibc()
  monkeypatch.setattr(walls, "_libc", lambda: (__import__("ctypes"), libc))
  with pytest.raises(sandbox.WallsUnavailable, match="still in the parent's mount namespace"):
    walls._veil([(str(tmp_path), [str(tmp_path / "inside")])])  # pylint: disable=protected-access
  assert libc.mounts == []


def test_the_veil_mounts_nothing_below_a_mount_that_still_propagates(monkeypatch, tmp_path):
  """In a namespace of its own but with a mount still in a peer group (the propagation change
  failed or was skipped), a tmpfs would show in the host's namespace: refused before it."""
  libc = _RecordingLibc()
  monkeypatch.setattr(walls, "_libc", lambda: (__import__("ctypes"), libc))
  monkeypatch.setattr(walls, "_check_own_namespace", lambda host: None)
  monkeypatch.setattr(walls, "_shared_mounts", lambda info: ["/"])
  with pytest.raises(sandbox.WallsUnavailable, match="still propagate"):
    walls._veil([(str(tmp_path), [str(tmp_path / "inside")])])  # pylint: disable=protected-access
  assert [m[1] for m in libc.mounts] == [b"/"]  # only the propagation change itself


def _mode(path) -> int:
  return os.stat(path, follow_symlinks=False).st_mode & 0o7777


def test_removing_a_scratch_folder_never_changes_the_folder_that_holds_it(tmp_path, monkeypatch):
  """Cleanup opens up the tree's own folders to remove them, never TMPDIR: a first removal of
  the scratch folder itself that fails (a process still writing into it, a mount on it) must
  not leave the shared temporary folder closed to every other user."""
  holder = tmp_path / "tmpdir"
  holder.mkdir()
  holder.chmod(0o1777)
  scratch = holder / f"{launch.SCRATCH_PREFIX}1-2-x"
  (scratch / "locked").mkdir(parents=True)
  (scratch / "locked" / "file").write_text("x")
  (scratch / "locked").chmod(0o500)
  failed = []
  rmdir = os.rmdir

  def rmdir_failing_once_at_the_top(name, *args, **kwargs):
    if os.fspath(name) == str(scratch) and not failed:
      failed.append(name)
      raise OSError(errno.ENOTEMPTY, "still being written")
    return rmdir(name, *args, **kwargs)

  monkeypatch.setattr(os, "rmdir", rmdir_failing_once_at_the_top)
  launch._remove_tree(scratch)
  assert failed and not scratch.exists()
  assert _mode(holder) == 0o1777


def test_removing_a_scratch_folder_that_is_gone_changes_nothing(tmp_path):
  """A second cleanup of one run (its owner's and the orphan sweep's) finds nothing to remove
  and leaves the folder that held it as it was."""
  holder = tmp_path / "tmpdir"
  holder.mkdir()
  holder.chmod(0o1777)
  launch._remove_tree(holder / f"{launch.SCRATCH_PREFIX}1-2-x")
  assert _mode(holder) == 0o1777


def test_removing_a_scratch_link_follows_it_nowhere(tmp_path):
  """A scratch-named link (in TMPDIR anyone can make one) is not a tree: the folder it points
  at and the folder holding it keep their modes and contents."""
  holder = tmp_path / "tmpdir"
  holder.mkdir()
  holder.chmod(0o1777)
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  elsewhere.chmod(0o755)
  (elsewhere / "kept").write_text("x")
  link = holder / f"{launch.SCRATCH_PREFIX}1-2-x"
  link.symlink_to(elsewhere, target_is_directory=True)
  launch._remove_tree(link)
  assert (elsewhere / "kept").read_text() == "x"
  assert _mode(holder) == 0o1777 and _mode(elsewhere) == 0o755


class _FakeLandlockLibc:
  """The libc calls install_landlock makes, answered in this process: the ABI it is told, a
  real descriptor (of /dev/null) as the ruleset, and a record of every call."""

  def __init__(self, abi: int):
    self.abi = abi
    self.calls = []

  def syscall(self, number, *args):
    values = [getattr(a, "value", a) for a in args]
    self.calls.append((number.value, values))
    if number.value == walls._LANDLOCK_CREATE_RULESET and values[0] is None:
      return self.abi
    if number.value == walls._LANDLOCK_CREATE_RULESET:
      return os.open(os.devnull, os.O_RDONLY)
    return 0

  def prctl(self, option, *args):
    self.calls.append(("prctl", [option.value, *(a.value for a in args)]))
    return 0


@pytest.mark.parametrize("abi", [1, 2, 7])
def test_landlock_is_put_up_at_every_abi_with_that_abis_rights(monkeypatch, tmp_path, abi):
  """From ABI 1 on: a ruleset handling that ABI's rights, the scratch folder and this process'
  /proc entry readable, the allow-list's folders read, its listed folders only listed, then
  no_new_privs and restrict_self on that ruleset."""
  import ctypes
  fake = _FakeLandlockLibc(abi)
  monkeypatch.setattr(walls, "_libc", lambda: (ctypes, fake))
  monkeypatch.setattr(walls, "_PINNED_FDS", [])
  listed = tmp_path / "listed"
  listed.mkdir()
  allowed = walls.ReadAllowList(folders=(str(tmp_path),), files=(), listed=(str(listed),))
  try:
    assert walls.install_landlock(str(tmp_path), allowed)
  finally:
    for fd in walls._PINNED_FDS:
      os.close(fd)
  numbers = [number for number, _ in fake.calls]
  assert numbers[:2] == [walls._LANDLOCK_CREATE_RULESET] * 2
  assert fake.calls[1][1][0] == walls.landlock_ruleset_attr(abi)
  rules = [struct.unpack("=Qi", values[2])[0] for number, values in fake.calls
           if number == walls._LANDLOCK_ADD_RULE]
  read = walls._LANDLOCK_READ_FILE | walls._LANDLOCK_READ_DIR
  assert rules == [read, read, read, walls._LANDLOCK_READ_DIR]
  assert numbers[-2:] == ["prctl", walls._LANDLOCK_RESTRICT_SELF]
  assert fake.calls[-1][1][0] == fake.calls[2][1][0] and fake.calls[-1][1][1] == 0  # no flags
  assert fake.calls[-2][1][:2] == [walls._PR_SET_NO_NEW_PRIVS, 1]


@pytest.mark.parametrize("abi", [0, -1])
def test_no_landlock_abi_is_no_landlock_and_says_why(monkeypatch, tmp_path, caplog, abi):
  import ctypes
  fake = _FakeLandlockLibc(abi)
  monkeypatch.setattr(walls, "_libc", lambda: (ctypes, fake))
  allowed = walls.ReadAllowList(folders=(), files=(), listed=())
  with caplog.at_level("WARNING", logger=walls.logger.name):
    assert not walls.install_landlock(str(tmp_path), allowed)
  assert len(fake.calls) == 1
  assert "Landlock not installed" in caplog.text and "Landlock is not available" in caplog.text


def test_a_failed_call_raises_with_its_errno():
  import ctypes
  ctypes.set_errno(errno.EPERM)
  with pytest.raises(OSError) as raised:
    walls._checked(-1)
  assert raised.value.errno == errno.EPERM and raised.value.strerror == os.strerror(errno.EPERM)
  assert walls._checked(3) == 3
