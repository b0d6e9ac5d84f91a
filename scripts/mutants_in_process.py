"""Mutation testing in one pytest process: mutmut 3 only generates the mutants, and this runs
them. mutmut's own runner forks a process per mutant and maps tests to mutants by a stats run;
on two shared cores with a JAX import per process that is hours, and tests that reach the code
in child processes are marked untested. Here the tests are collected once, the clean code must
pass every one of them, then for each mutant `MUTANT_UNDER_TEST` is switched (mutmut 3's
trampolines read it at call time, and child processes inherit it) and the tests run again,
fastest first, stopping at the first failure: killed. A test over --mutant-timeout seconds is a
kill too (timeout), and so is a mutant that crashes the process (crashed: a run started again
records it and goes on with the next mutant, skipping those already in --mutants-out). One
JSON line per mutant: {"mutant", "outcome", "seconds", "test"}.

Two steps, each inside a throwaway mount and PID namespace (a mutant can do anything the code
it mutates can; never run them as root on the host). From the checkout (setup.cfg's [mutmut]
section says what is mutated and copied):

  rm -rf mutants; mkdir mutants
  unshare --mount --propagation private --pid --fork --mount-proc env PYTHONPATH=$PWD/mutants \
    nice -n 15 .venv/bin/python scripts/mutants_in_process.py generate
  .venv/bin/python scripts/mutants_in_process.py list \
    'pallasbench_dataset.evaluation.judge.timing.x__round__mutmut_*' ... > names.txt
  cd mutants; while unshare --mount --propagation private --pid --fork --mount-proc \
    env PYTHONPATH=$PWD:$OLDPWD/scripts nice -n 15 ../.venv/bin/python -m pytest -q \
    -p mutants_in_process -p no:randomly -p no:xdist -p no:cacheprovider \
    --mutants ../names.txt --mutants-out ../out.jsonl --mutant-timeout 60 <tests>
    [ $? -ge 128 ]; do :; done   # again only after a crash (a clean run that fails ends it)

`list` takes fnmatch patterns over mutmut's mutant names (`module.x_function__mutmut_N`,
`module.xǁClassǁmethod__mutmut_N`), read from the .meta files `generate` wrote. `show NAME`
prints a mutant's diff (mutmut's own). Tests added after `generate` are copied into
mutants/tests by hand.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import pathlib
import signal
import sys
import time

ENV = "MUTANT_UNDER_TEST"


# --- the generate step (run in the checkout) ---

def generate() -> None:
  """mutmut's mutant creation alone: the source tree copied into mutants/, then every function
  of `only_mutate`'s files mutated there. No stats run, no test run."""
  from mutmut.__main__ import create_mutants  # pylint: disable=import-outside-toplevel
  from mutmut.mutation.trampoline import set_mutant_under_test  # pylint: disable=import-outside-toplevel
  from mutmut.utils.file_utils import (copy_also_copy_files, copy_src_dir,  # pylint: disable=import-outside-toplevel
                                       setup_source_paths)
  set_mutant_under_test("mutant_generation")
  copy_src_dir()
  copy_also_copy_files()
  setup_source_paths()
  stats = create_mutants(1)
  print(f"{stats.mutated} files mutated, {stats.ignored} copied", file=sys.stderr)


def mutant_names(root: pathlib.Path, patterns: list[str]) -> list[str]:
  """The names of the mutants under root (mutants/) that match any of `patterns`, sorted."""
  names = set()
  for meta in root.rglob("*.meta"):
    for name in json.loads(meta.read_text()).get("exit_code_by_key", {}):
      if any(fnmatch.fnmatchcase(name, p) for p in patterns):
        names.add(name)
  return sorted(names, key=lambda n: (n.rpartition("__mutmut_")[0],
                                      int(n.rpartition("__mutmut_")[2])))


# --- the pytest plugin (run in mutants/) ---

class _Timeout(BaseException):  # not an Exception: code under test catching those must not hide it
  pass


def pytest_addoption(parser) -> None:
  group = parser.getgroup("mutants_in_process")
  group.addoption("--mutants", type=pathlib.Path, help="a file of mutant names, one a line")
  group.addoption("--mutants-out", type=pathlib.Path, help="JSON lines out, appended to")
  group.addoption("--mutant-timeout", type=float, default=60.0,
                  help="seconds a test may run before its mutant counts as killed")


def _run_one(item, nextitem, timeout_s: float) -> tuple[bool, float]:
  """(passed, seconds) of one test, run with pytest's own protocol, unlogged. SIGALRM ends a
  test past `timeout_s` (at its next Python bytecode)."""
  from _pytest.runner import runtestprotocol  # pylint: disable=import-outside-toplevel

  def expire(signum, frame):
    raise _Timeout(f"over {timeout_s} s")
  old = signal.signal(signal.SIGALRM, expire)
  signal.setitimer(signal.ITIMER_REAL, timeout_s)
  start = time.monotonic()
  try:
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    passed = not any(r.failed for r in reports)
  except _Timeout:
    passed = False
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)
  seconds = time.monotonic() - start
  return passed and seconds <= timeout_s, seconds


