"""The kernel walls of a sandboxed child, put up before it runs anything but the standard library.

`confine(config)` runs first thing in the child (see boot.py), while the process has one
thread: every later thread (XLA's worker threads, on which host callbacks run candidate
Python, and any thread the candidate starts) inherits all of it. In order, each where the
platform has it:

- "veil" (started as root): a private mount namespace in which a read-only tmpfs covers every
  folder that user nobody may not search (a 0700 home holding the interpreter, a 0700
  TMPDIR holding scratch) and the paths the child needs beneath it are bound back: nobody can
  then run the interpreter, and nothing else of those folders is visible at all;
- "unprivileged" (started as root): user and groups nobody, every capability gone. A child
  that would keep uid 0 is refused instead (`WallsUnavailable`), never run;
- "private-proc": a user namespace of its own (its uid mapped to itself, every capability
  dropped again at once) with a private mount namespace whose /proc shows only the child's own
  entry, `self`, `thread-self` and cpuinfo: the links of other processes (their cwd, exe and
  open files: the parent's, other children's of the same user) are not there to read.
  Landlock governs opening files, never reading a link, and a host that is not root has no
  other user to run the child as; where user namespaces (or a mount in one) are refused the
  layer is not up, and the record's layers say so. The same unshare gives the child an IPC
  namespace of its own: a System V segment, queue or semaphore set, or a POSIX message queue,
  that native code made despite seccomp below dies with the child (red team round 15: one
  outlived it in the host's namespace, holding memory outside every limit);
- "dies-with-parent": killed by the kernel when the process that started it dies;
- "rlimits": no core dumps, no file written, at most MAX_OPEN_FILES descriptors, and an
  address-space limit (twice the run's memory limit plus ADDRESS_SPACE_HEADROOM, room for the
  thread stacks and reservations XLA makes on a many-core host): with memfd denied below and
  no file writable, every page the child holds is in its resident memory, which the parent
  watches; the address-space limit refuses the mappings that could hold more at once;
- "one-core": the child and every thread it starts run on one core of the parent's (chosen by
  the parent, `WallsConfig.cpu`), at nice ONE_CORE_NICE, with RLIMIT_NICE 0 so that it never
  raises its priority again, and no affinity of its own (seccomp below): a candidate's share
  of the host is one core below the trusted processes, however many threads it starts (red
  team round 14: eager XLA:CPU work at import kept every core busy and starved the other
  evaluations of its batch into timeouts);
- "own-tasks": at most task_limit(its cores) tasks (RLIMIT_NPROC: threads count) and
  MAX_PENDING_SIGNALS queued signals (RLIMIT_SIGPENDING), set inside the user namespace
  "private-proc" unshared. Since Linux 5.14 the kernel counts both per user namespace
  (ucounts), so the limits cap this child alone: a candidate cannot empty the task pool of the
  user every sandboxed process runs as, nor the host's pid_max, from which its neighbours'
  exporters and analysis helpers start their threads (red team round 15: a thread hog crashed
  a neighbour's exporter and had a neighbour's module analysis rejected). Set in the parent's
  user namespace the same limits would cap the whole user's count, a smaller pool shared by
  every child (and by the judge itself on a host that is not root): where the child has no
  user namespace of its own the layer is not put up, and the record's layers say so;
- "landlock": no change to the file system anywhere (scratch included: nothing the child can
  write exists, so nothing it wrote can be mapped as code), reads only of scratch and the
  read allow-list (see `read_allow_list`), no execution, no TCP, no signals or abstract
  sockets outside the domain;
- "seccomp" (synchronised to every thread): no processes, sockets, ptrace, memfd, io_uring,
  mounts, namespaces, BPF, keys, file handles or kernel-log reads, no affinity set; none of
  the kernel objects charged to a per-user or host-wide pool, or that outlive the process
  (System V IPC, POSIX message queues, inotify, Linux AIO contexts);
  signals, priorities and rlimits only of the process itself; no fcntl that hands signals or leases
  to another process; no prctl that undoes the parent-death signal or lets a tracer in.

The audit hook (tripwire.py) is armed later by the program itself, once jax has started: it
only detects and ends the process, the walls here are what hold.
"""

from __future__ import annotations

import dataclasses
import errno
import importlib.util
import json
import logging
import os
import signal
import stat
import struct
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Final

logger = logging.getLogger(__name__)

SANDBOX_EXIT: Final = 86       # exit status of a process ended by the audit hook
UNAVAILABLE_EXIT: Final = 87   # exit status of a child whose walls could not be put up
CONFIG_ENV: Final = "PALLASBENCH_SANDBOX"
# The walls' report (`layers ...`, `unavailable ...`): written by boot.py, then by the tripwire
# when it is armed, and closed before the program's first untrusted line (see boot.py).
LAYERS_FD_ENV: Final = "PALLASBENCH_SANDBOX_LAYERS_FD"
# The tripwire's refusals (`refused ...`): open while candidate code runs, so never believed
# for anything but a refusal.
REPORT_FD_ENV: Final = "PALLASBENCH_SANDBOX_FD"
RESULT_FD_ENV: Final = "PALLASBENCH_SANDBOX_RESULT_FD"
NOBODY: Final = 65534
MAX_OPEN_FILES: Final = 1024
ADDRESS_SPACE_HEADROOM: Final = 8 << 30
ALL_WALLS: Final = ("veil", "unprivileged", "private-proc", "dies-with-parent", "rlimits",
                    "one-core", "own-tasks", "landlock", "seccomp")
