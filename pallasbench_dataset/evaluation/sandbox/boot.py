"""The first code of every sandboxed child: the walls, then the program.

    python -m pallasbench_dataset.evaluation.sandbox.boot (-m MODULE | -c CODE) [ARGS...]

Started by launch.run_sandboxed, which passes the walls' configuration in the environment.
Only the standard library has run when confine() puts the walls up (importing this package
imports nothing else), so the process still has one thread: every thread it starts later
inherits them. Then the program runs as `__main__`, as `python -m MODULE` or `python -c CODE`
would run it.

The walls' report (the `layers` the parent records) goes on a descriptor of its own. Unless
the program arms the tripwire (`WallsConfig.tripwire`: it then adds `layers tripwire` and
closes the descriptor, before any candidate code), it is closed here, before the program's
first line: nothing the program runs can add a wall to the report.
"""

from __future__ import annotations

import os
import runpy
import sys

from pallasbench_dataset.evaluation.sandbox import walls


def main() -> None:
  layers_fd = int(os.environ.pop(walls.LAYERS_FD_ENV))
  try:
    config = walls.WallsConfig.from_json(os.environ.pop(walls.CONFIG_ENV))
    layers = walls.confine(config)
  except walls.WallsUnavailable as e:
    os.write(layers_fd, f"unavailable {e}\n".encode("utf-8", "replace")[:1000])
    os._exit(walls.UNAVAILABLE_EXIT)
  os.write(layers_fd, f"layers {','.join(layers)}\n".encode())
  if config.tripwire:
    os.environ[walls.LAYERS_FD_ENV] = str(layers_fd)
  else:
    os.close(layers_fd)
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
