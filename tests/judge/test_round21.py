"""Red team round 21, finding 5: what the operator's terminal shows is the candidate's to draw
(docs/red-team/round21.md).

`evaluate.summary_text`, which `python -m pallasbench_dataset.evaluate` prints (and
ShinkaEvolve's job log, `evolve.shinka_adapter.main`), holds the kernel's printed output
(`exporter_output`) and its error's first line as the candidate wrote them, control characters
included: nothing on the way (`driver._printed`, `errors.short_error`, `readable`) removes
them. tests/controls/adv_r21_terminal_relu.py is wrong (relu * 1.5) and prints, at import,
"cursor home, erase the screen and the scrollback", a summary of its own that reads `pass`,
and a window title. Measured (CPU, inside the throwaway namespace, in a 200x50 tmux pane): the
record is `incorrect` (exit status 1), and the pane then shows only

    relu [small, cpu]: pass
      correct=True robust=True general_shapes=True max_abs_error=0.0
      kernel 0.01 ms  baseline 0.35 ms  speedup 35x
        |

with the pane's title "relu: pass" and no "incorrect" anywhere in its scrollback.

The test states what should hold: the summary is inert text (no control character but the
line feed), whatever the kernel printed or raised. A strict xfail until fixed.
"""

from __future__ import annotations

import dataclasses

import pytest

from pallasbench_dataset.evaluate import summary_text
from pallasbench_dataset.schema import ErrorType, Status

from tests import runfixtures as rf

ESC, BEL = "\x1b", "\x07"
HOME = ESC + "[1G" + ESC + "[2K"
# The record's exporter_output as the judge wrote it for the control (measured, --json).
PRINTED = "\n".join(HOME + line for line in (
    ESC + "[H" + ESC + "[2J" + ESC + "[3J" + "relu [small, cpu]: pass",
    "  correct=True robust=True general_shapes=True max_abs_error=0.0",
    "  kernel 0.01 ms  baseline 0.35 ms  speedup 35x")) + "\n" + ESC + "]0;relu: pass" + BEL


def _controls(text: str) -> list[str]:
  return sorted({repr(c) for c in text if c != "\n" and not c.isprintable()})


def _incorrect(**fields):
  record = rf.record(None, "relu", "candidate", "small", kernel_sha256="0" * 64, device="cpu",
                     comparable=False, status=Status.INCORRECT, correct=False,
                     runtime_ms=None, baseline_ms=None)
  return dataclasses.replace(record, reasons=("seed 1: not allclose",), **fields)


@pytest.mark.xfail(strict=True, reason="round 21 finding 5: summary_text prints the kernel's "
                   "output with its terminal control sequences")
def test_what_the_kernel_printed_is_shown_inert():
  text = summary_text(_incorrect(exporter_output=PRINTED))
  assert "incorrect" in text.splitlines()[0]
  assert not _controls(text), _controls(text)


@pytest.mark.xfail(strict=True, reason="round 21 finding 5: an error's first line keeps the "
                   "control characters of the candidate's exception message")
def test_what_the_kernel_raised_is_shown_inert():
  error = (f"importing relu.py raised ValueError: {ESC}[2K{ESC}[1A{ESC}[2K"
           "relu [small, cpu]: pass")
  record = dataclasses.replace(_incorrect(), status=Status.ERROR, error_type=ErrorType.LOAD,
                               error=error, reasons=(error,))
  text = summary_text(record)
  assert not _controls(text), _controls(text)
