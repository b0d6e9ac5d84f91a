"""The tripwire: a PEP 578 audit hook that ends the process at the first forbidden action.

`arm(scratch, report_fd)` is called by the sandboxed program once jax has started and before
it imports candidate code. The hook detects what only an attacker does: creating processes,
reaching the network, loading or calling native code, walking the interpreter's objects,
tracing or rewriting running code, lifting limits, changing the environment native code reads,
changing the file system outside scratch, reading another process' /proc entries. A refused
event writes `refused <event> <args>: <reason>` to `report_fd` and ends the process with
SANDBOX_EXIT: it never raises, so nothing of the hook is ever handed to candidate frames.

It is a tripwire, not a wall: PEP 578 says native code skips it. The walls (walls.py) were put
up before the first thread, and hold on every thread whatever happens to the hook. What the
walls refuse without ending the process (a read outside the allow-list, a write inside scratch)
the hook leaves to them.
"""

from __future__ import annotations

import os
import stat
import sys
import types
from collections.abc import Callable
from typing import Any, Final

from pallasbench_dataset.evaluation.sandbox.walls import (
    DENIED_FCNTL, LAYERS_FD_ENV, SANDBOX_EXIT, trusted_roots)

# Events refused whatever their arguments. A symlink is refused even inside scratch.
REFUSED_EVENTS: Final = frozenset({
    "subprocess.Popen", "os.system", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn",
    "os.spawn", "os.startfile", "os.startfile/2", "pty.spawn", "_winapi.CreateProcess",
    "webbrowser.open", "ensurepip.bootstrap", "cpython.PyInterpreterState_New",
    "os.kill", "os.killpg", "signal.pthread_kill", "os.symlink",
    "sys.addaudithook", "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback",
    "sys.remote_exec", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "resource.setrlimit", "resource.prlimit", "fcntl.ioctl",
})
REFUSED_PREFIXES: Final = ("socket.", "ctypes.", "sqlite3.", "syslog.")

# Modules whose import is refused: native helpers that act without audit events (raw memory
# and crash helpers, shared memory files and semaphores, subinterpreters).
REFUSED_MODULES: Final = frozenset({
    "_ctypes_test", "_testbuffer", "_testcapi", "_testclinic", "_testimportmultiple",
    "_testinternalcapi", "_testmultiphase", "_testsinglephase", "_xxtestfuzz",
    "_posixshmem", "_multiprocessing", "_xxsubinterpreters", "_xxinterpchannels",
})

# Events that change the file system: for each path argument, (its position, the position of
# its dir_fd or None). Every path must resolve inside scratch (where the walls then refuse it).
PATH_EVENTS: Final = types.MappingProxyType({
    "os.chmod": ((0, 2),), "os.chown": ((0, 3),), "os.link": ((0, 2), (1, 3)),
    "os.mkdir": ((0, 2),), "os.remove": ((0, 1),), "os.removexattr": ((0, None),),
    "os.rename": ((0, 2), (1, 3)), "os.rmdir": ((0, 1),), "os.setxattr": ((0, None),),
    "os.truncate": ((0, None),), "os.utime": ((0, 3),),
})

# Environment variables jax sets in its own process when jax.experimental.mosaic.gpu is
# imported (os.environ[...] = ... raises os.putenv). Any other change is refused: native code
# reads variables such as XLA_FLAGS (--xla_dump_to writes files without an audit event).
JAX_ENV_KEYS: Final = frozenset({
    "MOSAIC_GPU_CUDA_ROOT", "MOSAIC_GPU_RUNTIME_LIB_PATH", "MOSAIC_GPU_NVSHMEM_BC_PATH",
    "MOSAIC_GPU_NVSHMEM_SO_PATH",
})

_MAX_SYMLINKS: Final = 40
_REPORT_LINE_CAP: Final = 400


def arm(scratch: str, report_fd: int) -> None:
  """Adds the hook (it cannot be removed), writing its refusals to `report_fd`, then reports the
  layer `tripwire` on the walls' report and closes that (where the launcher left it open for
  this: `WallsConfig.tripwire`). Call after jax has started, before candidate code."""
  root = os.path.realpath(scratch)
  sys.dont_write_bytecode = True
  layers_fd = os.environ.pop(LAYERS_FD_ENV, None)
  sys.addaudithook(make_hook(root, report_fd, trusted_roots(root)))
  if layers_fd is not None:
    os.write(int(layers_fd), b"layers tripwire\n")
    os.close(int(layers_fd))


