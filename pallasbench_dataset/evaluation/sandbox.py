"""The sandbox of the exporter, the one process that imports candidate code.

Candidate kernels come from search loops and language models: hostile until shown otherwise.
Nothing a candidate does may outlive its exporter or touch anything outside the exporter's
scratch folder. Two halves:

In the exporter, `install(scratch, report_fd)`, after `import jax` and before the candidate
is imported, puts in force, each where the platform allows:

- "dies-with-parent": killed by the kernel when the process that started it dies, so a
  killed driver or worker leaves no exporter running;
- "self-rlimits": no core dumps, no file over 256 MiB, at most 1024 open files;
- "landlock": the kernel refuses to create, write, remove or rename anything outside
  `scratch`, and to execute any file (Landlock LSM);
- "landlock-read": the same Landlock domain lets the exporter read only `scratch` and an
  allow-list of what it legitimately needs (see `read_allow_list`): the interpreter, sys.path,
  the project's packages, system libraries, its own /proc entry and a few device and CPU
  files. Run as root, it could otherwise read any secret on the host (tokens, keys, other
  processes' files) and print it into a published record;
- "seccomp": the kernel refuses fork, exec, sockets, ptrace, io_uring, mknod, namespaces,
  mounts, and signals to other processes;
- "audit-hook": a PEP 578 hook refuses the same at the Python level and more (ctypes,
  writes outside `scratch`, gc walks, tracing, a second hook). A refused event writes
  `refused <event> <args>: <reason>` to `report_fd` and ends the process with SANDBOX_EXIT.
  Where "landlock-read" holds, the hook also answers EACCES to a read outside the allow-list
  made by a thread Landlock could not confine (one jax started before install(), on which
  XLA runs Python callbacks), without ending the process: a refused read is what Landlock
  answers too.

An audit hook alone is no boundary (PEP 578 says so: native code skips it); the kernel layers
are what hold when the hook is bypassed.

In the trusted parent, `run_sandboxed(argv, ...)` runs the exporter in a fresh private scratch
folder, in a new session, with a scrubbed environment, as user nobody when the interpreter and
the project can run as nobody, under a wall-clock limit, a resident-memory limit and a CPU
rlimit, and kills every process of the run when it returns. The result is a context manager
that removes the scratch folder on exit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import importlib.util
import logging
import math
import os
import pathlib
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

logger = logging.getLogger(__name__)

SANDBOX_EXIT: Final = 86               # exit status of a process ended by the audit hook
REPORT_FD_ENV: Final = "PALLASBENCH_SANDBOX_FD"
PARENT_PID_ENV: Final = "PALLASBENCH_SANDBOX_PARENT"
NOBODY: Final = 65534
OUTPUT_CAP: Final = 64 * 1024          # bytes kept of stdout, of stderr and of the report pipe
MAX_FILE_BYTES: Final = 256 * 2**20    # RLIMIT_FSIZE of the exporter
MAX_OPEN_FILES: Final = 1024           # RLIMIT_NOFILE of the exporter
POLL_S: Final = 0.02                   # pipe polling step of the parent
SCAN_S: Final = 0.05                   # how often the parent sums the processes' memory
DRAIN_S: Final = 2.0                   # how long the parent reads pipes after the kill
PROBE_TIMEOUT_S: Final = 120.0         # the one-time check that nobody can run the interpreter
_NO_ENV: Final = types.MappingProxyType({})

# ---------------------------------------------------------------------------------------------
# The audit hook's rules. Immutable, and copied into the hook's closure when install() runs:
# rebinding these names afterwards changes nothing.

# Events refused whatever their arguments: they create processes, reach the network, load or
# call native code, watch or rewrite running code, lift limits, or start an interpreter that
# has no hook. A symlink is refused even inside scratch: its target is resolved when it is
# used, not when it is made, so a later rename could aim it outside.
_REFUSED_EVENTS: Final = frozenset({
    "subprocess.Popen", "os.system", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn",
    "os.spawn", "os.startfile", "os.startfile/2", "pty.spawn", "_winapi.CreateProcess",
    "webbrowser.open", "ensurepip.bootstrap", "cpython.PyInterpreterState_New",
    "os.kill", "os.killpg", "signal.pthread_kill", "os.symlink",
    "sys.addaudithook", "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback",
    "sys.remote_exec", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "resource.setrlimit", "resource.prlimit", "fcntl.ioctl",
})
_REFUSED_PREFIXES: Final = ("socket.", "ctypes.", "sqlite3.", "syslog.")

# Modules whose import is refused: native helpers that act without audit events (raw memory
# and crash helpers, shared memory files and semaphores in /dev/shm, subinterpreters).
_REFUSED_MODULES: Final = frozenset({
    "_ctypes_test", "_testbuffer", "_testcapi", "_testclinic", "_testimportmultiple",
    "_testinternalcapi", "_testmultiphase", "_testsinglephase", "_xxtestfuzz",
    "_posixshmem", "_multiprocessing", "_xxsubinterpreters", "_xxinterpchannels",
})

# Events that change the file system: for each path argument, (its position, the position of
# its dir_fd or None). Every path must resolve inside scratch.
_PATH_EVENTS: Final = types.MappingProxyType({
    "os.chmod": ((0, 2),), "os.chown": ((0, 3),), "os.link": ((0, 2), (1, 3)),
    "os.mkdir": ((0, 2),), "os.remove": ((0, 1),), "os.removexattr": ((0, None),),
    "os.rename": ((0, 2), (1, 3)), "os.rmdir": ((0, 1),), "os.setxattr": ((0, None),),
    "os.truncate": ((0, None),), "os.utime": ((0, 3),),
})

# Environment variables jax sets in its own process when jax.experimental.mosaic.gpu is
# imported (os.environ[...] = ... raises os.putenv). Any other change is refused: native code
# reads variables such as XLA_FLAGS (--xla_dump_to writes files without an audit event).
_JAX_ENV_KEYS: Final = frozenset({
    "MOSAIC_GPU_CUDA_ROOT", "MOSAIC_GPU_RUNTIME_LIB_PATH", "MOSAIC_GPU_NVSHMEM_BC_PATH",
    "MOSAIC_GPU_NVSHMEM_SO_PATH",
})

_MAX_SYMLINKS: Final = 40
_REPORT_LINE_CAP: Final = 400

# ---------------------------------------------------------------------------------------------
# Seccomp and Landlock: numbers from the Linux UAPI headers.

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
        "fsmount": 432, "fspick": 433}),
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
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433}),
})
_AUDIT_ARCH: Final = types.MappingProxyType({"x86_64": 0xC000003E, "aarch64": 0xC00000B7})
_X32_SYSCALL_BIT: Final = 0x40000000  # x86_64 only: x32 numbers share the x86_64 arch value

# Refused with EPERM whatever their arguments (names missing on an architecture are skipped).
# The second group needs privileges the exporter has only when it runs as root: kernel
# modules, kexec, BPF, keys, file handles (the classic container escape), raw I/O ports,
# userfaultfd (a favourite of kernel exploits) and the new mount API.
_DENIED_SYSCALLS: Final = (
    "fork", "vfork", "execve", "execveat", "socket", "socketpair", "connect", "bind", "listen",
    "ptrace", "process_vm_readv", "process_vm_writev", "tkill", "mknod", "mknodat",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "open_by_handle_at", "iopl",
    "ioperm", "swapon", "swapoff", "acct", "userfaultfd", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick")
# Allowed only towards the process itself: first argument its pid, 0 or -pid (its group).
_SIGNAL_SYSCALLS: Final = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")

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
_OFFSET_ARG0: Final = 16  # low 32 bits of args[0] on little-endian machines
_PR_SET_NO_NEW_PRIVS: Final = 38
_PR_SET_PDEATHSIG: Final = 1
_SECCOMP_SET_MODE_FILTER: Final = 1
_SECCOMP_FILTER_FLAG_TSYNC: Final = 1

_LANDLOCK_CREATE_RULESET: Final = 444  # the same number on every architecture
_LANDLOCK_ADD_RULE: Final = 445
_LANDLOCK_RESTRICT_SELF: Final = 446
_LANDLOCK_CREATE_RULESET_VERSION: Final = 1
_LANDLOCK_RULE_PATH_BENEATH: Final = 1
# Rights to change the file system, by the Landlock ABI version that introduced them:
# WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_{CHAR,DIR,REG,SOCK,FIFO,BLOCK,SYM}; REFER;
# TRUNCATE; IOCTL_DEV.
_LANDLOCK_FS_RIGHTS: Final = ((1, 0x1FF2), (2, 0x2000), (3, 0x4000), (5, 0x8000))
_LANDLOCK_EXECUTE: Final = 0x1     # execve only: dlopen's mmap(PROT_EXEC) needs READ_FILE
_LANDLOCK_READ_FILE: Final = 0x4
_LANDLOCK_READ_DIR: Final = 0x8
# The only rights a rule on a file (not a folder) may carry: EXECUTE, WRITE_FILE, READ_FILE,
# TRUNCATE, IOCTL_DEV.
_LANDLOCK_FILE_RIGHTS: Final = 0x1 | 0x2 | 0x4 | 0x4000 | 0x8000
_LANDLOCK_NET_TCP: Final = 0x3     # ABI 4: BIND_TCP, CONNECT_TCP
_LANDLOCK_SCOPES: Final = 0x3      # ABI 6: abstract unix sockets, signals

# What the exporter may read besides scratch, the interpreter's folders and sys.path (each
# where it exists; symlinks resolved). Found by tracing every openat of the exporter after
# install() while it exported all shipped kernels for cuda, tpu and cpu, plus eager jax work.
# Folders: the system's libraries (what the loader and libc open lazily: libraries, locales,
# gconv, zoneinfo); the process' own /proc entry (/proc/self resolves to /proc/<pid> when the
# rule is made; thread-self lies beneath it); the CPU topology XLA's CPU client reads.
_SYSTEM_READ_FOLDERS: Final = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/proc/self",
                               "/sys/devices/system/cpu")
# Files: the loader's cache (dlopen of a library not yet loaded), the time zone, what XLA's
# CPU client reads (/proc/cpuinfo) and the harmless devices.
_SYSTEM_READ_FILES: Final = ("/etc/ld.so.cache", "/etc/localtime", "/proc/cpuinfo",
                             "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
# The project's own packages, wherever they are imported from (a checkout or site-packages).
_PROJECT_PACKAGES: Final = ("pallasbench_dataset", "kernels_gpu", "kernels_tpu")
# The probe that tells whether the calling thread is confined by Landlock: a confined thread
# may not list "/" (no rule covers it), any other thread may.
_PROBE_PATH: Final = "/"
_PROBE_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# Landlock rules hold their inode, but procfs makes a new inode whenever it looks an entry up
# again, and it may once the old dentry is evicted: the rule's file descriptors stay open, so
# the dentries (and the rules on /proc) live as long as the process.
_PINNED_FDS: list[int] = []


# ---------------------------------------------------------------------------------------------
# In the exporter.

def install(scratch: pathlib.Path, report_fd: int) -> tuple[str, ...]:
  """Puts the sandbox in force in this process; returns the names of the layers installed.

  Call once, after `import jax` and before importing candidate code. The audit hook goes last:
  the kernel layers need ctypes, which the hook refuses. The layer names are also written to
  `report_fd` as the line `layers a,b,c`, so the parent knows what held.
  """
  root = os.path.realpath(scratch)
  sys.dont_write_bytecode = True  # a .pyc written next to a module would be a refused write
  readable = read_allow_list(root)
  landlock = install_landlock(root, readable)
  layers = [name for name, installed in (
      ("dies-with-parent", die_with_parent(int(os.environ[PARENT_PID_ENV]))),
      ("self-rlimits", limit_resources()),
      ("landlock", landlock),
      ("landlock-read", landlock),
      ("seccomp", install_seccomp()),
  ) if installed]
  sys.addaudithook(_make_audit_hook(root, report_fd, _trusted_roots(root),
                                    readable if landlock else None))
  layers.append("audit-hook")
  os.write(report_fd, f"layers {','.join(layers)}\n".encode())
  return tuple(layers)


def install_from_env() -> tuple[str, ...]:
  """install() for a process started by run_sandboxed: scratch is the cwd, the fd in the env."""
  return install(pathlib.Path.cwd(), int(os.environ[REPORT_FD_ENV]))


def die_with_parent(parent: int) -> bool:
  """Asks the kernel to kill this process when the process that started it, `parent`, dies
  (a killed driver or worker must leave no exporter or judge running), then checks that
  `parent` is still its parent: had it died first, the request would never fire."""
  try:
    import ctypes  # pylint: disable=import-outside-toplevel
    libc = ctypes.CDLL(None, use_errno=True)
    _checked(libc.prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL),
                        ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)))
  except (OSError, AttributeError) as e:
    logger.warning("parent-death signal not set: %s", e)
    return False
  if os.getppid() != parent:
    os._exit(1)
  return True


def limit_resources() -> bool:
  """Lowers this process' core, file-size and open-file limits; never raises one."""
  import resource  # pylint: disable=import-outside-toplevel
  infinity = resource.RLIM_INFINITY
  try:
    for kind, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, MAX_FILE_BYTES),
                        (resource.RLIMIT_NOFILE, MAX_OPEN_FILES)):
      soft, hard = resource.getrlimit(kind)
      hard = value if hard == infinity else min(hard, value)
      resource.setrlimit(kind, (hard if soft == infinity else min(soft, hard), hard))
  except (OSError, ValueError) as e:
    logger.warning("resource limits not set: %s", e)
    return False
  return True


