"""Red team round 15: every string of a record is text (encodable as UTF-8), whatever the
candidate raised or printed. The judge's own run of tests/controls/adv_surrogate_error_relu.py,
whose import raises an exception holding a lone surrogate (docs/red-team/round15.md)."""

import dataclasses

import pytest

from pallasbench_dataset.evaluate import evaluate, summary_text
from pallasbench_dataset.schema import ErrorType, Status, to_json_dict

from tests.paths import CONTROLS


def _strings(value):
  """Every string of a record as the judge built it (not as `to_json_dict` writes it: that
  makes strings text too, and would hide a record that is not)."""
  if isinstance(value, str):
    yield value
  elif dataclasses.is_dataclass(value):
    for field in dataclasses.fields(value):
      yield from _strings(getattr(value, field.name))
  elif isinstance(value, (list, tuple)):
    for v in value:
      yield from _strings(v)


@pytest.fixture(scope="module")
def record():
  return evaluate("relu", CONTROLS / "adv_surrogate_error_relu.py", device="cpu")


def test_a_candidate_s_exception_leaves_a_record_of_text(record):
  assert record.status is Status.ERROR and record.error_type is ErrorType.LOAD
  assert "\\ud800" in record.error  # the character's escape, readable
  bad = [s for s in _strings(record) if not _encodes(s)]
  assert not bad, bad
  assert _encodes(summary_text(record))  # what the evaluator prints without --json


def test_a_record_written_as_json_is_text_whatever_it_holds(record):
  """The second line: a record holding a lone surrogate however it got one (an older run's
  records.jsonl, read back) is written as text, the character as its escape."""
  held = dataclasses.replace(record, reasons=("bad \ud800 here",))
  assert to_json_dict(held)["reasons"] == ["bad \\ud800 here"]


def _encodes(text: str) -> bool:
  try:
    text.encode("utf-8")
  except UnicodeEncodeError:
    return False
  return True
