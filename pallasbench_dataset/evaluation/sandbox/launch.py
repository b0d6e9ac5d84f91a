"""The trusted parent's side of the sandbox: start a child behind its walls, watch it, end it.

`run_sandboxed(argv, ...)` makes a fresh scratch folder (in TMPDIR, owned by the user the
child will be), decides the child's walls (walls.py: its read allow-list, and when this
process is root, user nobody and the folders to veil so that nobody can reach the interpreter),
and starts `argv` through boot.py, which puts the walls up before anything else runs. The
child runs in a new session with a scrubbed environment, under a wall-clock limit, a
resident-memory limit and CPU and core rlimits; every process of the run is killed when it
returns. The child's answer comes back through a pipe (the result), never as a file: the
child can write no file at all. The result is a context manager that removes scratch on exit.

What the record says of the walls comes only from the walls' report, a pipe of its own that
the child closes before it runs anything untrusted (boot.py); the tripwire's refusals come on
another, which stays open while candidate code runs and so is believed only for refusals.

`start_sandboxed(argv, ...)` starts a child the same way, behind the same walls, and leaves it
running: a helper that serves requests over descriptors it was passed (the judge's analysis
helper, which parses the artifact's bytes with native code). Its caller watches it and ends it.
Its scratch folder is removed as soon as its walls are up (the helper writes nothing and needs
no folder by name after that), so a helper whose owner is killed leaves nothing in TMPDIR.

A scratch folder's name says which process made it (its pid and start time). An owner killed
before it could remove one (a judge killed by Ctrl-C while its helper started, a worker killed
during an export) leaves it behind: `remove_orphaned_scratch()`, called by whoever ends a run
of evaluations once their processes are gone, removes those whose owner no longer runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
import os
import pathlib
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import types
from collections.abc import Mapping, Sequence
from typing import Final

from pallasbench_dataset.evaluation.sandbox.walls import (
    ALL_WALLS, CONFIG_ENV, LAYERS_FD_ENV, NOBODY, REPORT_FD_ENV, RESULT_FD_ENV, SANDBOX_EXIT,
    WallsConfig, WallsUnavailable, is_within, plan_veil, read_allow_list)

logger = logging.getLogger(__name__)

BOOT_MODULE: Final = "pallasbench_dataset.evaluation.sandbox.boot"
OUTPUT_CAP: Final = 64 * 1024          # bytes kept of stdout, of stderr and of the report pipe
POLL_S: Final = 0.02                   # pipe polling step of the parent
SCAN_S: Final = 0.05                   # how often the parent sums the processes' memory
DRAIN_S: Final = 2.0                   # how long the parent reads pipes after the kill
BOOT_S: Final = 120.0                  # how long a helper may take to report its walls
SCRATCH_PREFIX: Final = "pallasbench-sandbox-"  # then the owner's pid, start time, pid namespace
_NO_ENV: Final = types.MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SandboxRun:
  """What a sandboxed run left: its exit, its output, what the sandbox refused, its result.

  Use as a context manager (or call cleanup()): the scratch folder goes on exit, also when the
  caller raises.
  """
  returncode: int
  stdout: str
  stderr: str
  result: bytes                 # what the child wrote to its result pipe (at most result_cap)
  result_cut: bool              # the child wrote more than result_cap
  violations: tuple[str, ...]   # the audit hook's `refused ...` lines
  unavailable: str | None       # why the child's walls could not be put up (it ran nothing)
  timed_out: bool
  out_of_memory: bool
  wall_s: float
  layers: tuple[str, ...]       # parent-side layers, then the walls' report (boot.py)
  scratch: pathlib.Path

  @property
  def violated(self) -> bool:
    """A refusal, also when the candidate closed the report fd before the hook could write."""
    return bool(self.violations) or self.returncode == SANDBOX_EXIT

  def cleanup(self) -> None:
    _remove_tree(self.scratch)

  def __enter__(self) -> SandboxRun:
    return self

  def __exit__(self, *exc_info) -> None:
    self.cleanup()


def run_sandboxed(argv: Sequence[str], *, stdin: bytes, timeout_s: float, memory_bytes: int,
                  extra_env: Mapping[str, str] = _NO_ENV, walls: Sequence[str] = ALL_WALLS,
                  result_cap: int = 0, tripwire: bool = True) -> SandboxRun:
  """Runs `argv` (an interpreter, then `-m MODULE` or `-c CODE` and arguments) behind `walls`.

  `tripwire`: the program arms the tripwire (tripwire.arm) before any untrusted code, and the
  walls' report stays open until then, for it to add the layer. Returns once every process
  of the run is dead. Use the result as a context manager, so its scratch folder is removed.
  Raises WallsUnavailable, before starting anything, where this host cannot run the child
  unprivileged.
  """
  scratch, config = _prepare(memory_bytes, walls, tripwire)
  try:
    return _run(list(argv), config, stdin, timeout_s, extra_env, result_cap)
  except BaseException:
    _remove_tree(scratch)
    raise


def start_sandboxed(argv: Sequence[str], *, memory_bytes: int, pass_fds: Sequence[int] = (),
                    extra_env: Mapping[str, str] = _NO_ENV, walls: Sequence[str] = ALL_WALLS
                    ) -> SandboxedProcess:
  """Starts `argv` as run_sandboxed does, behind the same walls, but leaves it running: a
  helper that serves requests over the descriptors `pass_fds` (its stdin, stdout and stderr
  are /dev/null). The caller watches it; close() ends it. Returns once the child has reported
  its walls (boot.py, before the program's first line), its scratch folder removed. Raises
  WallsUnavailable as run_sandboxed does.
  """
  scratch, config = _prepare(memory_bytes, walls, tripwire=False)
  try:
    proc, layers_fd = _spawn(list(argv), config, _child_env(scratch, extra_env), tuple(pass_fds),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
      report = _read_to_end(layers_fd, BOOT_S)
    except BaseException:
      _Watch(proc.pid).kill_all()
      proc.wait()
      raise
    finally:
      os.close(layers_fd)
  finally:
    _remove_tree(scratch)
  return SandboxedProcess(proc, *_boot_report(report.text().splitlines()))


class SandboxedProcess:
  """A child of start_sandboxed: its process, what its walls reported, and its end."""

  def __init__(self, process: subprocess.Popen, layers: tuple[str, ...], unavailable: str | None):
    self.process = process
    self._walls = layers, unavailable

  def walls(self) -> tuple[tuple[str, ...], str | None]:
    """(the walls the child reported up, why they could not be put up or None)."""
    return self._walls

  def close(self) -> None:
    """Kills the child and everything it started."""
    if self.process.returncode is None:
      _Watch(self.process.pid).kill_all()
      self.process.wait()


def _read_to_end(fd: int, timeout_s: float) -> _Capture:
  """Everything written to the pipe `fd` until its last writer closed it; TimeoutError if that
  takes longer than `timeout_s`."""
  capture, deadline = _Capture(cap=OUTPUT_CAP), time.monotonic() + timeout_s
  with selectors.DefaultSelector() as selector:
    selector.register(fd, selectors.EVENT_READ)
    while True:
      left = deadline - time.monotonic()
      if left <= 0:
        raise TimeoutError(f"a sandboxed child did not report its walls within {timeout_s:g} s")
      if selector.select(left) and not _feed(fd, capture):
        return capture


def _feed(fd: int, capture: _Capture) -> bool:
  """Reads what the pipe `fd` holds into `capture`; False at its end."""
  data = os.read(fd, 65536)
  capture.feed(data)
  return bool(data)


def _prepare(memory_bytes: int, walls: Sequence[str], tripwire: bool
             ) -> tuple[pathlib.Path, WallsConfig]:
  """A fresh scratch folder, named by its owner (this process), and the walls of the child
  that will use it."""
  owner = os.getpid()
  scratch = pathlib.Path(tempfile.mkdtemp(
      prefix=f"{SCRATCH_PREFIX}{owner}-{_started(owner)}-{_pid_namespace()}-"))
  try:
    return scratch, _config(scratch, memory_bytes, tuple(walls), tripwire)
  except BaseException:
    _remove_tree(scratch)
    raise


def _config(scratch: pathlib.Path, memory_bytes: int, walls: tuple[str, ...], tripwire: bool
            ) -> WallsConfig:
  """The child's walls: as root it becomes nobody, and sees through a veil what nobody may not
  search on the way to scratch and its allow-list."""
  root = os.path.realpath(scratch)
  readable = read_allow_list(root)
  uid, veil = None, ()
  if os.geteuid() == 0:
    if "unprivileged" not in walls:
      raise WallsUnavailable("a child of root must run unprivileged (the 'unprivileged' wall)")
    os.chown(root, NOBODY, NOBODY)
    uid = NOBODY
    veil = plan_veil([root, *readable.folders, *readable.files, *readable.listed], NOBODY)
    if veil and "veil" not in walls:
      raise WallsUnavailable(f"user nobody may not reach {veil[0][1][0]} without the veil")
  return WallsConfig(scratch=root, readable=readable, parent_pid=os.getpid(),
                     memory_bytes=memory_bytes, walls=walls, tripwire=tripwire, uid=uid,
                     veil=veil, cpu=_next_core() if "one-core" in walls else None)


_CHILDREN: Final = itertools.count()


def _next_core() -> int:
  """The core the next child runs on: this process' cores in turn, from an offset of its pid,
  so that the children of several workers spread over the host."""
  cores = sorted(os.sched_getaffinity(0))
  return cores[(os.getpid() + next(_CHILDREN)) % len(cores)]


def _spawn(argv: list[str], config: WallsConfig, env: dict[str, str], pass_fds: tuple[int, ...],
           **streams) -> tuple[subprocess.Popen, int]:
  """Starts `argv` through boot.py in a new session, in scratch; returns the process and the
  read end of the walls' report (where boot.py, and the tripwire, say which walls are up)."""
  layers_read, layers_write = os.pipe()
  env = {**env, CONFIG_ENV: config.to_json(), LAYERS_FD_ENV: str(layers_write)}
  try:
    proc = subprocess.Popen(  # pylint: disable=consider-using-with  (the caller waits for it)
        [argv[0], "-m", BOOT_MODULE, *argv[1:]], cwd=config.scratch, env=env,
        start_new_session=True, pass_fds=(layers_write, *pass_fds), **streams)
  except BaseException:
    os.close(layers_read)
    raise
  finally:
    os.close(layers_write)
  return proc, layers_read


def _boot_report(lines: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
  """The walls' report: the walls up, and why they could not be put up (boot.py then exited
  with UNAVAILABLE_EXIT and ran nothing) or None. Only trusted code writes it (boot.py)."""
  layers = tuple(name for line in lines if line.startswith("layers ")
                 for name in line.removeprefix("layers ").split(",") if name)
  first = lines[0] if lines else ""
  unavailable = first.removeprefix("unavailable ") if first.startswith("unavailable ") else None
  return layers, unavailable


def _run(argv: list[str], config: WallsConfig, stdin: bytes, timeout_s: float,
         extra_env: Mapping[str, str], result_cap: int) -> SandboxRun:
  scratch = pathlib.Path(config.scratch)
  layers = ["new-session", "scrubbed-env"]
  (report_read, report_write), (result_read, result_write) = os.pipe(), os.pipe()
  env = {**_child_env(scratch, extra_env), REPORT_FD_ENV: str(report_write),
         RESULT_FD_ENV: str(result_write)}
  start = time.monotonic()
  try:
    proc, layers_read = _spawn(argv, config, env, (report_write, result_write),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
  except BaseException:
    os.close(report_read)
    os.close(result_read)
    raise
  finally:
    os.close(report_write)
    os.close(result_write)
  watch, pipes = _Watch(proc.pid), None
  try:
    if _limit_child(proc.pid, timeout_s,
                    1 if config.cpu is not None else len(os.sched_getaffinity(0))):
      layers.append("rlimits-cpu")
    pipes = _Pipes(proc, stdin, (layers_read, report_read, result_read), result_cap)
    timed_out, out_of_memory = _supervise(proc.pid, pipes, watch, start + timeout_s,
                                          config.memory_bytes)
  finally:
    watch.kill_all()
    proc.wait()
    wall_s = time.monotonic() - start
    if pipes is None:
      for fd in (layers_read, report_read, result_read):
        os.close(fd)
    else:
      pipes.drain(DRAIN_S)
  report = pipes.report.text().splitlines()
  child_layers, unavailable = _boot_report(pipes.layers.text().splitlines())
  return SandboxRun(
      returncode=proc.returncode, stdout=pipes.stdout.text(), stderr=pipes.stderr.text(),
      result=bytes(pipes.result.kept), result_cut=bool(pipes.result.cut),
      violations=tuple(line for line in report if line.startswith("refused ")),
      unavailable=unavailable, timed_out=timed_out, out_of_memory=out_of_memory,
      wall_s=wall_s, layers=(*layers, *child_layers), scratch=scratch)


def _supervise(pid: int, pipes: _Pipes, watch: _Watch, deadline: float, memory_bytes: int
               ) -> tuple[bool, bool]:
  """Serves the pipes until the child exits; (timed out, out of memory) if it had to stop."""
  while not _has_exited(pid):
    pipes.pump(POLL_S)
    if time.monotonic() > deadline:
      return True, False
    if watch.resident_bytes() > memory_bytes:
      return False, True
  return False, False


def _child_env(scratch: pathlib.Path, extra_env: Mapping[str, str]) -> dict[str, str]:
  """Only what the child needs: no tokens or credentials of the parent get through."""
  env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "TMPDIR": str(scratch),
         "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
         "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
  if "PYTHONPATH" in os.environ:  # absolute: the child's cwd is its scratch folder
    env["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p)
  env.update(extra_env)
  return env


def _limit_child(pid: int, timeout_s: float, cores: int) -> bool:
  """CPU-time and core rlimits on the started child: a backstop should the parent die.

  The CPU limit allows the child's `cores` busy for the whole wall-clock limit, so it never
  cuts a run the wall clock would let finish.
  """
  import resource  # pylint: disable=import-outside-toplevel
  cpu_s = math.ceil(timeout_s * cores) + 1
  try:
    resource.prlimit(pid, resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
  except OSError as e:  # the child is gone already, or this system forbids it
    logger.debug("rlimits of %d not set: %s", pid, e)
    return False
  return True


def _has_exited(pid: int) -> bool:
  """Without reaping it, so its pid (and process group and session id) stays reserved."""
  try:
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
  except ChildProcessError:
    return True


@dataclasses.dataclass(slots=True, kw_only=True)
class _Capture:
  """One pipe's bytes: the first `cap` kept, the rest only counted."""
  cap: int
  kept: bytearray = dataclasses.field(default_factory=bytearray)
  cut: int = 0

  def feed(self, data: bytes) -> None:
    room = max(self.cap - len(self.kept), 0)
    self.kept += data[:room]
    self.cut += len(data) - min(room, len(data))

  def text(self) -> str:
    body = self.kept.decode("utf-8", errors="replace")
    return body + (f"\n[sandbox: {self.cut} more bytes cut]" if self.cut else "")


class _Pipes:
  """The child's stdin, stdout, stderr, walls' report, refusals and result, served without
  threads."""

  def __init__(self, proc: subprocess.Popen, stdin: bytes, fds: tuple[int, int, int],
               result_cap: int):
    self.stdout, self.stderr = _Capture(cap=OUTPUT_CAP), _Capture(cap=OUTPUT_CAP)
    self.layers, self.report = _Capture(cap=OUTPUT_CAP), _Capture(cap=OUTPUT_CAP)
    self.result = _Capture(cap=result_cap)
    self._selector = selectors.DefaultSelector()
    self._pending = memoryview(stdin)
    layers_fd, report_fd, result_fd = fds
    for fileobj, capture in ((proc.stdout, self.stdout), (proc.stderr, self.stderr),
                             (layers_fd, self.layers), (report_fd, self.report),
                             (result_fd, self.result)):
      fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
      os.set_blocking(fd, False)
      self._selector.register(fd, selectors.EVENT_READ, capture)
    self._stdin = proc.stdin
    if stdin:
      os.set_blocking(proc.stdin.fileno(), False)
      self._selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE, None)
    else:
      proc.stdin.close()
    self._owned = [proc.stdout, proc.stderr, proc.stdin]
    self._fds = fds

  def pump(self, timeout_s: float) -> None:
    """Moves whatever is ready, waiting at most `timeout_s`."""
    if not self._selector.get_map():
      time.sleep(timeout_s)
      return
    for key, _ in self._selector.select(timeout_s):
      if key.data is None:
        self._write_stdin(key.fd)
        continue
      try:
        data = os.read(key.fd, 65536)
      except BlockingIOError:
        continue
      if data:
        key.data.feed(data)
      else:
        self._selector.unregister(key.fd)

  def _write_stdin(self, fd: int) -> None:
    try:
      self._pending = self._pending[os.write(fd, self._pending):]
    except BlockingIOError:
      return
    except OSError:  # the child closed its stdin or died: the rest is not wanted
      self._pending = self._pending[:0]
    if not self._pending:
      self._selector.unregister(fd)
      self._stdin.close()

  def drain(self, timeout_s: float) -> None:
    """Reads the pipes to their end (every writer is dead by now) and closes them."""
    deadline = time.monotonic() + timeout_s
    while any(key.data is not None for key in self._selector.get_map().values()):
      if time.monotonic() > deadline:
        logger.warning("a pipe of a sandboxed run stayed open after its processes were killed")
        break
      self.pump(POLL_S)
    self._selector.close()
    for stream in self._owned:
      with contextlib.suppress(OSError):
        stream.close()
    for fd in self._fds:
      os.close(fd)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _ProcessInfo:
  parent: int
  session: int
  started: int     # start time in clock ticks since boot: tells a reused pid apart
  zombie: bool
  resident_bytes: int


class _Watch:
  """Every process of a run: the child's session, and descendants that left the session.

  A descendant that called setsid() is still found through its parent, as long as a scan
  saw it before its parent died; with seccomp in force, no process can be started at all.
  """

  def __init__(self, root: int):
    self._root = root
    self._known: dict[int, int] = {}   # pid -> start time
    self._next_scan = 0.0
    self._resident = 0

  def _scan(self) -> dict[int, _ProcessInfo]:
    table = _process_table()
    grew = True
    while grew:
      grew = False
      for pid, info in table.items():
        if pid in self._known:
          continue
        parent = table.get(info.parent)
        if (pid == self._root or info.session == self._root or (
            parent is not None and self._known.get(info.parent) == parent.started)):
          self._known[pid] = info.started
          grew = True
    return {pid: table[pid] for pid, started in self._known.items()
            if pid in table and table[pid].started == started and not table[pid].zombie}

  def resident_bytes(self) -> int:
    """The summed resident memory of the run's processes, rescanned every SCAN_S."""
    if time.monotonic() >= self._next_scan:
      self._resident = sum(info.resident_bytes for info in self._scan().values())
      self._next_scan = time.monotonic() + SCAN_S
    return self._resident

  def kill_all(self) -> None:
    """SIGKILLs the process group, then every process of the run, until none is left."""
    for _ in range(100):
      with contextlib.suppress(OSError):
        os.killpg(self._root, signal.SIGKILL)
      alive = self._scan()
      if not alive:
        return
      for pid in alive:
        with contextlib.suppress(OSError):
          os.kill(pid, signal.SIGKILL)
      time.sleep(0.01)
    logger.error("processes of sandboxed run %d survived SIGKILL: %s", self._root,
                 sorted(self._scan()))


def _process_table() -> dict[int, _ProcessInfo]:
  page = os.sysconf("SC_PAGE_SIZE")
  table = {}
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
      continue  # gone meanwhile
    table[int(name)] = _ProcessInfo(parent=int(fields[1]), session=int(fields[3]),
                                    started=int(fields[19]), zombie=fields[0] in (b"Z", b"X"),
                                    resident_bytes=int(fields[21]) * page)
  return table


def remove_orphaned_scratch(folder: str | None = None) -> int:
  """Removes the scratch folders in `folder` (default TMPDIR) whose owner process has ended;
  returns how many. Call it once the processes of a run of evaluations are gone. Only folders
  made in this process' pid namespace are judged: a pid of another namespace (a container, or
  `unshare --pid` beside a run, sharing TMPDIR) means nothing here, and reading it as ended
  once removed a running exporter's scratch (session 30: a sandbox violation for a shipped
  kernel whose working folder vanished)."""
  removed, namespace = 0, _pid_namespace()
  for path in pathlib.Path(folder or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
    pid, started, ns, *_ = path.name.removeprefix(SCRATCH_PREFIX).split("-") + ["", "", ""]
    if (ns == namespace and pid.isdigit() and started.isdigit()
        and _started(int(pid)) != int(started)):
      _remove_tree(path)
      removed += 1
  return removed


def _pid_namespace() -> str:
  """This process' pid namespace, as its inode number (digits); "" where it cannot be read."""
  try:
    return os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]")
  except OSError:
    return ""


def _started(pid: int) -> int | None:
  """The start time of process `pid` (clock ticks since boot: tells a reused pid apart), or
  None when it does not run (a zombie has ended)."""
  try:
    with open(f"/proc/{pid}/stat", "rb") as f:
      fields = f.read().rsplit(b")", 1)[1].split()
  except (OSError, IndexError):
    return None
  return None if fields[0] in (b"Z", b"X") else int(fields[19])


def _remove_tree(path: pathlib.Path) -> None:
  """Removes a scratch folder, also one whose folders the child made unreadable. Only folders
  of the tree are opened up, never the folder that holds it (TMPDIR), and never through a
  link (the tree's processes are gone by now: nothing swaps a folder for a link)."""
  root = os.fspath(path)

  def unlock(function, name, _):
    for folder in (os.path.dirname(name), os.fspath(name)):
      if is_within(folder, root):
        with contextlib.suppress(OSError):
          if stat.S_ISDIR(os.lstat(folder).st_mode):
            os.chmod(folder, 0o700)
    with contextlib.suppress(FileNotFoundError):
      function(name)

  try:
    shutil.rmtree(path, onexc=unlock)
  except FileNotFoundError:
    pass
  except OSError as e:
    logger.error("scratch folder %s not removed: %s", path, e)