def install_seccomp() -> bool:
  """Installs the seccomp filter on every thread of this process; False where it cannot."""
  machine = os.uname().machine
  if sys.platform != "linux" or machine not in _SYSCALL_NUMBERS:
    return False
  program = _seccomp_program(machine, os.getpid())
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


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReadAllowList:
  """What the exporter may read besides scratch: folders (and all beneath) and single files.

  Real paths, none of them inside scratch or containing it (that would also open other runs'
  scratch folders).
  """
  folders: tuple[str, ...]
  files: tuple[str, ...]


def read_allow_list(scratch: str) -> ReadAllowList:
  """The exporter's read allow-list: the interpreter's folders and sys.path (zip files there
  too), the project's packages, then _SYSTEM_READ_FOLDERS and _SYSTEM_READ_FILES, each where
  it exists."""
  folders = set(_trusted_roots(scratch))
  zips = {os.path.realpath(p) for p in sys.path if isinstance(p, str) and os.path.isfile(p)}
  for name in _PROJECT_PACKAGES:
    try:
      spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
      continue
    for entry in (spec and spec.submodule_search_locations) or ():
      folders.add(os.path.realpath(entry))
  folders.update(os.path.realpath(p) for p in _SYSTEM_READ_FOLDERS if os.path.isdir(p))
  folders = {f for f in folders if os.path.isdir(f) and f != "/"
             and not _is_within(f, scratch) and not _is_within(scratch, f)}
  folders = {f for f in folders if not any(_is_within(f, g) for g in folders if g != f)}
  files = zips | {os.path.realpath(p) for p in _SYSTEM_READ_FILES if os.path.exists(p)}
  files = {f for f in files if not os.path.isdir(f) and not _is_within(f, scratch)
           and not any(_is_within(f, g) for g in folders)}
  return ReadAllowList(folders=tuple(sorted(folders)), files=tuple(sorted(files)))


