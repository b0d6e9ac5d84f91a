"""Red team round 18: its findings, closed (docs/red-team/round18.md).

1. A failure's error type is read from evidence the candidate writes: its text
   (`errors.classify`: any "out of memory" makes it `out_of_memory`) and how its exporter ended
   (a compile() RecursionError escapes `load_module` and the exporter "crashes"). The verdict
   cache's exemption for the host's load (`verdicts.load_decided`: `ENDED_BY_A_LIMIT`) and
   `driver.has_verdict` (NO_VERDICT) then keep the candidate's own failure out of the cache:
   round 17's finding 1 (a reason's words claiming a stage's budget), closed for the reasons,
   is open again through the error type.
2. A kernel file that Python runs is not read as Python: `kernels.read_source` decodes UTF-8
   and keeps a byte order mark, and never reads a PEP 263 coding declaration, so an honest
   kernel saved with a BOM is an `error` ("syntax error ... U+FEFF") and one declared latin-1
   cannot be evaluated at all (a false positive: honest kernels in unusual styles must pass).
3. The reward judges a block the prompt does not name: the prompt says the last ```python block
   is judged (`evolve.prompt.ANSWER`), and `reward.extract_kernel` takes the last block tagged
   python *or untagged*, so an answer that follows the prompt and then shows what its kernel
   printed in an untagged block is judged on the printout: reward 0 for a correct kernel.

Each assertion states what should hold. They were strict xfails; all are closed (session 33):
`errors.classify` types the exporter's stages by their stage and the judge's own calls by a
MemoryError or XLA's status code alone; `load_module` turns every refusal of Python's compiler
into a KernelLoadError; an exporter that died stays a `crash` (round 19 showed the host ends
exporters too), which the reward's cache judges again alone and holds where it recurs;
`read_source` reads as Python does (UTF-8 only since round 19); `extract_kernel` takes the
last python-tagged block, an untagged one only where none is tagged.
"""

from __future__ import annotations

import dataclasses
import signal

import pytest

from pallasbench_dataset import kernels
from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluation.pipeline import driver, verdicts
from pallasbench_dataset.evolve import prompt
from pallasbench_dataset.schema import ErrorType, Status

from tests.judge import test_building_blocks as bb
from tests.paths import CONTROLS
# Fixtures of the modules whose stand-ins these tests use.
from tests.judge.test_building_blocks import analysis  # noqa: F401  pylint: disable=unused-import
from tests.judge.test_cache_attacks import (  # noqa: F401  pylint: disable=unused-import
    FRESH, Judge, _item, _record, _served, reward_cache)

OOM_WORDS = "adv_r18_oom_words_relu"


def _exporter_load_error(control: str) -> str:
  """The exporter's `load_error` for a control, as its program makes it (`load_module`'s
  KernelLoadError text; the control raises at import, nothing of jax runs)."""
  with pytest.raises(kernels.KernelLoadError) as e:
    kernels.load_module((CONTROLS / f"{control}.py").read_text(), f"{control}.py")
  return str(e.value)


def _failing_report(where: str):
  message = _exporter_load_error(OOM_WORDS)
  if where == "import":
    return bb._report(load_error=message)
  # The same words raised while tracing (the exporter's error text for the platform, as its
  # program writes it: the exception's type and message).
  return bb._report(bb._entry(errors={"cpu": "RuntimeError: RESOURCE_EXHAUSTED: out of memory",
                                      "cuda": "RuntimeError: RESOURCE_EXHAUSTED: out of memory"},
                              stage="trace"))


@pytest.mark.parametrize("where", ["import", "trace"])
def test_a_failure_in_the_candidate_s_own_words_is_not_load_decided(
    analysis, reward_cache, where):  # pylint: disable=redefined-outer-name
  judged, _ = bb._evaluate(_failing_report(where))
  assert judged.status is Status.ERROR
  assert "out of memory" in judged.error  # the candidate's words, quoted
  # As the reward's cache gets that record for the completion's source.
  item = _item(OOM_WORDS, FRESH, "c-1")
  failed = dataclasses.replace(_record(item, Status.ERROR), error_type=judged.error_type,
                               error=judged.error, reasons=judged.reasons)
  reward_cache.put(item, failed, driver.empty_artifacts(item))
  judge = Judge(Status.ERROR)
  (record,) = _served([_item(OOM_WORDS, FRESH, "c-2")], reward_cache, judge)
  assert judge.asked == [] and record.cached, (
      f"the failing text is judged again: its error type {judged.error_type.value} (read from "
      f"the candidate's words) is load-decided: {verdicts.load_decided(failed)}")
  assert judged.error_type is not ErrorType.OUT_OF_MEMORY and not verdicts.load_decided(failed)


def test_a_text_the_compiler_refuses_is_a_load_error_not_a_crash():
  source = "x = 1" + "+1" * 300_000 + "\n"  # Python refuses it too (python F: RecursionError)
  with pytest.raises(kernels.KernelLoadError):
    kernels.load_module(source, "deep.py")