ONE_CORE_NICE: Final = 10
# "own-tasks": task_limit(cores) = TASKS_BASE + TASKS_PER_CORE x the cores the child may run
# on (one behind "one-core": 96 tasks). Measured (session 32, on one core): an honest exporter
# peaks at 4 to 6 tasks (the interpreter and XLA:CPU's pools; 6 with eager XLA work at
# import), an analysis helper at 2 (LLVM's pool). XLA and LLVM size their pools by the cores
# the process may run on (about 4 tasks a core: 6 on one core, 10 on two), so the limit grows
# with them where "one-core" is not up, and stays 8x above them. The kernel's default pid_max
# is 1024 a CPU: a worker's exporter and helper (2 x 96) leave most of it to the trusted
# processes. Round 15's probe, which starts 1024 threads, is refused long before.
TASKS_BASE: Final = 64
TASKS_PER_CORE: Final = 32
# Queued signals (RT signals, POSIX timers' preallocated ones): an honest child queues none;
# the limit keeps a candidate from filling its user's count, from which every child's timers
# and queued signals draw.
MAX_PENDING_SIGNALS: Final = 64


def task_limit(cores: int) -> int:
  """The most tasks (threads included) a child that may run on `cores` cores holds."""
  return TASKS_BASE + TASKS_PER_CORE * cores