def install_landlock(scratch: str, readable: ReadAllowList | None = None) -> bool:
  """Confines the file-system access of this thread (and of threads it starts): changes only
  inside `scratch`; reads only of `scratch` and `readable` (default: read_allow_list); no
  execution at all. False where Landlock is not available.

  Landlock restricts the calling thread only: threads started before install() (jax starts a
  few) stay unrestricted; XLA runs Python callbacks on them, which is why the audit hook
  repeats the read allow-list on unconfined threads (and checks every write anyway).
  """
  if sys.platform != "linux" or os.uname().machine not in _SYSCALL_NUMBERS:
    return False
  if readable is None:
    readable = read_allow_list(scratch)
  try:
    import ctypes  # pylint: disable=import-outside-toplevel
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(ctypes.c_long(_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 1:
      raise OSError(ctypes.get_errno(), "Landlock is not available")
    change_rights = sum(bit for version, bit in _LANDLOCK_FS_RIGHTS if abi >= version)
    read_rights = _LANDLOCK_READ_FILE | _LANDLOCK_READ_DIR
    fs_rights = change_rights | read_rights | _LANDLOCK_EXECUTE
    attr = struct.pack("=Q", fs_rights)
    attr += struct.pack("=Q", _LANDLOCK_NET_TCP) if abi >= 4 else b""
    attr += struct.pack("=Q", _LANDLOCK_SCOPES) if abi >= 6 else b""
    ruleset = _checked(libc.syscall(ctypes.c_long(_LANDLOCK_CREATE_RULESET), attr,
                                    ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)))
    rules = [(scratch, change_rights | read_rights, True)]
    rules += [(folder, read_rights, False) for folder in readable.folders]
    rules += [(file, _LANDLOCK_READ_FILE, False) for file in readable.files]
    opened = []
    try:
      for path, rights, required in rules:
        try:
          fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
          if required:
            raise
          continue  # gone since the list was made: nothing to allow
        opened.append(fd)
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
          rights &= _LANDLOCK_FILE_RIGHTS
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


def _checked(result: int) -> int:
  if result < 0:
    import ctypes  # pylint: disable=import-outside-toplevel
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
  return result


def _no_new_privs():
  """Sets no_new_privs (required by seccomp and Landlock without CAP_SYS_ADMIN); returns libc."""
  import ctypes  # pylint: disable=import-outside-toplevel
  libc = ctypes.CDLL(None, use_errno=True)
  _checked(libc.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)))
  return libc


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
  return struct.pack("=HBBI", code, jt, jf, k)