def _run_all(items, timeout_s: float, stop_at_failure: bool):
  """Runs `items` in order; (the failed items, seconds per item). Every fixture is torn down at
  the end (nextitem None), so nothing computed under one mutant is kept for the next."""
  seconds, failed = {}, []
  for k, item in enumerate(items):
    last = k + 1 == len(items)
    passed, seconds[item.nodeid] = _run_one(item, None if last else items[k + 1], timeout_s)
    if not passed:
      failed.append(item)
      if stop_at_failure:
        if not last:
          item.session._setupstate.teardown_exact(None)  # pylint: disable=protected-access
        break
  return failed, seconds


def pytest_runtestloop(session):
  config = session.config
  names_file = config.getoption("--mutants")
  if names_file is None or session.testsfailed or config.option.collectonly:
    return None
  out_file, timeout_s = config.getoption("--mutants-out"), config.getoption("--mutant-timeout")
  names = [n.strip() for n in names_file.read_text().splitlines() if n.strip()]
  names = _left_to_run(names, out_file)
  if not names:
    return True
  items = list(session.items)
  os.environ[ENV] = ""
  start = time.monotonic()
  failures, seconds = _run_all(items, timeout_s, stop_at_failure=False)
  print(f"\nclean run: {len(items)} tests in {time.monotonic() - start:.1f} s", file=sys.stderr)
  if failures:
    raise session.Failed(f"the clean code fails {[i.nodeid for i in failures]}")
  items.sort(key=lambda i: seconds[i.nodeid])
  with open(out_file, "a", encoding="utf-8") as out:
    for n, name in enumerate(names):
      _started(out_file).write_text(name)
      os.environ[ENV] = name
      start = time.monotonic()
      killers, times = _run_all(items, timeout_s, stop_at_failure=True)
      killer = killers[0] if killers else None
      os.environ[ENV] = ""
      outcome = "survived" if killer is None else (
          "timeout" if times[killer.nodeid] > timeout_s else "killed")
      line = {"mutant": name, "outcome": outcome,
              "seconds": round(time.monotonic() - start, 1),
              "test": killer.nodeid if killer is not None else None}
      out.write(json.dumps(line, ensure_ascii=False) + "\n")
      out.flush()
      print(f"[{n + 1}/{len(names)}] {name} {outcome} {line['seconds']} s", file=sys.stderr)
  _started(out_file).unlink(missing_ok=True)
  return True


def _started(out_file: pathlib.Path) -> pathlib.Path:
  """Where the mutant under test is named while it runs."""
  return out_file.with_name(out_file.name + ".running")


def _left_to_run(names: list[str], out_file: pathlib.Path) -> list[str]:
  """The names with no line in `out_file` yet. A mutant that was running when the process died
  (a segmentation fault in the MLIR bindings, say) is recorded as killed ("crashed"): run
  again (the `while` loop in the docstring), the plugin goes on with the next one."""
  done = set()
  if out_file.exists():
    done = {json.loads(line)["mutant"] for line in out_file.read_text().splitlines() if line}
  running = _started(out_file)
  if running.exists() and running.read_text() not in done:
    with open(out_file, "a", encoding="utf-8") as out:
      out.write(json.dumps({"mutant": running.read_text(), "outcome": "crashed", "seconds": None,
                            "test": None}, ensure_ascii=False) + "\n")
    done.add(running.read_text())
  running.unlink(missing_ok=True)
  return [n for n in names if n not in done]


# --- the command line ---

def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  sub = parser.add_subparsers(dest="command", required=True)
  sub.add_parser("generate", help="mutmut's mutants of setup.cfg's only_mutate, into mutants/")
  listing = sub.add_parser("list", help="the mutant names that match any of the patterns")
  listing.add_argument("patterns", nargs="+")
  listing.add_argument("--root", type=pathlib.Path, default=pathlib.Path("mutants"))
  show = sub.add_parser("show", help="a mutant's diff against the original")
  show.add_argument("name")
  args = parser.parse_args(argv)
  if args.command == "generate":
    generate()
  elif args.command == "list":
    print("\n".join(mutant_names(args.root, args.patterns)))
  else:
    from mutmut.mutation.diff_apply import get_diff_for_mutant  # pylint: disable=import-outside-toplevel
    print(get_diff_for_mutant(args.name))
  return 0


if __name__ == "__main__":
  sys.exit(main())
