"""Mutation testing of code that runs only in child processes (the sandbox's walls, put up in
the exporter's child): mutmut maps tests to functions by the calls it sees in the test process,
so it marks such mutants "no tests" (exit code 33) and never runs them. This takes a seeded
sample of those mutants from a finished `mutmut run` (mutants/ and its .meta files), applies each
to a fresh copy of the checkout (`mutmut apply`, in the copy), runs the child-process tests
named in TESTS against it (the children import the copy through PYTHONPATH), and writes one
JSON line per mutant: killed (the tests failed), survived, or timeout.

Run it inside a throwaway mount and PID namespace, never as root on the host (a mutant of the
walls can mount, unshare or chmod):
  unshare --mount --propagation private --pid --fork --mount-proc nice -n 15 \
    .venv/bin/python scripts/mutants_in_children.py --module \
    pallasbench_dataset/evaluation/sandbox/walls.py --sample 80 --tests TESTS.txt --out OUT.jsonl
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time

NO_TESTS = 33  # mutmut's exit code for a mutant no test reached


def untested_mutants(meta: pathlib.Path) -> list[str]:
  """The names of the mutants of one module that mutmut ran no test for, sorted."""
  codes = json.loads(meta.read_text())["exit_code_by_key"]
  return sorted(name for name, code in codes.items() if code == NO_TESTS)


def fresh_copy(checkout: pathlib.Path, mutants: pathlib.Path) -> pathlib.Path:
  """The checkout's committed tree and mutmut's mutants/ folder, in a new temporary folder."""
  copy = pathlib.Path(tempfile.mkdtemp(prefix="mutants-in-children-"))
  archive = subprocess.run(["git", "-C", str(checkout), "archive", "HEAD"], check=True,
                           capture_output=True).stdout
  subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
  shutil.copytree(mutants, copy / "mutants")
  return copy


def run_tests(copy: pathlib.Path, tests: list[str], timeout_s: float) -> tuple[str, str]:
  """("passed" or "failed" or "timeout", pytest's last line) for `tests` run in `copy`."""
  try:
    run = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                          *tests], cwd=copy, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy),
                                                  "JAX_PLATFORMS": "cpu"},
                         capture_output=True, timeout=timeout_s)
  except subprocess.TimeoutExpired:
    return "timeout", ""
  tail = run.stdout.decode(errors="replace").strip().splitlines()[-1:]
  return ("passed" if run.returncode == 0 else "failed"), (tail[0] if tail else "")


def judge_mutant(copy: pathlib.Path, module: str, name: str, tests: list[str],
                 timeout_s: float) -> dict:
  """Applies mutant `name` in `copy`, runs `tests` there, restores the module."""
  source = copy / module
  original = source.read_bytes()
  subprocess.run([sys.executable, "-m", "mutmut", "apply", name], cwd=copy, check=True,
                 capture_output=True)
  start = time.monotonic()
  try:
    result, tail = run_tests(copy, tests, timeout_s)
  finally:
    source.write_bytes(original)
  outcome = {"passed": "survived", "failed": "killed"}.get(result, result)
  return {"mutant": name, "outcome": outcome, "seconds": round(time.monotonic() - start, 1),
          "pytest": tail}


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--module", required=True, help="the mutated module, relative to the checkout")
  parser.add_argument("--tests", required=True, type=pathlib.Path,
                      help="a file of pytest node ids, whitespace separated")
  parser.add_argument("--out", required=True, type=pathlib.Path)
  parser.add_argument("--sample", type=int, default=80)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--timeout", type=float, default=300)
  parser.add_argument("--checkout", type=pathlib.Path, default=pathlib.Path.cwd())
  args = parser.parse_args(argv)
  mutants = args.checkout / "mutants"
  names = untested_mutants(mutants / f"{args.module}.meta")
  sample = sorted(random.Random(args.seed).sample(names, min(args.sample, len(names))))
  done = set()
  if args.out.exists():
    done = {json.loads(line)["mutant"] for line in args.out.read_text().splitlines() if line}
  tests = args.tests.read_text().split()
  copy = fresh_copy(args.checkout, mutants)
  try:
    result, tail = run_tests(copy, tests, args.timeout)
    if result != "passed":
      print(f"the tests do not pass on the unmutated copy ({result}: {tail})", file=sys.stderr)
      return 1
    for index, name in enumerate(sample, 1):
      if name in done:
        continue
      result = judge_mutant(copy, args.module, name, tests, args.timeout)
      with args.out.open("a") as out:
        out.write(json.dumps(result) + "\n")
      print(f"{index}/{len(sample)} {result['outcome']:8} {result['seconds']:6.1f} s {name}",
            flush=True)
  finally:
    shutil.rmtree(copy, ignore_errors=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