def _seccomp_program(machine: str, pid: int) -> bytes:
  """The BPF filter: kill on a foreign architecture, EPERM for the denied syscalls.

  clone is allowed only with CLONE_THREAD (threads, not processes); clone3 answers ENOSYS,
  as its flags sit in memory the filter cannot read, so libc falls back to clone.
  """
  numbers = _SYSCALL_NUMBERS[machine]
  eperm, allow = _bpf(_BPF_RET, _RET_ERRNO | _EPERM), _bpf(_BPF_RET, _RET_ALLOW)

  def rule(name: str, body: list[bytes]) -> list[bytes]:
    return [_bpf(_BPF_JEQ, numbers[name], jf=len(body)), *body] if name in numbers else []

  program = [_bpf(_BPF_LD_W_ABS, _OFFSET_ARCH), _bpf(_BPF_JEQ, _AUDIT_ARCH[machine], jt=1),
             _bpf(_BPF_RET, _RET_KILL_PROCESS), _bpf(_BPF_LD_W_ABS, _OFFSET_NR)]
  if machine == "x86_64":
    program += [_bpf(_BPF_JGE, _X32_SYSCALL_BIT, jf=1), _bpf(_BPF_RET, _RET_KILL_PROCESS)]
  for name in _DENIED_SYSCALLS:
    program += rule(name, [eperm])
  program += rule("clone3", [_bpf(_BPF_RET, _RET_ERRNO | _ENOSYS)])
  program += rule("clone", [_bpf(_BPF_LD_W_ABS, _OFFSET_ARG0),
                            _bpf(_BPF_JSET, _CLONE_THREAD, jt=1), eperm, allow])
  own = (pid, 0, -pid & 0xFFFFFFFF)
  checks = [_bpf(_BPF_JEQ, value, jt=len(own) - i) for i, value in enumerate(own)]
  for name in _SIGNAL_SYSCALLS:
    program += rule(name, [_bpf(_BPF_LD_W_ABS, _OFFSET_ARG0), *checks, eperm, allow])
  return b"".join([*program, allow])


