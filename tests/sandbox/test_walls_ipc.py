"""Red team round 15: System V IPC was no wall of the sandbox, and what it held outlived the child.

The walls bound a sandboxed process' memory by its resident set, which the parent watches, and
its address space (RLIMIT_AS); memfd is refused so that "every page the child holds is in its
resident memory" (walls.py). System V shared memory is not: `shmget` creates a segment in the
host's IPC namespace (the child gets no IPC namespace of its own), its pages are charged to no
process once detached, and the segment stays after the process dies (kernel.shm_rmid_forced is
0 by default) until someone removes it or the host reboots. Message queues (`msgget`) likewise
hold kernel memory past the process. Seccomp refuses neither, Landlock does not govern them, and
only the tripwire (ctypes refused) stands between candidate Python and the calls: a wall the
design says must hold for native code (an exploit of the analysis helper's MLIR parser, a
candidate's native code) is missing.

The gain: a native-code hostile artifact or candidate plants segments chunk by chunk (attach,
touch, detach: never more than a chunk resident), unbounded by its memory limit, and leaves
them behind: the host's memory is gone for every later evaluation (their processes and helpers
then die as out of memory, or the OOM killer takes the judges), and nothing the run cleans up
removes them.

Closed (session 32), twice over: seccomp refuses System V IPC and POSIX message queues
(walls.POOL_SYSCALLS), and "private-proc" gives the child an IPC namespace of its own, so what
native code makes where seccomp is not up dies with the child. Each wall is tested alone.

Here the child is the stand-in for native code (tripwire off, as test_walls does for every
wall). It plants one 64 MiB segment and one small message queue and exits; the test then
removes whatever is left (inert). Run it in `unshare --ipc`: a mutant of both walls then
plants in a throwaway namespace.
"""

import json
import os
import sys

import pytest

from pallasbench_dataset.evaluation.sandbox import ALL_WALLS
from tests.sandbox.test_walls import LINUX, run_child

CHUNK = 64 << 20
PLANT = f"""
    import ctypes, errno, json, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    found = {{}}
    shmid = libc.shmget(0, {CHUNK}, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    found["shmget"] = shmid if shmid >= 0 else errno.errorcode[ctypes.get_errno()]
    if shmid >= 0:
      addr = libc.shmat(shmid, None, 0)
      if addr not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(addr, 1, {CHUNK})
        libc.shmdt(ctypes.c_void_p(addr))
        found["touched"] = True
    msqid = libc.msgget(0, 0o1000 | 0o600)
    found["msgget"] = msqid if msqid >= 0 else errno.errorcode[ctypes.get_errno()]
    with open("/proc/self/status") as f:
      found["rss_kib"] = next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
    print(json.dumps(found), flush=True)
"""


def _remove(kind: str, ident: int) -> None:
  import ctypes  # pylint: disable=import-outside-toplevel
  libc = ctypes.CDLL(None, use_errno=True)
  (libc.shmctl if kind == "shm" else libc.msgctl)(ident, 0, None)  # IPC_RMID


def _segment_bytes(shmid: int) -> int | None:
  with open("/proc/sysvipc/shm") as f:
    next(f)
    for line in f:
      fields = line.split()
      if int(fields[1]) == shmid:
        return int(fields[14])  # rss
  return None


def _segments() -> set[int]:
  """The ids of the System V segments of CHUNK bytes in this process' IPC namespace."""
  with open("/proc/sysvipc/shm") as f:
    next(f)
    return {int(line.split()[1]) for line in f if int(line.split()[3]) == CHUNK}


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
def test_system_v_ipc_is_refused_or_dies_with_the_child():
  with run_child(PLANT, tripwire_=False) as run:
    assert run.returncode == 0, run.stderr[-2000:]
    assert {"rlimits", "landlock", "seccomp"} <= set(run.layers), run.layers
    found = json.loads(run.stdout.splitlines()[0])
  planted = [("shm", found["shmget"])] * isinstance(found["shmget"], int) + [
      ("msg", found["msgget"])] * isinstance(found["msgget"], int)
  try:
    left = {kind: ident for kind, ident in planted}
    print(f"child: {found}; segment after the child died: "
          f"{_segment_bytes(left['shm']) if 'shm' in left else None} bytes resident",
          file=sys.stderr)
    assert not planted, (found, "left behind after the child died:",
                         {k: _segment_bytes(v) if k == "shm" else "queue" for k, v in left.items()})
  finally:
    for kind, ident in planted:
      _remove(kind, ident)
  assert found["shmget"] == found["msgget"] == "EPERM", found


# Every wall but seccomp: what native code makes must die with the child (its IPC namespace).
NO_SECCOMP = tuple(w for w in ALL_WALLS if w != "seccomp")


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
def test_without_seccomp_what_the_child_made_dies_with_its_ipc_namespace():
  before = _segments()
  with run_child(PLANT, walls_=NO_SECCOMP, tripwire_=False) as run:
    assert run.returncode == 0, run.stderr[-2000:]
    assert "private-proc" in run.layers and "seccomp" not in run.layers, run.layers
    found = json.loads(run.stdout.splitlines()[0])
  left = _segments() - before
  try:
    assert isinstance(found["shmget"], int) and found.get("touched"), found  # made, in its own
    assert isinstance(found["msgget"], int), found
    assert not left, ("segments of the child outlived it:", left)
  finally:
    for shmid in left:
      _remove("shm", shmid)
