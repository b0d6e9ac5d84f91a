"""Adversarial control, class 16 (griefing: a candidate's cost lands on other evaluations), relu:
the host's task slots (pids, threads), which every sandboxed process shares.

Attack: while the exporter imports the file, start threads (pure Python `threading`, each
parked on an Event with a 64 KiB stack) until the kernel refuses one ("can't start new thread":
the uid's RLIMIT_NPROC, threads-max or pid_max), and keep taking every slot that frees up for
HOLD_S seconds; then release them, define an honest relu and export it. Here the hog stops at
CAP threads and holds 3 s so that the control is inert; a hostile candidate takes every slot
and holds until just before its export budget (240 s on a GPU host, 600 s on a CPU one).

Why every check lets it through:
- The exporter is wholly untrusted and only its artifact is judged; its artifact is the honest
  relu, so this candidate's verdict is right (pass).
- Threads are what the walls allow by design (XLA needs them): seccomp lets `clone` with
  CLONE_THREAD through, the tripwire does not refuse `_thread.start_new_thread`, and the
  rlimits wall sets no RLIMIT_NPROC; there is no pids cgroup. "one-core" bounds the threads'
  CPU, not their number; RLIMIT_AS (2 x the memory limit + 8 GiB) leaves room for tens of
  thousands of 64 KiB stacks, and their kernel stacks are outside the RSS the parent watches.
- Every sandboxed process runs as the same user (nobody under a root host, the judge's own user
  otherwise): the exporters of the whole batch and the judges' analysis helpers draw on one
  pool of that user's task slots, and on the host's pid_max (32768 here), which the judges,
  their compilers and the driver draw on too.

What it does to the others (measured with tests/judge/demo_thread_griefing.py, the pool scaled
down with RLIMIT_NPROC): an honest neighbour whose exporter starts while the hog holds the
pool is `error` (crash: XLA's Eigen pool cannot start its threads; reward 0 in that batch); one
whose module is analysed while the hog holds it is `rejected` ("the exported module cannot be
analysed: the module analysis process died with SIGABRT while analysing the module"): LLVM's
thread pool aborts, and `verdicts.load_decided` does not know that reason, so the verdict cache
keeps it as the honest source's verdict for every later batch (docs/red-team/round15.md).

Closed (session 32): the walls' "own-tasks" sets RLIMIT_NPROC inside each sandboxed child's
own user namespace, where the kernel counts the child's tasks apart (ucounts, Linux 5.14+):
the hog holds at most its own 96 tasks, and its neighbours' pools are untouched
(tests/sandbox/test_walls.py::test_each_sandboxed_child_holds_its_own_share_of_the_task_pool).

Expected: pass (its own verdict is right; see adv_thread_share_probe_relu for the hole).
"""
import threading
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CAP = 256      # a hostile candidate has no cap
HOLD_S = 3.0   # ... and holds until just before its export budget

threading.stack_size(64 << 10)
_release = threading.Event()
_held: list[threading.Thread] = []


def _take() -> bool:
  t = threading.Thread(target=_release.wait, daemon=True)
  try:
    t.start()
  except RuntimeError:  # "can't start new thread": the pool is empty
    return False
  _held.append(t)
  return True


_start, _refused = time.perf_counter(), 0
while time.perf_counter() - _start < HOLD_S:
  if len(_held) >= CAP or not _take():
    _refused += len(_held) < CAP
    time.sleep(0.002)  # take the next slot that frees up
_peak = len(_held)
_release.set()
for _t in _held:
  _t.join()
_held.clear()
print(f"adv: held {_peak} threads for {HOLD_S:.0f} s ({_refused} refusals)", flush=True)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
