"""The module analysis in a process of its own, where hostile bytes cannot take the judge down.

    python -m pallasbench_dataset.evaluation.judge.analysis_process --fd N   (behind the walls)

An artifact's module is the candidate's bytes. MLIR's C++ reader, printer and parser recurse
over its nesting, and a module built for it overflows their stack (a SIGSEGV, which no Python
code can catch). So the judge never reads a module itself: it sends the serialized module to
this helper, which deserializes it, prints it, checks its nesting, parses and analyses it
(`module_analysis.analyze_module`), and answers with the report and the text, as JSON (never
a pickle: a helper subverted by what it parsed must not run code in the judge).

Native code parses the attacker's bytes here, so the helper is started behind the exporter's
walls (`sandbox.start_sandboxed`, the walls up before its first line): user nobody, no file
written and only the interpreter's and the system's files read (Landlock), no process,
socket or signal to another process (seccomp), resource limits, killed when the judge dies.
An exploit of the parser lands in a process that can do nothing but answer. Where the walls
cannot be put up the helper does not run and the judge analyses nothing
(`sandbox.WallsUnavailable`, an error of the judge, never a module parsed unwalled).

The judge kills the helper when it dies, runs out of time or outgrows its memory; the
artifact is then refused with a `ModuleAnalysisError` saying which, and naming it in
`ended_by` (crash, timeout, out_of_memory): a `rejected` verdict the cache never keeps, since
a neighbour can decide it (red team round 15: a candidate holding every task slot of the
sandboxed user made LLVM abort in the helper parsing an honest module). A verdict is a function of the item's own bytes: after
each item the judge retires the helper that read them (`ModuleAnalyser.fresh`), so the next
item's modules go to a helper no other candidate touched, neither the memory an earlier
analysis grew it to (red team round 13: a refused 12 MB module left a helper at 815 MiB, and
the next artifact was refused as outgrowing it) nor whatever an exploit of the parser planted.
The shipped kernels the copy check compares with are read by a helper of their own (`trusted`),
never given a candidate's bytes.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import hashlib
import json
import logging
import socket
import sys
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Final

from pallasbench_dataset.evaluation import sandbox
from pallasbench_dataset.evaluation.judge import budgets, mlir_context
from pallasbench_dataset.evaluation.judge.children import death_message, process_rss_bytes
from pallasbench_dataset.evaluation.judge.module_analysis import (
    AnalysisLimits, KernelCall, ModuleAnalysisError, ModuleReport, analyze_module)
from pallasbench_dataset.schema import ErrorType, textual

logger = logging.getLogger(__name__)

# An honest module is analysed in well under a second; the op budget ends any analysis in
# seconds. What runs longer is the C++ reader or parser stuck on the bytes.
ANALYSIS_TIMEOUT_S: Final = budgets.ANALYSIS_RUN_S
STARTUP_TIMEOUT_S: Final = budgets.ANALYSIS_STARTUP_S
MEMORY_BYTES: Final = 4 << 30
POLL_S: Final = 0.05
REMEMBERED: Final = 4  # answers kept: on a GPU the analysed artifact is also the one compiled
_PROGRAM: Final = (sys.executable, "-m", "pallasbench_dataset.evaluation.judge.analysis_process")


def _report_json(report: ModuleReport, text: str) -> bytes:
  return json.dumps({"report": dataclasses.asdict(report), "text": text}).encode()


def _report_from_json(data: dict[str, Any]) -> ModuleReport:
  fields = dict(data)
  fields["kernels"] = tuple(
      KernelCall(**{**k, "grid": tuple(k["grid"])}) for k in fields["kernels"])
  for name in ("unknown_ops", "disallowed_custom_calls", "stateful_ops"):
    fields[name] = tuple(fields[name])
  for name in ("top_ops", "top_byte_ops"):
    fields[name] = tuple((op, cost) for op, cost in fields[name])
  return ModuleReport(**fields)


def _answer(request: bytes) -> bytes:
  """One request: the limits as a JSON line, then the serialized module."""
  header, _, serialized = request.partition(b"\n")
  limits = AnalysisLimits(**json.loads(header))
  try:
    text = mlir_context.module_text(serialized)
  except Exception as e:  # hostile bytes may fail in any way
    return json.dumps({"refused": f"the module does not deserialize: {e}"}).encode()
  try:
    return _report_json(analyze_module(text, limits=limits), text)
  except ModuleAnalysisError as e:
    return json.dumps({"refused": str(e)}).encode()


def serve(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog=" ".join(_PROGRAM[1:]))
  p.add_argument("--fd", type=int, required=True)
  args = p.parse_args(argv)
  conn = Connection(args.fd)
  conn.send_bytes(b"ready")
  while True:
    try:
      request = conn.recv_bytes()
    except EOFError:
      return 0
    conn.send_bytes(_answer(request))


class ModuleAnalyser:
  """The judge's side: one helper process, started on first use, after every failure and
  after each item that gave it a module (`fresh`)."""

  def __init__(self, limits: AnalysisLimits = AnalysisLimits(), *,
               timeout_s: float = ANALYSIS_TIMEOUT_S, memory_bytes: int = MEMORY_BYTES):
    self.limits, self._timeout_s, self._memory_bytes = limits, timeout_s, memory_bytes
    self._child: sandbox.SandboxedProcess | None = None
    self._conn: Connection | None = None
    self._ready = False   # the helper said "ready" (its imports done)
    self._served = False  # the helper was given a module
    self._answers: collections.OrderedDict[str, bytes] = collections.OrderedDict()
    self.layers: tuple[str, ...] = ()  # the walls the current (or last) helper reported up

  def fresh(self) -> None:
    """Forgets every answer and retires a helper that was given a module: the next module goes
    to a helper no earlier one touched. Its replacement starts now and imports while the
    judge does other work; one that cannot start is started again, and its failure raised,
    at the next module."""
    self._answers.clear()
    if not self._served:
      return
    self.close()
    try:
      self._spawn()
    except Exception:  # pylint: disable=broad-except
      logger.debug("the next analysis helper did not start yet", exc_info=True)
      self.close()

  def analyse(self, serialized: bytes) -> tuple[ModuleReport, str]:
    """The report on a serialized module (`Exported.mlir_module_serialized`) and its text;
    ModuleAnalysisError when it is refused, or when it killed or exhausted the helper;
    sandbox.WallsUnavailable when no helper can run behind its walls here."""
    request = json.dumps(dataclasses.asdict(self.limits)).encode() + b"\n" + serialized
    key = hashlib.sha256(request).hexdigest()
    answer = self._answers.pop(key, None) or self._exchange(request)
    self._answers[key] = answer
    while len(self._answers) > REMEMBERED:
      self._answers.popitem(last=False)
    try:
      data = textual(json.loads(answer))  # the walled helper's strings, made text here
      refused = data.get("refused")
      found = None if refused is not None else (_report_from_json(data["report"]), str(data["text"]))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
      self.close()
      raise ModuleAnalysisError(f"the analysis process gave no usable answer ({e})") from None
    if found is None:
      raise ModuleAnalysisError(str(refused))
    return found

  def _exchange(self, request: bytes) -> bytes:
    if self._child is None or self._child.process.poll() is not None:
      self._spawn()
    if not self._ready:
      self._await_ready()
    self._served = True
    self._conn.send_bytes(request)
    answer, failure = self._wait("analysing the module", self._timeout_s)
    if failure is not None:
      self.close()
      raise ModuleAnalysisError(f"{failure[0]}: the artifact's module cannot be read safely",
                                failure[1])
    return answer

  def _spawn(self) -> None:
    """Starts a helper behind its walls; it says "ready" once its imports are done."""
    self.close()
    parent_sock, child_sock = socket.socketpair()
    try:
      self._child = sandbox.start_sandboxed(
          [*_PROGRAM, "--fd", str(child_sock.fileno())], memory_bytes=self._memory_bytes,
          pass_fds=(child_sock.fileno(),))
    except BaseException:
      parent_sock.close()
      raise
    finally:
      child_sock.close()
    self._conn = Connection(parent_sock.detach())

  def _await_ready(self) -> None:
    answer, failure = self._wait("starting", STARTUP_TIMEOUT_S)
    self.layers, unavailable = self._child.walls()
    if answer != b"ready":
      self.close()
      if unavailable is not None:
        raise sandbox.WallsUnavailable(f"the module analysis process: {unavailable}")
      # no artifact's fault: the judge cannot judge
      said = failure[0] if failure is not None else f"it said {answer!r} instead of b'ready'"
      raise RuntimeError(f"the module analysis process did not start: {said}")
    self._ready = True

  def _wait(self, doing: str, timeout_s: float
            ) -> tuple[bytes | None, tuple[str, ErrorType] | None]:
    """The helper's next message, or why there is none and which limit or signal ended it:
    it died, ran past `timeout_s` or outgrew its memory first."""
    deadline = time.monotonic() + timeout_s
    proc = self._child.process
    while True:
      try:
        if self._conn.poll(POLL_S):
          return self._conn.recv_bytes(), None
      except (EOFError, OSError):
        pass  # it died: the closed socket reads as readable
      if proc.poll() is not None:
        return None, (f"{death_message(proc.returncode, 'the module analysis process')} "
                      f"while {doing}", ErrorType.CRASH)
      if time.monotonic() > deadline:
        return None, (f"the module analysis took longer than {timeout_s:g} s while {doing}",
                      ErrorType.TIMEOUT)
      if (rss := process_rss_bytes(proc.pid)) > self._memory_bytes:
        return None, (f"the module analysis outgrew {self._memory_bytes / 2**30:.1f} GiB "
                      f"({rss / 2**30:.1f} GiB) while {doing}", ErrorType.OUT_OF_MEMORY)

  def close(self) -> None:
    if self._conn is not None:
      self._conn.close()
      self._conn = None
    if self._child is not None:
      self._child.close()
      self._child = None
    self._ready = self._served = False


@functools.cache
def shared() -> ModuleAnalyser:
  """This process' analyser of candidates' modules: a fresh helper for each item."""
  return ModuleAnalyser()


@functools.cache
def trusted() -> ModuleAnalyser:
  """This process' analyser of the shipped kernels' modules (the copy check): a helper of its
  own, never given a candidate's bytes, so what one candidate's module did to a helper cannot
  change what the shipped kernels are compared as."""
  return ModuleAnalyser()


if __name__ == "__main__":
  sys.exit(serve())