def _bom_file(tmp_path):
  return CONTROLS / "adv_r18_pos_bom_relu.py"


def _latin1_file(tmp_path):
  """The shipped relu with a PEP 263 declaration and a latin-1 byte in a comment."""
  path = tmp_path / "relu_latin1.py"
  path.write_bytes(b"# -*- coding: latin-1 -*-\n# relu, by Jos\xe9\n"
                   + kernels.kernel_path("gpu", "relu").read_bytes())
  return path


def test_a_kernel_file_python_runs_is_read_as_python(tmp_path):
  path = _bom_file(tmp_path)
  compile(path.read_bytes(), str(path), "exec", dont_inherit=True)  # Python reads it
  text, name = kernels.read_source(path)
  module = kernels.load_module(text, name)
  assert callable(module.kernel) and not text.startswith("\ufeff")
  assert callable(kernels.load_module("\ufeff" + text, name).kernel)  # a text given as such


def test_a_kernel_file_in_another_encoding_is_refused_with_what_to_do(tmp_path):
  """Round 19 (finding 4): a declared encoding other than UTF-8 reads back as another program
  once its text is published as UTF-8, so the file is refused, saying how to mend it."""
  path = _latin1_file(tmp_path)
  compile(path.read_bytes(), str(path), "exec", dont_inherit=True)  # Python would run it
  with pytest.raises(kernels.KernelLoadError, match="declares the iso-8859-1 encoding: a kernel "
                     "is UTF-8 text; save it as UTF-8 without the declaration"):
    kernels.read_source(path)


MODULE = ("import jax\nfrom jax.experimental import pallas as pl\n\n\n"
          "def _relu(x_ref, o_ref):\n  o_ref[...] = jax.numpy.maximum(x_ref[...], 0.0)\n\n\n"
          "def kernel(x, interpret=False):\n"
          "  return pl.pallas_call(_relu, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
          "                        interpret=interpret)(x)\n")


def test_the_block_judged_is_the_one_the_prompt_names():
  assert "the last such block" in prompt.ANSWER and "```python" in prompt.ANSWER
  answer = (f"Here is the module.\n\n```python\n{MODULE}```\n\n"
            "On a (4, 4) input it printed:\n\n```\n[[0. 0.5 0. 1.]]\nmax abs error 0.0\n```\n")
  assert rw.extract_kernel(answer) == MODULE, rw.extract_kernel(answer)


class _Run:  # what driver.export reads of a sandboxed run that ended without an answer
  def __init__(self, returncode):
    self.returncode, self.stdout, self.stderr = returncode, "", "Fatal Python error"
    self.result, self.result_cut, self.violations, self.unavailable = b"", False, (), None
    self.timed_out = self.out_of_memory = False
    self.wall_s, self.layers = 0.1, ("landlock",)

  violated = False

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    pass


@pytest.mark.parametrize("returncode", [3, -signal.SIGSEGV, -signal.SIGABRT, -signal.SIGKILL],
                         ids=["exit_code", "segv", "abort", "sigkill"])
def test_an_exporter_that_died_is_no_verdict_until_it_dies_again_alone(
    analysis, monkeypatch, reward_cache, returncode):  # pylint: disable=redefined-outer-name
  """However the exporter ended without an answer, its own program or the host may have ended
  it (red team round 19: a host's task limit aborts jax's start-up, systemd sends SIGTERM): a
  `crash`, no verdict. The reward's cache judges it again alone (`verdicts.evaluate`) and
  holds the ending only there (`put(held=True)`); a harness error is never held."""
  monkeypatch.setattr(driver.sandbox, "run_sandboxed", lambda *a, **k: _Run(returncode))
  item = _item(OOM_WORDS, FRESH, "c-1")
  outcome = driver.export(item, "cpu", driver.Limits(timeout_s=60, memory_bytes=1 << 30))
  assert outcome.failure == "crash" and outcome.report is None
  judged, _ = bb._evaluate(outcome)
  assert (judged.status, judged.error_type) == (Status.ERROR, ErrorType.CRASH)
  assert not driver.has_verdict(judged) and verdicts.load_decided(judged)
  crashed = dataclasses.replace(_record(item, Status.ERROR), correct=False,
                                error_type=ErrorType.CRASH, error=judged.error)
  reward_cache.put(item, crashed, driver.empty_artifacts(item))
  assert reward_cache.lookup(item, crashed.environment) is None
  harness = dataclasses.replace(crashed, error_type=ErrorType.HARNESS)
  for held in (False, True):
    reward_cache.put(item, harness, driver.empty_artifacts(item), held=held)
    assert reward_cache.lookup(item, crashed.environment) is None
  reward_cache.put(item, crashed, driver.empty_artifacts(item), held=True)
  assert reward_cache.lookup(item, crashed.environment)[0].error_type is ErrorType.CRASH