def _trusted_roots(scratch: str) -> tuple[str, ...]:
  """Folders native extension modules may be loaded from: the interpreter's and sys.path's.

  Anything inside scratch is excluded (the candidate writes there), and so is any folder that
  contains scratch (it would also contain other runs' scratch folders).
  """
  roots = set()
  for entry in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path):
    if isinstance(entry, str) and entry and os.path.isdir(entry):
      path = os.path.realpath(entry)
      if not _is_within(path, scratch) and not _is_within(scratch, path):
        roots.add(path)
  return tuple(sorted(roots))


def _is_within(path: str, folder: str) -> bool:
  return path == folder or path.startswith(folder.rstrip("/") + "/")


def _make_audit_hook(scratch: str, report_fd: int, trusted_roots: tuple[str, ...],
                     readable: ReadAllowList | None = None
                     ) -> Callable[[str, tuple[Any, ...]], None]:
  """The audit hook, closed over everything it uses.

  With `readable` (given where Landlock confines reads), a read (open, listdir, scandir)
  outside scratch and `readable` raises PermissionError on a thread Landlock does not confine,
  as Landlock would on the others; on those the kernel decides, with the real path.

  A candidate can import this module and rebind its globals, `builtins` and `os`. The hook
  therefore reads no global name at all (a test checks its bytecode): only objects captured
  here, when install() runs, before any candidate code. It never calls a method of an argument
  it was given, so no candidate code runs inside it. CPython hands the hook a PathLike already
  converted to str, the very path the call then uses; a path of any other type is refused
  rather than converted again (a second __fspath__ call could answer differently).
  """
  str_, bytes_, int_, float_, bool_, tuple_, type_ = str, bytes, int, float, bool, tuple, type
  repr_, object_repr, exact_str, decode = repr, object.__repr__, str.__str__, bytes.decode
  base_exception, os_error = BaseException, OSError
  encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
  lstat, readlink, getcwd, write, exit_now = os.lstat, os.readlink, os.getcwd, os.write, os._exit
  refused_events, refused_prefixes, refused_modules = (
      _REFUSED_EVENTS, _REFUSED_PREFIXES, _REFUSED_MODULES)
  path_events, env_keys = _PATH_EVENTS, _JAX_ENV_KEYS
  write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
  s_ifmt, s_iflnk = stat.S_IFMT(0o177777), stat.S_IFLNK
  max_symlinks, line_cap, exit_code = _MAX_SYMLINKS, _REPORT_LINE_CAP, SANDBOX_EXIT
  scratch_prefix, own_pid = scratch + "/", str(os.getpid())
  permission_error, eacces = PermissionError, errno.EACCES
  open_fd, close_fd, probe_path, probe_flags = os.open, os.close, _PROBE_PATH, _PROBE_FLAGS
  confine_reads = readable is not None
  read_folders = tuple(f + "/" for f in readable.folders) if readable is not None else ()
  read_files = frozenset(readable.files) if readable is not None else frozenset()
  denied = object()  # a check's answer: not a violation, but EACCES for the caller

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
    """Whether `name` is /proc itself or another process' entry there (its memory, environ).

    Run as root, the exporter could otherwise read the trusted parent's secrets.
    """
    path = resolve(name, getcwd(), True)
    if path is None or path == "/proc":
      return True
    entry = path[6:].split("/")[0] if path.startswith("/proc/") else ""
    return entry.isdigit() and entry != own_pid

  def allowed_read(path: str | None) -> bool:
    if path is None:
      return False
    if inside(path) or path in read_files:
      return True
    with_slash = path + "/"
    for folder in read_folders:
      if with_slash.startswith(folder):
        return True
    return False

  def confined_thread() -> bool:
    """Whether Landlock confines the calling thread: then listing "/" fails with EACCES.

    Any other failure (no fd left, say) counts as unconfined: a full fd table must not pass
    for confinement while another thread frees a slot for the read that follows.
    """
    try:
      fd = open_fd(probe_path, probe_flags)
    except os_error as e:
      return e.errno == eacces
    close_fd(fd)
    return False

  def check_read(name: str | None, base: str | None) -> object | None:
    """`denied` for a read outside the allow-list on an unconfined thread; else None.

    `name` None or `base` None: a path the hook cannot place (a dir_fd it is not told).
    """
    if not confine_reads:
      return None
    if name is not None and base is not None and allowed_read(resolve(name, base, True)):
      return None
    return None if confined_thread() else denied

  def check_listing(event, args) -> object | None:
    path = args[0]
    if type_(path) is int_:
      return None  # an open fd: checked when it was opened
    return check_read("." if path is None else text(path), getcwd())

  def check_open(event, args) -> object | None:
    path, mode, flags = args[0], args[1], args[2]
    name = text(path)
    if name == probe_path and mode is None and type_(flags) is int_ and flags == probe_flags:
      return None  # confined_thread()'s probe: listing "/" shows no secret
    relative = name is not None and not name.startswith("/")
    # Only these can reach /proc: an absolute path naming it, or one that goes up or starts
    # from a cwd or dir_fd (no symlink can be made to lead there).
    if name is not None and (relative or "proc" in name or ".." in name):
      if mode is None and relative and ("proc" in name or ".." in name):
        return "a relative path up or into /proc in os.open (the event does not carry dir_fd)"
      if foreign_proc(name):
        return "another process' /proc entries"
    writes = (type_(flags) is not int_ or flags & write_flags
              or (mode is not None and (type_(mode) is not str_ or "w" in mode or "a" in mode
                                        or "x" in mode or "+" in mode)))
    if type_(path) is int_:  # an open fd keeps the access it was opened with
      return None
    if not writes:  # os.open does not tell its dir_fd: a relative path there cannot be placed
      return check_read(name, None if mode is None and relative else getcwd())
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
    for root in trusted_roots:
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

  checks = types.MappingProxyType({
      "open": check_open, "import": check_import, "os.putenv": check_env,
      "os.unsetenv": check_env, "object.__setattr__": check_setattr,
      "os.listdir": check_listing, "os.scandir": check_listing,
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
    except base_exception:
      pass  # the report fd may be closed; the exit status still says it
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
    except base_exception:
      reason = "arguments the sandbox cannot check"
    if reason is denied:
      raise permission_error(eacces, "Permission denied: a read outside the sandbox")
    if reason is not None:
      refuse(event, args, reason)

  return hook


# ---------------------------------------------------------------------------------------------
# In the trusted parent.

@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SandboxRun:
  """What a sandboxed run left: its exit, its output, what the sandbox refused, its scratch.

  Use as a context manager (or call cleanup()): the scratch folder goes on exit, also when the
  caller raises.
  """
  returncode: int
  stdout: str
  stderr: str
  violations: tuple[str, ...]   # the audit hook's `refused ...` lines
  timed_out: bool
  out_of_memory: bool
  wall_s: float
  layers: tuple[str, ...]       # parent-side layers, then those the child reported
  scratch: pathlib.Path

  @property
  def violated(self) -> bool:
    """A refusal, also when the candidate closed the report fd before the hook could write."""
    return bool(self.violations) or self.returncode == SANDBOX_EXIT

  def read_file(self, name: str, *, max_bytes: int) -> bytes:
    """A regular file the child left in scratch, read without following links.

    The child owns the folder: a symlink or a hard link there could make the trusted parent
    read whatever it points at, with the parent's rights.
    """
    if not name or "/" in name or name in (".", ".."):
      raise ValueError(f"not a plain file name: {name!r}")
    folder = os.open(self.scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
      fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    finally:
      os.close(folder)
    with os.fdopen(fd, "rb") as f:
      info = os.fstat(fd)
      if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        raise ValueError(f"{name} in the scratch folder is not a plain file")
      data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
      raise ValueError(f"{name} in the scratch folder is larger than {max_bytes} bytes")
    return data

  def cleanup(self) -> None:
    _remove_tree(self.scratch)

  def __enter__(self) -> SandboxRun:
    return self

  def __exit__(self, *exc_info) -> None:
    self.cleanup()


def run_sandboxed(argv: Sequence[str], *, stdin: bytes, timeout_s: float, memory_bytes: int,
                  extra_env: Mapping[str, str] = _NO_ENV) -> SandboxRun:
  """Runs `argv` in the sandbox (see the module docstring); the child should call install().

  Returns once every process of the run is dead. Use the result as a context manager, so its
  scratch folder is removed.
  """
  scratch = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-sandbox-"))
  try:
    return _run(list(argv), scratch, stdin, timeout_s, memory_bytes, extra_env)
  except BaseException:
    _remove_tree(scratch)
    raise


def _run(argv: list[str], scratch: pathlib.Path, stdin: bytes, timeout_s: float,
         memory_bytes: int, extra_env: Mapping[str, str]) -> SandboxRun:
  as_nobody = os.geteuid() == 0 and _nobody_can_run(argv[0])
  if as_nobody:
    os.chown(scratch, NOBODY, NOBODY)
  layers = ["new-session", "scrubbed-env"] + (["setuid-nobody"] if as_nobody else [])
  report_read, report_write = os.pipe()
  identity = dict(user=NOBODY, group=NOBODY, extra_groups=[]) if as_nobody else {}
  start = time.monotonic()
  try:
    proc = subprocess.Popen(  # pylint: disable=consider-using-with  (waited for below)
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=scratch, env=_child_env(scratch, extra_env, report_write), start_new_session=True,
        pass_fds=(report_write,), **identity)
  except BaseException:
    os.close(report_read)
    raise
  finally:
    os.close(report_write)
  watch, pipes = _Watch(proc.pid), None
  try:
    if _limit_child(proc.pid, timeout_s):
      layers.append("rlimits")
    pipes = _Pipes(proc, stdin, report_read)
    timed_out, out_of_memory = _supervise(proc.pid, pipes, watch, start + timeout_s,
                                          memory_bytes)
  finally:
    watch.kill_all()
    proc.wait()
    wall_s = time.monotonic() - start
    if pipes is None:
      os.close(report_read)
    else:
      pipes.drain(DRAIN_S)
  report = pipes.report.text().splitlines()
  first = report[0] if report else ""
  child_layers = first.removeprefix("layers ").split(",") if first.startswith("layers ") else []
  return SandboxRun(
      returncode=proc.returncode, stdout=pipes.stdout.text(), stderr=pipes.stderr.text(),
      violations=tuple(line for line in report if line.startswith("refused ")),
      timed_out=timed_out, out_of_memory=out_of_memory, wall_s=wall_s,
      layers=tuple(layers + [name for name in child_layers if name]), scratch=scratch)


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


def _child_env(scratch: pathlib.Path, extra_env: Mapping[str, str], report_fd: int | None
               ) -> dict[str, str]:
  """Only what the exporter needs: no tokens or credentials of the parent get through."""
  env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "TMPDIR": str(scratch),
         "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
         "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
  if "PYTHONPATH" in os.environ:  # absolute: the child's cwd is its scratch folder
    env["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p)
  env.update(extra_env)
  if report_fd is not None:
    env[REPORT_FD_ENV] = str(report_fd)
  env[PARENT_PID_ENV] = str(os.getpid())
  return env


@functools.cache
def _nobody_can_run(executable: str) -> bool:
  """Whether `executable` starts and imports this project as user nobody (checked once).

  It cannot when the interpreter, its libraries or the checkout sit under a folder closed to
  others (a 0700 home, say); the run then keeps the parent's user.
  """
  folder = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-probe-"))
  try:
    os.chown(folder, NOBODY, NOBODY)
    probe = subprocess.run([executable, "-c", f"import {__name__}"], cwd=folder,
                           env=_child_env(folder, _NO_ENV, None), user=NOBODY, group=NOBODY,
                           extra_groups=[], stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=PROBE_TIMEOUT_S, check=False)
    error = probe.stderr.decode(errors="replace").strip().splitlines()[-1:] or [
        f"exit status {probe.returncode}"]
  except (OSError, subprocess.SubprocessError) as e:
    probe, error = None, [str(e)]
  finally:
    _remove_tree(folder)
  if probe is None or probe.returncode != 0:
    logger.warning("sandboxed runs keep uid %d: %s cannot run as nobody (%s)", os.geteuid(),
                   executable, error[0])
    return False
  return True


def _limit_child(pid: int, timeout_s: float) -> bool:
  """CPU-time and core rlimits on the started child: a backstop should the parent die.

  The CPU limit allows every core busy for the whole wall-clock limit, so it never cuts a run
  the wall clock would let finish.
  """
  import resource  # pylint: disable=import-outside-toplevel
  cpu_s = math.ceil(timeout_s * (os.cpu_count() or 1)) + 1
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
  """The child's stdin, stdout, stderr and report pipe, served without threads."""

  def __init__(self, proc: subprocess.Popen, stdin: bytes, report_fd: int):
    self.stdout, self.stderr = _Capture(cap=OUTPUT_CAP), _Capture(cap=OUTPUT_CAP)
    self.report = _Capture(cap=OUTPUT_CAP)
    self._selector = selectors.DefaultSelector()
    self._pending = memoryview(stdin)
    for fileobj, capture in ((proc.stdout, self.stdout), (proc.stderr, self.stderr),
                             (report_fd, self.report)):
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
    self._report_fd = report_fd

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
    os.close(self._report_fd)


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


def _remove_tree(path: pathlib.Path) -> None:
  """Removes a scratch folder, also one whose folders the child made unreadable."""

  def unlock(function, name, _):
    parent = os.path.dirname(name)
    for folder in (parent, name):
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
