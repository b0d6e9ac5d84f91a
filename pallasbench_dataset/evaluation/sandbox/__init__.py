"""The sandbox that holds the exporter, the one process that imports candidate code.

Three parts, in the order they act:

- launch.py (the trusted parent): a scratch folder, the child's walls decided, the child
  started in a new session with a scrubbed environment, watched (wall clock, memory) and
  killed with everything it started (run_sandboxed: the exporter), or left running as a
  helper its caller watches (start_sandboxed: the judge's module analysis);
- walls.py (the child, first thing, one thread): veil, user nobody, parent-death signal,
  rlimits, Landlock, seccomp synchronised to every thread (boot.py runs them, then the
  program);
- tripwire.py (the child, once jax has started): an audit hook that ends the process at the
  first forbidden action.

Importing this package imports only the standard library: boot.py must put the walls up
before anything starts a thread.
"""

from pallasbench_dataset.evaluation.sandbox.launch import (
    OUTPUT_CAP, SandboxedProcess, SandboxRun, remove_orphaned_scratch, run_sandboxed,
    start_sandboxed)
from pallasbench_dataset.evaluation.sandbox.tripwire import arm
from pallasbench_dataset.evaluation.sandbox.walls import (
    ALL_WALLS, REPORT_FD_ENV, RESULT_FD_ENV, SANDBOX_EXIT, UNAVAILABLE_EXIT, WallsUnavailable,
    die_with_parent)

__all__ = ["ALL_WALLS", "OUTPUT_CAP", "REPORT_FD_ENV", "RESULT_FD_ENV", "SANDBOX_EXIT",
           "UNAVAILABLE_EXIT", "SandboxRun", "SandboxedProcess", "WallsUnavailable", "arm",
           "die_with_parent", "remove_orphaned_scratch", "run_sandboxed", "start_sandboxed"]