class WallsUnavailable(RuntimeError):
  """A wall the run needs could not be put up: the child must not run candidate code."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReadAllowList:
  """What the child may read besides scratch: folders (and all beneath) and single files, and
  folders it may only list (the names of what lies beneath, never a file's bytes).

  Real paths, none of them inside scratch or containing it (that would also open other runs'
  scratch folders).
  """
  folders: tuple[str, ...]
  files: tuple[str, ...]
  listed: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WallsConfig:
  """What the parent decided for one child; crosses to it as JSON in CONFIG_ENV."""
  scratch: str
  readable: ReadAllowList
  parent_pid: int
  memory_bytes: int
  walls: tuple[str, ...] = ALL_WALLS
  tripwire: bool = False            # the program arms the tripwire, which reports it (boot.py)
  uid: int | None = None            # the identity to take (None: keep the parent's)
  veil: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (covered folder, paths bound back)
  cpu: int | None = None            # the one core the child runs on ("one-core")

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self))

  @classmethod
  def from_json(cls, text: str) -> WallsConfig:
    data = json.loads(text)
    readable = ReadAllowList(**{k: tuple(v) for k, v in data["readable"].items()})
    return cls(scratch=data["scratch"], readable=readable, parent_pid=int(data["parent_pid"]),
               memory_bytes=int(data["memory_bytes"]), walls=tuple(data["walls"]),
               tripwire=bool(data["tripwire"]), uid=data["uid"],
               veil=tuple((f, tuple(p)) for f, p in data["veil"]), cpu=data["cpu"])


# ---------------------------------------------------------------------------------------------
# In the parent: what the child may read, and what it must be shown as nobody.

# What the child may read besides scratch and the interpreter's roots (each where it exists;
# symlinks resolved). Found by tracing every openat of the exporter while it exported all
# shipped kernels for cuda, tpu and cpu, plus eager jax work. Folders: the system's libraries
# (what the loader and libc open lazily: libraries, locales, gconv, zoneinfo); the process'
# own /proc entry (bound to the child's pid when its rule is made); the CPU topology XLA's
# CPU client reads.
_SYSTEM_READ_FOLDERS: Final = ("/usr", "/lib", "/lib64", "/lib32", "/libx32",
                               "/sys/devices/system/cpu")
# Files: the loader's cache (dlopen of a library not yet loaded), the time zone, what XLA's
# CPU client reads (/proc/cpuinfo) and the harmless devices.
_SYSTEM_READ_FILES: Final = ("/etc/ld.so.cache", "/etc/localtime", "/proc/cpuinfo",
                             "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
# The project's library: what the exporter runs. Wherever it is imported from (a checkout or
# site-packages), it is readable but for its references (the judge's answers).
_LIBRARY: Final = "pallasbench_dataset"
_LIBRARY_HIDDEN: Final = ("references",)
# The project's other packages: the kernel trees (solutions to copy), the builder and the
# benchmarks. Never readable, wherever they are installed.
_PROJECT_PACKAGES: Final = ("kernels_gpu", "kernels_tpu", "builder", "benchmarks")
# Kernels installed beside jax, by module: solutions to copy as well (red team round 11 called
# jax.experimental.pallas.ops.gpu's softmax and attention as its kernel; jax's test utilities
# hold Pallas kernels in their back-compatibility data, round 12). Never readable; nothing jax
# runs imports them.
_KERNEL_LIBRARIES: Final = ("jax.experimental.pallas.ops", "jax._src.internal_test_util")
# What marks the library's parent folder as a checkout (its .git, data/, kernel trees, other
# candidates' files): never readable, except the library itself and anything allowed within.
_CHECKOUT_MARKS: Final = ("pyproject.toml", ".git")


def trusted_roots(scratch: str) -> tuple[str, ...]:
  """The interpreter's folders and PYTHONPATH's: where code (and native modules) may come
  from, the same in the parent and in the child (whose PYTHONPATH the launcher passes on);
  the library's folder is added by read_allow_list. Neither the parent's working directory
  nor a folder it added to its own sys.path is one of them.

  Anything inside scratch is excluded, and so is any folder that contains scratch (it would
  also contain other runs' scratch folders).
  """
  entries = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
  roots = set()
  for entry in entries:
    if entry and os.path.isdir(entry):
      path = os.path.realpath(entry)
      if not is_within(path, scratch) and not is_within(scratch, path):
        roots.add(path)
  return tuple(sorted(roots))


def _package_folders(name: str) -> list[str]:
  """Where the top-level package `name` is imported from (none when it is not installed)."""
  try:
    spec = importlib.util.find_spec(name)
  except (ImportError, ValueError):
    return []
  return [os.path.realpath(p) for p in (spec and spec.submodule_search_locations) or ()]


def _hidden() -> set[str]:
  """What the child must not read even inside an allowed folder: the project's other packages,
  the Pallas kernel libraries, the library's references, and the checkout the library lies in
  (when it is one)."""
  hidden = {folder for name in (*_PROJECT_PACKAGES, *_KERNEL_LIBRARIES)
            for folder in _package_folders(name)}
  for library in _package_folders(_LIBRARY):
    hidden.update(os.path.join(library, name) for name in _LIBRARY_HIDDEN)
    parent = os.path.dirname(library)
    if any(os.path.exists(os.path.join(parent, mark)) for mark in _CHECKOUT_MARKS):
      hidden.add(parent)
  return hidden


def read_allow_list(scratch: str) -> ReadAllowList:
  """The child's read allow-list: trusted_roots() (zip files on PYTHONPATH too), the library,
  _SYSTEM_READ_FOLDERS and _SYSTEM_READ_FILES, each where it exists, less what _hidden() names.

  Of two nested entries the deeper decides: the library inside a hidden checkout is readable,
  its references are not. A folder with something hidden beneath it may only be listed (the
  import system lists the folders it searches); what else it holds is readable entry by entry,
  each by the path it resolves to: Landlock holds a rule on a link's target, so a link within
  (a virtual environment's lib64 -> lib) is decided as its target and never grants what is
  hidden there. Every entry is its own real path.
  """
  allowed = set(trusted_roots(scratch)) | set(_package_folders(_LIBRARY))
  allowed.update(os.path.realpath(p) for p in _SYSTEM_READ_FOLDERS if os.path.isdir(p))
  allowed = {f for f in allowed if f != "/" and not is_within(f, scratch)
             and not is_within(scratch, f)}
  hidden = {h for h in _hidden() if os.path.exists(h)}
  files = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
           if p and os.path.isfile(p)}
  files.update(os.path.realpath(p) for p in _SYSTEM_READ_FILES if os.path.exists(p))
  decided = allowed | files | hidden
  folders, listed = set(), set()

  def readable(path: str) -> bool:
    deepest = max((p for p in decided if is_within(path, p)), default=None,
                  key=lambda p: (len(p), p in hidden))
    return deepest is not None and deepest not in hidden

  def grant(folder: str) -> None:
    if folder in folders or folder in listed:
      return  # reached again through a link
    if not any(is_within(h, folder) for h in hidden):
      folders.add(folder)
      return
    listed.add(folder)
    for entry in sorted(os.listdir(folder)):
      path = os.path.realpath(os.path.join(folder, entry))  # a rule holds a link's target
      if readable(path):
        if os.path.isdir(path):
          grant(path)
        else:
          files.add(path)

  for folder in sorted(allowed):
    if readable(folder):
      grant(folder)
    elif any(a != folder and is_within(a, folder) and readable(a) for a in allowed):
      listed.add(folder)  # a hidden checkout on PYTHONPATH: searched for the library within
  folders = {f for f in folders if not any(is_within(f, g) for g in folders if g != f)}
  files = {f for f in files if readable(f) and not is_within(f, scratch)
           and not any(is_within(f, g) for g in folders)}
  return ReadAllowList(folders=tuple(sorted(folders)), files=tuple(sorted(files)),
                       listed=tuple(sorted(listed - folders)))


def is_within(path: str, folder: str) -> bool:
  return path == folder or path.startswith(folder.rstrip("/") + "/")


def _searchable(folder: str, uid: int) -> bool:
  """Whether user `uid` (group `uid`, no other groups) may search `folder`."""
  info = os.stat(folder)
  if info.st_uid == uid:
    return bool(info.st_mode & stat.S_IXUSR)
  if info.st_gid == uid:
    return bool(info.st_mode & stat.S_IXGRP)
  return bool(info.st_mode & stat.S_IXOTH)


def plan_veil(paths: Iterable[str], uid: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
  """For each highest folder that `uid` may not search on the way to one of `paths` (or that
  is one of them: a checkout cloned straight into a 0700 `mktemp -d`), that folder and the
  paths beneath it (none inside another; a needed folder closed itself shows its entries).
  Raises for "/" itself."""
  blocked: dict[str, set[str]] = {}
  for path in sorted(set(paths)):
    parts = path.strip("/").split("/")
    on_the_way = ["/" + "/".join(parts[:depth]) for depth in range(len(parts))]
    for folder in on_the_way + ([path] if os.path.isdir(path) else []):
      if not _searchable(folder, uid):
        if folder == "/":
          raise WallsUnavailable(f"user {uid} may not search '/'")
        blocked.setdefault(folder, set()).update(
            [os.path.join(path, name) for name in os.listdir(path)] if folder == path else [path])
        break
  covers = sorted(blocked)
  covers = [f for f in covers if not any(is_within(f, g) for g in covers if g != f)]
  plan = []
  for folder in covers:
    beneath = {p for g, ps in blocked.items() if is_within(g, folder) for p in ps}
    beneath = {p for p in beneath if not any(is_within(p, q) for q in beneath if q != p)}
    plan.append((folder, tuple(sorted(beneath))))
  return tuple(plan)


# ---------------------------------------------------------------------------------------------
# In the child.

_CLONE_NEWNS: Final = 0x00020000
_CLONE_NEWIPC: Final = 0x08000000
_CLONE_NEWUSER: Final = 0x10000000
_MS_MOVE: Final = 0x2000
_MNT_DETACH: Final = 2
_CAPABILITY_VERSION_3: Final = 0x20080522
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
_PR_SET_PDEATHSIG: Final = 1
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_PR_SET_NO_NEW_PRIVS: Final = 38


def confine(config: WallsConfig) -> tuple[str, ...]:
  """Puts up the walls `config.walls` names (module docstring); returns those that hold.

  Raises WallsUnavailable where the child would otherwise run with privileges.
  """
  wanted, layers = set(config.walls), []
  started_as_root = os.geteuid() == 0
  if started_as_root and config.uid is not None:
    if "veil" in wanted and config.veil:
      _veil(config.veil)
      layers.append("veil")
    _become(config.uid)
    os.chdir(config.scratch)  # through the veil, now that nobody is looking
    layers.append("unprivileged")
  elif started_as_root:
    raise WallsUnavailable("the child was started as root with no identity to take")
  host_users = _user_namespace()
  if "private-proc" in wanted and private_proc(config.scratch):
    layers.append("private-proc")
  if "dies-with-parent" in wanted and die_with_parent(config.parent_pid):
    layers.append("dies-with-parent")
  if "rlimits" in wanted and limit_resources(config.memory_bytes):
    layers.append("rlimits")
  if "one-core" in wanted and config.cpu is not None and share_one_core(config.cpu):
    layers.append("one-core")
  if "own-tasks" in wanted and own_tasks(host_users):
    layers.append("own-tasks")
  if "landlock" in wanted and install_landlock(config.scratch, config.readable):
    layers.append("landlock")
  if "seccomp" in wanted and install_seccomp():
    layers.append("seccomp")
  return tuple(layers)


def _libc():
  import ctypes  # pylint: disable=import-outside-toplevel
  return ctypes, ctypes.CDLL(None, use_errno=True)


def _checked(result: int) -> int:
  if result < 0:
    import ctypes  # pylint: disable=import-outside-toplevel
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
  return result


def _shared_mounts(mountinfo: str) -> list[str]:
  """The mount points of /proc/self/mountinfo text whose optional fields join a peer group
  (`shared:N`): a mount made below one of them shows in every namespace of its group."""
  shared = []
  for line in mountinfo.splitlines():
    fields = line.split(" - ")[0].split()
    if any(f.startswith("shared:") for f in fields[6:]):
      shared.append(fields[4])
  return shared


# The veil's mounts must never reach the host's namespace, whatever went wrong before them (a
# veil mounted there would hide the folders it covers from every process of the host): it
# checks that it is in a mount namespace of its own before it changes any mount, and that none of its mounts
# propagates before it mounts anything.
def _check_own_namespace(host_namespace: int) -> None:
  if os.stat("/proc/self/ns/mnt").st_ino == host_namespace:
    raise OSError(errno.EPERM, "still in the parent's mount namespace")


def _check_nothing_propagates() -> None:
  with open("/proc/self/mountinfo", encoding="utf-8") as f:
    shared = _shared_mounts(f.read())
  if shared:
    raise OSError(errno.EPERM, f"mounts still propagate to other namespaces: {shared[:3]}")


def _veil(plan: Sequence[tuple[str, Sequence[str]]]) -> None:
  """A private mount namespace; each covered folder a read-only tmpfs showing only its paths."""
  ctypes, libc = _libc()
  try:
    host = os.stat("/proc/self/ns/mnt").st_ino
    _checked(libc.unshare(ctypes.c_int(_CLONE_NEWNS)))
    _make_mounts_private(libc, host)
    for folder, paths in plan:
      originals = [os.open(p, os.O_PATH | os.O_CLOEXEC) for p in paths]
      flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
      _mount(libc, "tmpfs", folder, "tmpfs", flags, "mode=0755,size=64k,nr_inodes=4096")
      for path, fd in zip(paths, originals):
        parent = os.path.dirname(path)
        os.makedirs(parent, mode=0o755, exist_ok=True)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
          os.mkdir(path, 0o755)
        else:
          os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
        _mount(libc, f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
        os.close(fd)
      _mount(libc, None, folder, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)
  except OSError as e:
    raise WallsUnavailable(f"the mount namespace that shows the interpreter to user nobody "
                           f"could not be made: {e}") from e


def _become(uid: int) -> None:
  """Takes user and group `uid` with no supplementary groups; every capability goes with root."""
  try:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
  except OSError as e:
    raise WallsUnavailable(f"could not become user {uid}: {e}") from e
  if os.getresuid() != (uid,) * 3 or os.getresgid() != (uid,) * 3 or os.getgroups():
    raise WallsUnavailable(f"still not user {uid} after setresuid")
  _check_no_capabilities(f"after becoming user {uid}")


def _check_no_capabilities(when: str) -> None:
  """Raises WallsUnavailable if this process still holds a permitted or effective capability."""
  with open("/proc/self/status", encoding="ascii") as f:
    capabilities = [line.split()[1] for line in f if line.startswith(("CapPrm", "CapEff"))]
  if any(int(mask, 16) for mask in capabilities):
    raise WallsUnavailable(f"capabilities left {when}: {capabilities}")


def private_proc(scratch: str) -> bool:
  """The "private-proc" wall (module docstring), for a process that is not root and has one
  thread, with its IPC namespace; False where the platform refuses it (user namespaces, or a
  mount in one), /proc then as it was. A staging tmpfs in scratch gets the entries, then moves onto /proc, and its
  folder goes. Whatever happened, the capabilities the namespace gave are dropped before this
  returns (WallsUnavailable if they cannot be: the child must not run with them)."""
  ctypes, libc = _libc()
  pid, uid, gid = os.getpid(), os.geteuid(), os.getegid()
  host = os.stat("/proc/self/ns/mnt").st_ino
  try:
    _checked(libc.unshare(ctypes.c_int(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWIPC)))
  except OSError as e:
    logger.warning("no private /proc (user namespaces refused): %s", e)
    return False
  staging = os.path.join(scratch, ".proc")
  try:
    _map_identity(libc, uid, gid)
    _make_mounts_private(libc, host)
    os.mkdir(staging, 0o700)
    _stage_proc(libc, staging, pid)
    _mount(libc, staging, "/proc", None, _MS_MOVE)
    up = True
  except OSError as e:
    logger.warning("no private /proc (a mount in the user namespace was refused): %s", e)
    if os.path.ismount(staging):
      libc.umount2(staging.encode(), ctypes.c_int(_MNT_DETACH))
    up = False
  if os.path.isdir(staging):
    os.rmdir(staging)
  _drop_capabilities()
  return up


def _make_mounts_private(libc, host_namespace: int) -> None:
  """In a mount namespace just unshared: checks it is not the host's, makes every mount
  private, checks that none still propagates (the checks above _veil say why)."""
  _check_own_namespace(host_namespace)
  _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)
  _check_nothing_propagates()


def _mount(libc, source, target, kind, flags, data=None) -> None:
  import ctypes  # pylint: disable=import-outside-toplevel
  _checked(libc.mount(source and source.encode(), target.encode(), kind and kind.encode(),
                      ctypes.c_ulong(flags), data and data.encode()))


def _map_identity(libc, uid: int, gid: int) -> None:
  """Maps this process' user and group in its new user namespace to themselves. A process
  that changed identity (root become nobody) is not dumpable, so its /proc files are root's
  and the maps cannot be written: dumpable only while they are."""
  dumpable = _prctl(libc, _PR_GET_DUMPABLE)
  _prctl(libc, _PR_SET_DUMPABLE, 1)
  try:
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
      fd = os.open(f"/proc/self/{name}", os.O_WRONLY | os.O_CLOEXEC)
      try:
        os.write(fd, text.encode())
      finally:
        os.close(fd)
  finally:
    _prctl(libc, _PR_SET_DUMPABLE, dumpable)


def _stage_proc(libc, staging: str, pid: int) -> None:
  """A read-only tmpfs on `staging` holding this process' /proc entry, cpuinfo, self and
  thread-self (bound from the real /proc), ready to move onto it."""
  flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
  _mount(libc, "tmpfs", staging, "tmpfs", flags, "mode=0755,size=16k,nr_inodes=16")
  own = os.path.join(staging, str(pid))
  os.mkdir(own, 0o555)
  _mount(libc, f"/proc/{pid}", own, None, _MS_BIND | _MS_REC)
  cpuinfo = os.path.join(staging, "cpuinfo")
  os.close(os.open(cpuinfo, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o444))
  _mount(libc, "/proc/cpuinfo", cpuinfo, None, _MS_BIND)
  os.symlink(str(pid), os.path.join(staging, "self"))
  os.symlink(f"{pid}/task/{pid}", os.path.join(staging, "thread-self"))
  _mount(libc, None, staging, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)


def _prctl(libc, option: int, value: int = 0) -> int:
  """prctl(option, value, 0, 0, 0); raises OSError on failure."""
  import ctypes  # pylint: disable=import-outside-toplevel
  return _checked(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0),
                             ctypes.c_ulong(0), ctypes.c_ulong(0)))


def _drop_capabilities() -> None:
  """Every capability the new user namespace gave this process, gone (capset to nothing)."""
  ctypes, libc = _libc()
  header = struct.pack("=Ii", _CAPABILITY_VERSION_3, 0)
  _checked(libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(bytes(24))))
  _check_no_capabilities("in the private user namespace")


def die_with_parent(parent: int) -> bool:
  """Asks the kernel to kill this process when the process that started it, `parent`, dies
  (a killed driver or worker must leave no exporter or judge running), then checks that
  `parent` is still its parent: had it died first, the request would never fire. Call it after
  any change of identity, which clears the request."""
  try:
    _prctl(_libc()[1], _PR_SET_PDEATHSIG, signal.SIGKILL)
  except (OSError, AttributeError) as e:
    logger.warning("parent-death signal not set: %s", e)
    return False
  if os.getppid() != parent:
    os._exit(1)
  return True


def _under_hard(wanted: Iterable[tuple[int, int]], hard_limit: Callable[[int], int]
                ) -> tuple[tuple[int, int], ...]:
  """Each (rlimit, value) of `wanted`, the value lowered to the rlimit's present hard limit
  (`hard_limit(rlimit)`, resource.RLIM_INFINITY for none): an unprivileged process cannot
  raise it."""
  import resource  # pylint: disable=import-outside-toplevel
  return tuple((kind, value if (hard := hard_limit(kind)) == resource.RLIM_INFINITY
                else min(hard, value)) for kind, value in wanted)


def _present_hard(kind: int) -> int:
  """This process' hard limit of rlimit `kind`."""
  import resource  # pylint: disable=import-outside-toplevel
  return resource.getrlimit(kind)[1]


def _set_fixed(limits: Iterable[tuple[int, int]]) -> None:
  """Sets each (rlimit, value) of `limits`, soft = hard, so never raised again."""
  import resource  # pylint: disable=import-outside-toplevel
  for kind, value in limits:
    resource.setrlimit(kind, (value, value))


def resource_limits(memory_bytes: int, hard_limit: Callable[[int], int]
                    ) -> tuple[tuple[int, int], ...]:
  """(rlimit, value) of each limit limit_resources sets: core 0, file size 0, MAX_OPEN_FILES
  descriptors, the address space of the module docstring; none above its present hard limit
  (`hard_limit(rlimit)`, resource.RLIM_INFINITY for none)."""
  import resource  # pylint: disable=import-outside-toplevel
  return _under_hard(((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 0),
                      (resource.RLIMIT_NOFILE, MAX_OPEN_FILES),
                      (resource.RLIMIT_AS, 2 * memory_bytes + ADDRESS_SPACE_HEADROOM)),
                     hard_limit)


def limit_resources(memory_bytes: int) -> bool:
  """Sets resource_limits(), soft = hard (so never raised again); False where it cannot."""
  try:
    _set_fixed(resource_limits(memory_bytes, _present_hard))
  except (OSError, ValueError) as e:
    logger.warning("resource limits not set: %s", e)
    return False
  return True


def share_one_core(cpu: int) -> bool:
  """Runs this process on core `cpu` at nice ONE_CORE_NICE or lower in priority, never to rise
  again (RLIMIT_NICE 0); threads started later inherit both. False where it cannot."""
  import resource  # pylint: disable=import-outside-toplevel
  try:
    os.sched_setaffinity(0, {cpu})
    os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), ONE_CORE_NICE))
    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
  except (OSError, ValueError) as e:
    logger.warning("the child is not confined to one core: %s", e)
    return False
  return True


