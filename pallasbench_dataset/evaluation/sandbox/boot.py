"""The first code of every sandboxed child: the walls, then the program.

    python -m pallasbench_dataset.evaluation.sandbox.boot (-m MODULE | -c CODE) [ARGS...]

Started by launch.run_sandboxed, which passes the walls' configuration in the environment.
Only the standard library has run when confine() puts the walls up (importing this package
imports nothing else), so the process still has one thread: every thread it starts later
inherits them. Then the program runs as `__main__`, as `python -m MODULE` or `python -c CODE`
would run it.
"""

from __future__ import annotations

import os
import runpy
import sys

from pallasbench_dataset.evaluation.sandbox import walls


def main() -> None:
  report_fd = int(os.environ[walls.REPORT_FD_ENV])
  try:
    config = walls.WallsConfig.from_json(os.environ.pop(walls.CONFIG_ENV))
    layers = walls.confine(config)
  except walls.WallsUnavailable as e:
    os.write(report_fd, f"unavailable {e}\n".encode("utf-8", "replace")[:1000])
    os._exit(walls.UNAVAILABLE_EXIT)
  os.write(report_fd, f"layers {','.join(layers)}\n".encode())
  mode, target, *rest = sys.argv[1:]
  if mode == "-m":
    sys.argv = [target, *rest]
    runpy.run_module(target, run_name="__main__", alter_sys=True)
  elif mode == "-c":
    sys.argv = ["-c", *rest]
    exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})  # pylint: disable=exec-used
  else:
    raise SystemExit(f"boot: expected -m MODULE or -c CODE, got {mode!r}")


if __name__ == "__main__":
  main()