def make_hook(scratch: str, report_fd: int, roots: tuple[str, ...]
              ) -> Callable[[str, tuple[Any, ...]], None]:
  """The audit hook, closed over everything it uses.

  A candidate can import this module and rebind its globals, `builtins` and `os`. The hook
  therefore reads no global name at all (a test checks its bytecode): only objects captured
  here, before any candidate code. It never calls a method of an argument it was given, so no
  candidate code runs inside it. CPython hands the hook a PathLike already converted to str,
  the very path the call then uses; a path of any other type is refused rather than converted
  again (a second __fspath__ call could answer differently).
  """
  str_, bytes_, int_, float_, bool_, tuple_, type_ = str, bytes, int, float, bool, tuple, type
  repr_, object_repr, exact_str, decode = repr, object.__repr__, str.__str__, bytes.decode
  base_exception, os_error = BaseException, OSError
  encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
  lstat, readlink, getcwd, write, exit_now = os.lstat, os.readlink, os.getcwd, os.write, os._exit
  refused_events, refused_prefixes, refused_modules = (
      REFUSED_EVENTS, REFUSED_PREFIXES, REFUSED_MODULES)
  path_events, env_keys, denied_fcntl = PATH_EVENTS, JAX_ENV_KEYS, frozenset(DENIED_FCNTL)
  write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
  s_ifmt, s_iflnk = stat.S_IFMT(0o177777), stat.S_IFLNK
  max_symlinks, line_cap, exit_code = _MAX_SYMLINKS, _REPORT_LINE_CAP, SANDBOX_EXIT
  scratch_prefix, own_pid = scratch + "/", str(os.getpid())

  def text(path) -> str | None:
    kind = type_(path)
    if kind is str_:
      return path
    return decode(path, encoding, errors) if kind is bytes_ else None

  def resolve(path: str, base: str, follow_last: bool) -> str | None:
    """`path` made absolute and its symlinks followed, as the kernel would (None: a loop)."""
    pending = (path if path.startswith("/") else base + "/" + path).split("/")
    pending.reverse()
    done, hops = "", 0
    while pending:
      name = pending.pop()
      if name == "" or name == ".":
        continue
      if name == "..":
        done = done[:done.rfind("/")] if done else ""
        continue
      here = done + "/" + name
      try:
        is_link = lstat(here).st_mode & s_ifmt == s_iflnk
      except os_error:
        is_link = False  # not there (yet): taken literally
      if not is_link or (not pending and not follow_last):
        done = here
        continue
      hops += 1
      if hops > max_symlinks:
        return None
      target = readlink(here)
      if target.startswith("/"):
        done = ""
      more = target.split("/")
      more.reverse()
      pending += more
    return done or "/"

  def inside(path: str | None) -> bool:
    return path is not None and (path == scratch or path.startswith(scratch_prefix))

  def fd_path(fd: int) -> str | None:
    return resolve("/proc/self/fd/" + str_(fd), "/", True)

  def leaves(path, dir_fd) -> str | None:
    """Why an operation on `path` (relative to `dir_fd`) leaves scratch; None if it stays.

    Both readings must be inside: with the last symlink followed (open, chmod) and without it
    (unlink, rename), so neither a link inside pointing out nor one outside pointing in passes.
    """
    if type_(path) is int_:
      return None if inside(fd_path(path)) else "a file outside the scratch folder"
    name = text(path)
    if name is None:
      return "a path that is not str or bytes (its __fspath__ could answer differently)"
    if dir_fd is None or (type_(dir_fd) is int_ and dir_fd == -1):
      base = getcwd()
    else:
      base = fd_path(dir_fd) if type_(dir_fd) is int_ else None
    if (base is not None and inside(resolve(name, base, True))
        and inside(resolve(name, base, False))):
      return None
    return "a path outside the scratch folder"

  def foreign_proc(name: str) -> bool:
    """Whether `name` is /proc itself or another process' entry there (its memory, environ)."""
    path = resolve(name, getcwd(), True)
    if path is None or path == "/proc":
      return True
    entry = path[6:].split("/")[0] if path.startswith("/proc/") else ""
    return entry.isdigit() and entry != own_pid

  def check_open(event, args) -> str | None:
    path, mode, flags = args[0], args[1], args[2]
    name = text(path)
    relative = name is not None and not name.startswith("/")
    # Only these can reach /proc: an absolute path naming it, or one that goes up or starts
    # from a cwd or dir_fd (no symlink can be made to lead there: none can be made at all).
    if name is not None and (relative or "proc" in name or ".." in name):
      if mode is None and relative and ("proc" in name or ".." in name):
        return "a relative path up or into /proc in os.open (the event does not carry dir_fd)"
      if foreign_proc(name):
        return "another process' /proc entries"
    writes = (type_(flags) is not int_ or flags & write_flags
              or (mode is not None and (type_(mode) is not str_ or "w" in mode or "a" in mode
                                        or "x" in mode or "+" in mode)))
    if type_(path) is int_ or not writes:  # an open fd keeps its access; reads: the walls
      return None
    if mode is None and relative:
      return "a relative path in os.open for writing (the event does not carry dir_fd)"
    return leaves(path, None)

  def check_paths(event, args) -> str | None:
    for path_at, dir_fd_at in path_events[event]:
      reason = leaves(args[path_at], None if dir_fd_at is None else args[dir_fd_at])
      if reason is not None:
        return reason
    return None

  def check_import(event, args) -> str | None:
    if text(args[0]) in refused_modules:
      return "a native module that acts without audit events"
    if args[1] is None:  # a Python module, or the first of the two events of an extension
      return None
    name = text(args[1])
    path = None if name is None else resolve(name, getcwd(), True)
    if path is None or inside(path):
      return "native code from the scratch folder"
    for root in roots:
      if path == root or path.startswith(root + "/"):
        return None
    return "native code from outside the interpreter's folders"

  def check_env(event, args) -> str | None:
    if text(args[0]) not in env_keys:
      return "an environment change (native code reads variables such as XLA_FLAGS)"
    if event == "os.putenv":
      value = text(args[1])
      if value is None or (value.startswith("/") and inside(resolve(value, getcwd(), True))):
        return "a jax variable pointing into the scratch folder"
    return None

  def check_setattr(event, args) -> str | None:
    name = args[1] if type_(args[1]) is str_ else exact_str(args[1])
    return "replacing code of a running function" if name == "__code__" else None

  def check_fcntl(event, args) -> str | None:
    command = args[1]
    if type_(command) is not int_ or command in denied_fcntl:
      return "an fcntl that sends signals or leases to another process"
    return None

  checks = types.MappingProxyType({
      "open": check_open, "import": check_import, "os.putenv": check_env,
      "os.unsetenv": check_env, "object.__setattr__": check_setattr, "fcntl.fcntl": check_fcntl,
      **{event: check_paths for event in path_events}})

  def describe(value) -> str:
    kind = type_(value)
    try:
      if kind is tuple_:
        return "(" + ", ".join([describe(item) for item in value[:6]]) + ")"
      if (kind is str_ or kind is bytes_ or kind is int_ or kind is float_ or kind is bool_
          or value is None):
        return repr_(value)[:160]
      return object_repr(value)[:160]
    except base_exception:
      return "?"

  def refuse(event, args, reason: str):
    try:
      line = "refused " + describe(event).strip("'") + " " + describe(args) + ": " + reason
      write(report_fd, (line[:line_cap].replace("\n", " ") + "\n").encode("utf-8", "replace"))
    finally:  # the report fd may be closed; the exit status still says it
      exit_now(exit_code)

  def hook(event, args):
    try:
      if type_(event) is not str_:
        event = exact_str(event)
      check = checks.get(event)
      if check is not None:
        reason = check(event, args)
      elif event in refused_events or event.startswith(refused_prefixes):
        reason = "refused in the sandbox"
      else:
        return
      if reason is None:
        return
    except base_exception:
      reason = "arguments the sandbox cannot check"
    refuse(event, args, reason)

  return hook
