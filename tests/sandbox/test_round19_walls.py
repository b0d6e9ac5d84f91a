"""Red team round 19, finding 1, through the real sandbox (docs/red-team/round19.md).

The host's own limits end an honest exporter before any candidate code runs, and
`driver.export` typed that ending `exited` ("the kernel's program ended it"): an `error` that
the reward's cache stored as the text's verdict. Closed (session 33): every death of the
exporter is a `crash`, judged again alone by the reward's cache. Here the host's RLIMIT_NPROC hard limit (a
`ulimit -u`, limits.conf's nproc; a container's pids.max fails thread creation the same way)
is low: `walls.own_tasks` keeps a limit under the hard one, XLA:CPU's client cannot start its
threads in `jax.devices()`, and the exporter aborts before the tripwire is armed.

Run it only inside a throwaway namespace (unshare --mount --propagation private --pid --fork
--mount-proc --ipc), like every test that starts the sandbox as root.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from tests.paths import REPO

ROOT = os.geteuid() == 0
LINUX = sys.platform == "linux" and os.uname().machine in ("x86_64", "aarch64")

_EXPORT = """
import json
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.pipeline import driver
from pallasbench_dataset.kernels import read_source
source, filename = read_source("kernels_tpu/relu.py")
item = driver.WorkItem(task="relu", variant="candidate", size="small", source=source,
                       filename=filename, options=EvalOptions(num_seeds=5), candidate="honest")
out = driver.export(item, "cpu", driver.Limits(timeout_s=120, memory_bytes=4 << 30))
print(json.dumps({"failure": out.failure, "message": out.message, "layers": list(out.layers)}))
"""


def _host_task_limit(tasks: int):
  def limit():  # in the driver's process: root, so the limit binds only its unprivileged child
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
  return limit


@pytest.mark.skipif(not (ROOT and LINUX), reason="the child leaves root for user nobody, whom "
                    "RLIMIT_NPROC binds (a root child ignores it)")
def test_an_honest_exporter_the_host_s_task_limit_aborted_is_no_verdict():
  run = subprocess.run([sys.executable, "-c", _EXPORT], cwd=REPO, capture_output=True,
                       text=True, timeout=300, preexec_fn=_host_task_limit(3), check=False)
  assert run.returncode == 0, run.stderr[-2000:]
  outcome = json.loads(run.stdout.strip().splitlines()[-1])
  # It dies in jax's start-up, before or just after the tripwire is armed (both were seen).
  assert outcome["failure"] == "crash", f"{outcome['failure']}: {outcome['message']!r}"


_EXPORT_CONTROL = """
import json, sys
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.pipeline import driver
from pallasbench_dataset.kernels import read_source
source, filename = read_source(sys.argv[1])
item = driver.WorkItem(task="relu", variant="candidate", size="small", source=source,
                       filename=filename, options=EvalOptions(num_seeds=5), candidate="c-1")
out = driver.export(item, "cpu", driver.Limits(timeout_s=120, memory_bytes=4 << 30))
print(json.dumps({"failure": out.failure, "message": out.message, "layers": list(out.layers)}))
"""


@pytest.mark.skipif(not LINUX, reason="the walls are Linux x86_64 and aarch64 only")
def test_a_kernel_that_sends_its_own_exporter_sigkill_gets_a_crash_like_any_death():
  """A signal says nothing of who sent it, either way (round 19): every death of the exporter
  is a `crash`, no verdict; the reward's cache judges it again alone and holds it where it
  recurs (tests/judge/test_cache_self_chosen.py)."""
  run = subprocess.run([sys.executable, "-c", _EXPORT_CONTROL,
                        "tests/controls/adv_r19_self_sigkill_relu.py"], cwd=REPO,
                       capture_output=True, text=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-2000:]
  outcome = json.loads(run.stdout.strip().splitlines()[-1])
  assert "tripwire" in outcome["layers"], outcome  # the candidate's code ran, armed
  assert outcome["failure"] == "crash", f"{outcome['failure']}: {outcome['message']!r}"