def _user_namespace() -> int:
  """This process' user namespace, as its inode number."""
  return os.stat("/proc/self/ns/user").st_ino


def own_tasks(host_user_namespace: int) -> bool:
  """The "own-tasks" wall (module docstring): RLIMIT_NPROC task_limit(this process' cores)
  and RLIMIT_SIGPENDING MAX_PENDING_SIGNALS, soft = hard (never raised again), none above its
  present hard limit. Only in a user namespace other than `host_user_namespace` (the one the
  process started in), whose counts are this child's alone; False, nothing set, where it is
  still there or a limit cannot be set."""
  import resource  # pylint: disable=import-outside-toplevel
  try:
    if _user_namespace() == host_user_namespace:
      raise OSError(errno.EPERM, "no user namespace of its own: the limits would cap the "
                    "count of every process of its user")
    _set_fixed(_under_hard(((resource.RLIMIT_NPROC, task_limit(len(os.sched_getaffinity(0)))),
                            (resource.RLIMIT_SIGPENDING, MAX_PENDING_SIGNALS)), _present_hard))
  except (OSError, ValueError) as e:
    logger.warning("the child's tasks are not bounded apart: %s", e)
    return False
  return True


def _no_new_privs():
  """Sets no_new_privs (required by seccomp and Landlock without CAP_SYS_ADMIN); returns libc."""
  _, libc = _libc()
  _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1)
  return libc


