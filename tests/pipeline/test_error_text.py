"""Readable error text: what a record's `error` says when a compiler or a lowering rule fails."""

import pytest

from pallasbench_dataset.evaluation.errors import MAX_ERROR_CHARS, classify, readable, short_error
from pallasbench_dataset.schema import ErrorType


def _raised_in(filename: str, source: str) -> BaseException:
  """The exception `source` raises when run as if it were the file `filename`."""
  try:
    exec(compile(source, filename, "exec"), {})  # pylint: disable=exec-used
  except Exception as e:  # pylint: disable=broad-except
    return e
  raise AssertionError("nothing was raised")


def test_escaped_byte_runs_become_markers():
  context = " in the module that failed to parse, at its third operation"
  assert readable(r"bad op \x01\x02\x03\x04" + context) == "bad op <bytes>" + context
  three = r"three \x01\x02\x03" + context
  assert readable(three) == three  # a run under 4 escapes is kept
  mostly = "ab" + r"\x00" * 2   # 8 of 10 characters are escapes
  assert readable(mostly) == "<serialised IR bytes>"


def test_the_ir_marker_starts_at_a_quarter_of_the_text():
  quarter = r"\x00" + "a" * 12   # exactly 4 of 16 characters
  assert readable(quarter) == "<serialised IR bytes>"
  below = r"\x00" + "a" * 13     # 4 of 17
  assert readable(below) == below
  assert readable("") == ""


def test_short_error_keeps_the_head_the_error_lines_and_the_tail():
  lines = ["RuntimeError: compile failed"] + [f"  at pass {i}" for i in range(40)]
  lines[7] = "file.py:3: error: Maximum allowed number of elements is 1048576"
  lines[9] = "file.py:5: error: second"
  text = short_error("\n".join(lines))
  assert text.splitlines() == (
      ["RuntimeError: compile failed", "file.py:3: error: Maximum allowed number of elements is 1048576",
       "file.py:5: error: second", "..."] + [f"at pass {i}" for i in range(30, 40)])


def test_short_error_drops_ir_lines_dedups_and_caps():
  text = short_error("ValueError: x\n" + r"\x00\x01\x02\x03\x04" + "\nValueError: x\nend")
  assert text == "ValueError: x\nend"
  assert short_error(r"\x00\x01\x02\x03") == r"\x00\x01\x02\x03"  # nothing else: the text itself
  assert len(short_error("E: " + "y" * (2 * MAX_ERROR_CHARS))) == MAX_ERROR_CHARS


def test_a_bare_assert_names_the_innermost_frame_from_the_package_root():
  e = _raised_in("/opt/venv/lib/site-packages/jax/_src/pallas/triton/lowering.py",
                 "def rule():\n  raise AssertionError\nrule()\n")
  assert short_error(e) == ("AssertionError: raised at jax/_src/pallas/triton/lowering.py:2 "
                            "in rule")  # no source line: the file does not exist here
  kernel = _raised_in("/tmp/x/kernels_tpu/relu.py", "raise AssertionError()\n")
  assert short_error(kernel) == "AssertionError: raised at kernels_tpu/relu.py:1 in <module>"
  other = _raised_in("/a/b/c/d.py", "raise KeyError()\n")
  assert short_error(other) == "KeyError: raised at c/d.py:1 in <module>"
  assert short_error(_raised_in("/a/b/c/d.py", "raise KeyError('k')\n")) == "KeyError: 'k'"
  assert short_error(AssertionError()) == "AssertionError:"  # never raised: no frame


@pytest.mark.parametrize("text, stage, kind", [
    ("RESOURCE_EXHAUSTED: Out of memory allocating 9 GiB", "run", ErrorType.OUT_OF_MEMORY),
    ("RESOURCE_EXHAUSTED: Out of memory while compiling", "compile", ErrorType.OUT_OF_MEMORY),
    (MemoryError("Unable to allocate 8.00 GiB"), "run", ErrorType.OUT_OF_MEMORY),
    ("RESOURCE_EXHAUSTED: Shared memory size limit exceeded", "compile", ErrorType.COMPILE),
    # The candidate's words decide nothing: at the exporter's stages the text is its own, and
    # at the judge's a message may quote the kernel's names past its status code.
    ("importing k.py raised RuntimeError: RESOURCE_EXHAUSTED: out of memory", "load",
     ErrorType.LOAD),
    ("RESOURCE_EXHAUSTED: out of memory", "trace", ErrorType.TRACE),
    ("cuda out of memory", "lowering", ErrorType.LOWERING),
    ("importing k.py raised MemoryError: ", "load", ErrorType.LOAD),
    ("INTERNAL: kernel 'RESOURCE_EXHAUSTED out of memory' failed to launch", "run",
     ErrorType.RUNTIME),
    ("INTERNAL: Triton: out of memory in 'k'", "compile", ErrorType.COMPILE),
    ("MemoryError", "run", ErrorType.RUNTIME),
    ("SyntaxError", "load", ErrorType.LOAD), ("ValueError", "trace", ErrorType.TRACE),
    ("x", "lowering", ErrorType.LOWERING), ("x", "run", ErrorType.RUNTIME)])
def test_classify(text, stage, kind):
  assert classify(text, stage) is kind


def test_the_path_starts_at_the_first_package_root_of_any_depth():
  for root in ("jaxlib", "pallasbench_dataset", "kernels_gpu"):
    e = _raised_in(f"/venv/lib/{root}/a/b/mod.py", "raise AssertionError\n")
    assert short_error(e) == f"AssertionError: raised at {root}/a/b/mod.py:1 in <module>"
  shallow = _raised_in("mod.py", "raise AssertionError\n")
  assert short_error(shallow) == "AssertionError: raised at mod.py:1 in <module>"


@pytest.mark.parametrize("count, shortened", [(25, False), (26, True)])
def test_errors_are_shortened_only_past_25_lines(count, shortened):
  lines = [f"line {i}" for i in range(count)]
  assert ("..." in short_error("\n".join(lines)).splitlines()) is shortened


def test_at_most_five_error_lines_survive_the_cut():
  lines = ["E: head"] + [f"x: error: {i}" for i in range(8)] + [f"tail {i}" for i in range(30)]
  kept = short_error("\n".join(lines)).splitlines()
  assert kept[:7] == ["E: head"] + [f"x: error: {i}" for i in range(5)] + ["..."]
  only = ["x: error: first"] + [f"t {i}" for i in range(30)]
  assert short_error("\n".join(only)).splitlines()[:2] == ["x: error: first", "..."]  # head once
