"""A Dask Nanny in a program of its own: one worker of the local cluster (`cluster.NannyProgram`).

    python -m pallasbench_dataset.evaluation.pipeline.nanny SPEC_JSON

SPEC_JSON holds the scheduler's address, the Nanny's options and the Dask settings it needs.
The Nanny starts its worker process from this program, whose main module is this one (run
with -m, it is re-imported by name, harmlessly): the caller's script or notebook is never run
again in a worker, so it needs no `if __name__ == "__main__":` guard.

The program prints its worker's address once the worker has joined the scheduler, ignores
Ctrl-C (the driver answers it and closes the cluster), logs only errors, and ends, closing
its worker, when the scheduler closes it or its standard input closes (the driver closed the
cluster, or died).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence

import dask
import distributed


async def _serve(spec: dict) -> None:
  loop = asyncio.get_running_loop()
  stdin = asyncio.StreamReader()
  await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
  async with distributed.Nanny(spec["scheduler"], **spec["options"]) as nanny:
    print(nanny.worker_address, flush=True)
    closed = asyncio.ensure_future(nanny.finished())
    driver_gone = asyncio.ensure_future(stdin.read())
    await asyncio.wait([closed, driver_gone], return_when=asyncio.FIRST_COMPLETED)
    for waiting in (closed, driver_gone):
      waiting.cancel()


def main(argv: Sequence[str] | None = None) -> int:
  (text,) = sys.argv[1:] if argv is None else argv
  spec = json.loads(text)
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the worker process
  # The driver reports what happened to each evaluation in its records; a Nanny's warnings are
  # about stopping or restarting its worker (on Ctrl-C: "still alive after 4 s, killing").
  logging.getLogger("distributed").setLevel(logging.ERROR)
  with dask.config.set(spec["config"]):
    asyncio.run(_serve(spec))
  return 0


if __name__ == "__main__":
  sys.exit(main())