# ---------------------------------------------------------------------------------------------
# Landlock: numbers from the Linux UAPI headers.

_LANDLOCK_CREATE_RULESET: Final = 444  # the same number on every architecture
_LANDLOCK_ADD_RULE: Final = 445
_LANDLOCK_RESTRICT_SELF: Final = 446
_LANDLOCK_CREATE_RULESET_VERSION: Final = 1
_LANDLOCK_RULE_PATH_BENEATH: Final = 1
# Rights to change the file system, by the Landlock ABI version that introduced them:
# WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_{CHAR,DIR,REG,SOCK,FIFO,BLOCK,SYM}; REFER;
# TRUNCATE; IOCTL_DEV.
_LANDLOCK_FS_RIGHTS: Final = ((1, 0x1FF2), (2, 0x2000), (3, 0x4000), (5, 0x8000))
_LANDLOCK_EXECUTE: Final = 0x1
_LANDLOCK_READ_FILE: Final = 0x4
_LANDLOCK_READ_DIR: Final = 0x8
_LANDLOCK_NET_TCP: Final = 0x3     # ABI 4: BIND_TCP, CONNECT_TCP
_LANDLOCK_SCOPES: Final = 0x3      # ABI 6: abstract unix sockets, signals
# Landlock rules hold their inode, but procfs makes a new inode whenever it looks an entry up
# again: the rule's file descriptors stay open, so the dentries (and the rule on /proc/<pid>)
# live as long as the process.
_PINNED_FDS: list[int] = []


