"""Red team round 15: one failed analysis of the shipped kernels turns the copy check off for the
judge's life.

`fingerprint._shipped` is lru-cached per (task, size, precision, analyser, platform), the
analyser being the judge's one `analysis_process.trusted()` helper, and a shipped kernel whose
analysis raises is skipped (`continue`): its empty fingerprint set is cached like a real one.
The trusted helper is as exposed to its neighbours as any sandboxed process: it runs as the same
user as every exporter, so a thread hog (tests/controls/adv_thread_hog_relu.py) that holds the
pool while the judge first fingerprints a task's shipped kernels makes LLVM's thread pool
abort it ("died with SIGABRT while analysing the module", measured for the candidates' helper in
tests/judge/demo_thread_griefing.py); the OOM killer or a loaded core does the same. Every later
candidate of that task, in that judge (the reward keeps its judges warm for its lifetime), is
then compared with nothing: a pasted shipped kernel passes `reject_copies` (reward 0) and is
paid (parity on a GPU, the floor on a CPU), its record's `copy_of` empty.

Here the analyser fails as it would while the pool is empty, then works: the copy check of a
later exact copy must find it. Since the fix (fingerprint._analysed) a failed analysis of a
shipped kernel is tried once more on a fresh helper, then raised as the judge's failure
(`harness_error`, never cached); no failure is an answer.
"""

import functools

import pytest

from pallasbench_dataset.evaluation.judge import analysis_process, fingerprint
from pallasbench_dataset.evaluation.judge.module_analysis import ModuleAnalysisError
from pallasbench_dataset.kernels import Variant, load_kernel
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.tasks import get_task


class Starved:
  """The judge's trusted analyser, whose helper the neighbours' hog aborts `times` times."""

  def __init__(self, analyser, times: int):
    self.analyser, self.starved = analyser, times

  def analyse(self, serialized):
    if self.starved:
      self.starved -= 1
      raise ModuleAnalysisError("the module analysis process died with SIGABRT while analysing "
                                "the module: the artifact's module cannot be read safely")
    return self.analyser.analyse(serialized)


@pytest.fixture
def pasted():
  """An exact paste of the shipped relu's kernel calls, and a working trusted analyser."""
  real = analysis_process.ModuleAnalyser()
  fingerprint._shipped.cache_clear()  # pylint: disable=protected-access
  try:
    structs = get_task("relu").input_structs("small")
    copy = load_kernel(Variant.GPU, "relu")
    exported = export_for("cuda", functools.partial(copy.kernel, interpret=False), *structs)
    kernels = real.analyse(exported.mlir_module_serialized)[0].kernels
    assert any(k.fingerprint for k in kernels)
    yield kernels, real
  finally:
    fingerprint._shipped.cache_clear()  # pylint: disable=protected-access
    real.close()


def test_a_copy_after_a_starved_copy_check_is_still_found(pasted):
  kernels, real = pasted
  trusted = Starved(real, 1)
  during = fingerprint.shipped_copies(kernels, "relu", "small", "float32", trusted)
  after = fingerprint.shipped_copies(kernels, "relu", "small", "float32", trusted)
  assert not trusted.starved
  assert any(p.endswith("relu.py") for p in during), during  # the second try found it
  assert during == after


def test_a_copy_check_that_cannot_analyse_the_shipped_kernel_raises_and_keeps_nothing(pasted):
  """Starved twice in a row: no answer at all (raised, for the judge to end the item as its
  own failure), and nothing cached: the next check, on a working helper, finds the copy."""
  kernels, real = pasted
  trusted = Starved(real, 2)
  with pytest.raises(fingerprint.ShippedAnalysisError, match="kernels_gpu/relu.py .*SIGABRT"):
    fingerprint.shipped_copies(kernels, "relu", "small", "float32", trusted)
  assert not trusted.starved
  after = fingerprint.shipped_copies(kernels, "relu", "small", "float32", trusted)
  assert any(p.endswith("relu.py") for p in after), after