def landlock_ruleset_attr(abi: int) -> bytes:
  """struct landlock_ruleset_attr for Landlock ABI `abi`: every right it knows is handled
  (so denied unless a rule grants it): each change of the file system, reads, execution,
  then TCP bind and connect (ABI 4) and the scopes (ABI 6)."""
  change_rights = sum(bit for version, bit in _LANDLOCK_FS_RIGHTS if abi >= version)
  attr = struct.pack("=Q", change_rights | _LANDLOCK_READ_FILE | _LANDLOCK_READ_DIR
                     | _LANDLOCK_EXECUTE)
  attr += struct.pack("=Q", _LANDLOCK_NET_TCP) if abi >= 4 else b""
  attr += struct.pack("=Q", _LANDLOCK_SCOPES) if abi >= 6 else b""
  return attr


def install_landlock(scratch: str, readable: ReadAllowList) -> bool:
  """Confines the file-system access of this thread and every thread it starts later: no
  change anywhere, reads only of `scratch`, `readable` and this process' /proc entry, no
  execution. False where Landlock is not available."""
  if sys.platform != "linux" or os.uname().machine not in _SYSCALL_NUMBERS:
    return False
  try:
    ctypes, libc = _libc()
    abi = libc.syscall(ctypes.c_long(_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 1:
      raise OSError(ctypes.get_errno(), "Landlock is not available")
    read_rights = _LANDLOCK_READ_FILE | _LANDLOCK_READ_DIR
    attr = landlock_ruleset_attr(abi)
    ruleset = _checked(libc.syscall(ctypes.c_long(_LANDLOCK_CREATE_RULESET), attr,
                                    ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)))
    rules = [(scratch, True, read_rights), (f"/proc/{os.getpid()}", True, read_rights)]
    rules += [(path, False, read_rights) for path in (*readable.folders, *readable.files)]
    rules += [(path, False, _LANDLOCK_READ_DIR) for path in readable.listed]
    opened = []
    try:
      for path, required, wanted in rules:
        try:
          fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
          if required:
            raise
          continue  # gone since the list was made: nothing to allow
        opened.append(fd)
        rights = wanted if stat.S_ISDIR(os.fstat(fd).st_mode) else _LANDLOCK_READ_FILE
        _checked(libc.syscall(ctypes.c_long(_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                              ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                              struct.pack("=Qi", rights, fd), ctypes.c_uint32(0)))
      _no_new_privs()
      _checked(libc.syscall(ctypes.c_long(_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset),
                            ctypes.c_uint32(0)))
    except BaseException:
      for fd in opened:
        os.close(fd)
      raise
    finally:
      os.close(ruleset)
    _PINNED_FDS.extend(opened)
  except (OSError, AttributeError, ImportError) as e:
    logger.warning("Landlock not installed: %s", e)
    return False
  return True


# ---------------------------------------------------------------------------------------------
# Seccomp: numbers from the Linux UAPI headers.

_SYSCALL_NUMBERS: Final = types.MappingProxyType({
    "x86_64": types.MappingProxyType({
        "seccomp": 317, "clone": 56, "clone3": 435, "fork": 57, "vfork": 58, "execve": 59,
        "execveat": 322, "socket": 41, "socketpair": 53, "connect": 42, "bind": 49,
        "listen": 50, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
        "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "mknod": 133, "mknodat": 259, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "pidfd_open": 434,
        "pidfd_send_signal": 424, "pidfd_getfd": 438, "unshare": 272, "setns": 308,
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "init_module": 175, "delete_module": 176, "finit_module": 313, "kexec_load": 246,
        "kexec_file_load": 320, "reboot": 169, "bpf": 321, "perf_event_open": 298,
        "keyctl": 250, "add_key": 248, "request_key": 249, "open_by_handle_at": 304,
        "iopl": 172, "ioperm": 173, "swapon": 167, "swapoff": 168, "acct": 163,
        "userfaultfd": 323, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "fcntl": 72, "prctl": 157, "memfd_create": 319,
        "memfd_secret": 447, "setpriority": 141, "sched_setaffinity": 203,
        "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314,
        "prlimit64": 302, "ioprio_set": 251, "migrate_pages": 256, "move_pages": 279,
        "process_madvise": 440, "process_mrelease": 448, "kcmp": 312, "personality": 135,
        "modify_ldt": 154, "uselib": 134, "syslog": 103, "name_to_handle_at": 303,
        "fanotify_init": 300, "mount_setattr": 442, "quotactl": 179, "vhangup": 153,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
        "lookup_dcookie": 212, "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67,
        "semget": 64, "semop": 65, "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69,
        "msgrcv": 70, "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242,
        "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245, "inotify_init": 253,
        "inotify_init1": 294, "inotify_add_watch": 254, "io_setup": 206, "io_destroy": 207,
        "io_getevents": 208, "io_submit": 209, "io_cancel": 210, "io_pgetevents": 333}),
    "aarch64": types.MappingProxyType({
        "seccomp": 277, "clone": 220, "clone3": 435, "execve": 221, "execveat": 281,
        "socket": 198, "socketpair": 199, "connect": 203, "bind": 200, "listen": 201,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kill": 129,
        "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "mknodat": 33, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "unshare": 97,
        "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "init_module": 105, "delete_module": 106, "finit_module": 273, "kexec_load": 104,
        "kexec_file_load": 294, "reboot": 142, "bpf": 280, "perf_event_open": 241,
        "keyctl": 219, "add_key": 217, "request_key": 218, "open_by_handle_at": 265,
        "swapon": 224, "swapoff": 225, "acct": 89, "userfaultfd": 282, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "fcntl": 25, "prctl": 167, "memfd_create": 279, "memfd_secret": 447,
        "setpriority": 140, "sched_setaffinity": 122, "sched_setscheduler": 119,
        "sched_setparam": 118, "sched_setattr": 274, "prlimit64": 261, "ioprio_set": 30,
        "migrate_pages": 238, "move_pages": 239, "process_madvise": 440,
        "process_mrelease": 448, "kcmp": 272, "personality": 92, "syslog": 116,
        "name_to_handle_at": 264, "fanotify_init": 262, "mount_setattr": 442, "quotactl": 60,
        "vhangup": 58, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266,
        "adjtimex": 171, "lookup_dcookie": 18, "shmget": 194, "shmat": 196, "shmctl": 195,
        "shmdt": 197, "semget": 190, "semop": 193, "semctl": 191, "semtimedop": 192,
        "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "mq_open": 180,
        "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183, "mq_notify": 184,
        "mq_getsetattr": 185, "inotify_init1": 26, "inotify_add_watch": 27, "io_setup": 0,
        "io_destroy": 1, "io_getevents": 4, "io_submit": 2, "io_cancel": 3,
        "io_pgetevents": 292}),
})
_AUDIT_ARCH: Final = types.MappingProxyType({"x86_64": 0xC000003E, "aarch64": 0xC00000B7})
_X32_SYSCALL_BIT: Final = 0x40000000  # x86_64 only: x32 numbers share the x86_64 arch value

# Refused with EPERM whatever their arguments (names missing on an architecture are skipped):
# processes, sockets, tracing, device nodes, io_uring, pidfds, namespaces and mounts, memory
# outside the address-space limit (memfd), other processes' memory placement and file
# handles; then what needs privileges the child never has, as defence in depth (modules,
# kexec, BPF, keys, raw I/O ports, userfaultfd, the new mount API, clocks, the kernel log);
# then POOL_SYSCALLS.
DENIED_SYSCALLS: Final = (
    "fork", "vfork", "execve", "execveat", "socket", "socketpair", "connect", "bind", "listen",
    "sched_setaffinity",
    "ptrace", "process_vm_readv", "process_vm_writev", "tkill", "mknod", "mknodat",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "memfd_create", "memfd_secret", "ioprio_set", "migrate_pages", "move_pages",
    "process_madvise", "process_mrelease", "kcmp", "personality", "modify_ldt", "uselib",
    "name_to_handle_at", "open_by_handle_at", "fanotify_init", "syslog", "vhangup",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "iopl", "ioperm", "swapon",
    "swapoff", "acct", "userfaultfd", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "quotactl", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "lookup_dcookie")
# Kernel objects a candidate has no use for that draw on a pool shared beyond the child (red
# team round 15): System V shared memory, semaphores and message queues, and POSIX message
# queues (charged to no process, they outlive it in its IPC namespace; "private-proc" gives
# the child one of its own as well); inotify (instances and watches per user, counted in the
# user namespace the child's user came from, so shared by every child); Linux AIO contexts
# (fs.aio-max-nr is one count for the whole host, root's processes included). Neither
# architecture here multiplexes System V IPC through `ipc` (i386 does: its numbers are a
# foreign architecture, killed). Nothing the exporter or a helper runs makes these calls
# (traced, session 32).
POOL_SYSCALLS: Final = (
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget",
    "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
    "mq_notify", "mq_getsetattr", "inotify_init", "inotify_init1", "inotify_add_watch",
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents")
# Allowed only towards the process itself: first argument its pid, 0 or -pid (its group).
OWN_PROCESS_SYSCALLS: Final = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
                               "sched_setscheduler", "sched_setparam", "sched_setattr",
                               "prlimit64")
# fcntl commands refused: F_SETOWN, F_SETSIG, F_SETOWN_EX (signals to a chosen process),
# F_SETLEASE, F_NOTIFY (signals on other processes' file activity), F_SETPIPE_SZ (kernel
# memory outside the limit).
DENIED_FCNTL: Final = (8, 10, 15, 1024, 1026, 1031)
# prctl options refused: PR_SET_PDEATHSIG (would outlive the parent), PR_SET_DUMPABLE,
# PR_SET_MM, PR_SET_CHILD_SUBREAPER, PR_SET_PTRACER.
DENIED_PRCTL: Final = (1, 4, 35, 36, 0x59616D61)
_PRIO_PROCESS: Final = 0

_CLONE_THREAD: Final = 0x00010000
_EPERM: Final = 1
_ENOSYS: Final = 38
_BPF_LD_W_ABS: Final = 0x20
_BPF_JEQ: Final = 0x15
_BPF_JGE: Final = 0x35
_BPF_JSET: Final = 0x45
_BPF_RET: Final = 0x06
_RET_KILL_PROCESS: Final = 0x80000000
_RET_ERRNO: Final = 0x00050000
_RET_ALLOW: Final = 0x7FFF0000
_OFFSET_NR: Final = 0
_OFFSET_ARCH: Final = 4
_OFFSET_ARG: Final = 16  # args[i] at 16 + 8 i; its low 32 bits first on little-endian machines
_SECCOMP_SET_MODE_FILTER: Final = 1
_SECCOMP_FILTER_FLAG_TSYNC: Final = 1


def install_seccomp() -> bool:
  """Installs the seccomp filter on every thread of this process; False where it cannot."""
  machine = os.uname().machine
  if sys.platform != "linux" or machine not in _SYSCALL_NUMBERS:
    return False
  program = seccomp_program(machine, os.getpid())
  try:
    import ctypes  # pylint: disable=import-outside-toplevel
    libc = _no_new_privs()
    code = ctypes.create_string_buffer(program, len(program))
    fprog = ctypes.create_string_buffer(struct.pack("@HP", len(program) // 8,
                                                    ctypes.addressof(code)))
    if libc.syscall(ctypes.c_long(_SYSCALL_NUMBERS[machine]["seccomp"]),
                    ctypes.c_ulong(_SECCOMP_SET_MODE_FILTER),
                    ctypes.c_ulong(_SECCOMP_FILTER_FLAG_TSYNC), fprog) != 0:
      raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
  except (OSError, AttributeError, ImportError) as e:
    logger.warning("seccomp filter not installed: %s", e)
    return False
  return True


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
  return struct.pack("=HBBI", code, jt, jf, k)


def _arg(index: int) -> bytes:
  return _bpf(_BPF_LD_W_ABS, _OFFSET_ARG + 8 * index)


def seccomp_program(machine: str, pid: int) -> bytes:
  """The BPF filter: kill on a foreign architecture, EPERM for what the docstring refuses.

  clone is allowed only with CLONE_THREAD (threads, not processes); clone3 answers ENOSYS,
  as its flags sit in memory the filter cannot read, so libc falls back to clone. Every rule
  ends in a return, so a rule that loads an argument never falls through to the next.
  """
  numbers = _SYSCALL_NUMBERS[machine]
  eperm, allow = _bpf(_BPF_RET, _RET_ERRNO | _EPERM), _bpf(_BPF_RET, _RET_ALLOW)

  def rule(name: str, body: list[bytes]) -> list[bytes]:
    return [_bpf(_BPF_JEQ, numbers[name], jf=len(body)), *body] if name in numbers else []

  def only(values: Sequence[int]) -> list[bytes]:
    """The loaded argument must be one of `values`."""
    return [*(_bpf(_BPF_JEQ, v, jt=len(values) - i) for i, v in enumerate(values)), eperm, allow]

  def none_of(values: Sequence[int]) -> list[bytes]:
    """The loaded argument may be none of `values`."""
    return [*(_bpf(_BPF_JEQ, v, jt=len(values) - i) for i, v in enumerate(values)), allow, eperm]

  own = (pid, 0, -pid & 0xFFFFFFFF)
  program = [_bpf(_BPF_LD_W_ABS, _OFFSET_ARCH), _bpf(_BPF_JEQ, _AUDIT_ARCH[machine], jt=1),
             _bpf(_BPF_RET, _RET_KILL_PROCESS), _bpf(_BPF_LD_W_ABS, _OFFSET_NR)]
  if machine == "x86_64":
    program += [_bpf(_BPF_JGE, _X32_SYSCALL_BIT, jf=1), _bpf(_BPF_RET, _RET_KILL_PROCESS)]
  for name in (*DENIED_SYSCALLS, *POOL_SYSCALLS):
    program += rule(name, [eperm])
  program += rule("clone3", [_bpf(_BPF_RET, _RET_ERRNO | _ENOSYS)])
  program += rule("clone", [_arg(0), _bpf(_BPF_JSET, _CLONE_THREAD, jt=1), eperm, allow])
  for name in OWN_PROCESS_SYSCALLS:
    program += rule(name, [_arg(0), *only(own)])
  program += rule("setpriority", [_arg(0), _bpf(_BPF_JEQ, _PRIO_PROCESS, jf=len(own) + 1),
                                  _arg(1), *only(own)])
  program += rule("fcntl", [_arg(1), *none_of(DENIED_FCNTL)])
  program += rule("prctl", [_arg(0), *none_of(DENIED_PRCTL)])
  return b"".join([*program, allow])
