"""Red team round 19: what session 33 changed (docs/red-team/round19.md).

1. An exporter's ending that the host causes is typed as the candidate's own choice. Since
   round 18 `driver.export` types every non-zero exit but SIGKILL `exited` ("the kernel's
   program ended it"): an `error` the reward's cache stores at once and serves for good. The
   host ends honest exporters that way too: a death before any candidate code ran (the
   exporter's own jax start-up aborting on a thread limit, measured: SIGABRT in
   GetPjRtCpuClient, no `tripwire` layer yet), a SIGTERM from outside (systemd, Slurm, earlyoom;
   measured on the shipped relu), the supervisor's own RLIMIT_CPU backstop (SIGXCPU).
2. Strikes count events, not a rate: they never decay and a pass never answers them, and every
   caller sharing the cache folder (a data-parallel trainer's ranks) counts its own "batch".
   An honest text the policy repeats is held as a failure once two starvations ever touched
   it: ten passes between them change nothing, and one starved step on two ranks is enough.
3. A strike is a read-modify-write of `<digest>.strikes.json` without a lock: two drivers on
   one cache folder lose one, so a lottery kernel's two unlucky batches count as one.
4. `kernels.read_source` now honours a PEP 263 declaration, and the text it returns (judged,
   hashed, published) keeps that declaration: saved again as UTF-8 and read back, it is
   another program (utf-7: `+AC0-` is `-`), with another hash and verdict.

Each test states what should hold. They were strict xfails; all are closed (session 33): an
exporter that died is a `crash` again, whoever ended it; the reward's cache no longer counts
strikes across batches (findings 2 and 3) but judges a limit's failure again at the end of its
batch, alone, on the same seeds, and holds only one that recurs there; `read_source` refuses a
declared encoding other than UTF-8.
"""

from __future__ import annotations

import dataclasses
import signal

import pytest

from pallasbench_dataset import kernels
from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.pipeline import driver, verdicts
from pallasbench_dataset.schema import ErrorType, Status

from tests import runfixtures as rf
from tests.judge import test_building_blocks as bb
from tests.paths import CONTROLS
# Fixtures of the modules whose stand-ins these tests use.
from tests.judge.test_building_blocks import analysis  # noqa: F401  pylint: disable=unused-import
from tests.judge.test_cache_attacks import (  # noqa: F401  pylint: disable=unused-import
    FRESH, _item, _record, reward_cache)
from tests.judge.test_round18 import _Run

HONEST = "adv_pos_eager_setup_relu"
UTF7 = "adv_r19_utf7_relu"
# The layers of a sandboxed exporter that died in its own start-up (measured, round 19: the
# host's RLIMIT_NPROC hard limit 3): every wall but the tripwire, which the exporter arms after
# jax has started and before the candidate's first line.
BEFORE_CANDIDATE = ("new-session", "scrubbed-env", "rlimits-cpu", "veil", "unprivileged",
                    "private-proc", "dies-with-parent", "rlimits", "one-core", "own-tasks",
                    "landlock", "seccomp")


def _kept_as_verdict(record) -> bool:
  """Whether the reward's cache stores `record` as the text's verdict at once
  (`VerdictCache.put`: a verdict, not load-decided)."""
  return driver.has_verdict(record) and not verdicts.load_decided(record)


class _HostEnded(_Run):
  def __init__(self, returncode, stderr, layers):
    super().__init__(returncode)
    self.stderr, self.layers = stderr, layers


def _exported(monkeypatch, run):
  monkeypatch.setattr(driver.sandbox, "run_sandboxed", lambda *a, **k: run)
  item = _item(HONEST, FRESH, "c-1")
  return item, driver.export(item, "cpu", driver.Limits(timeout_s=60, memory_bytes=1 << 30))


# -- 1. an ending the host causes, typed as the candidate's ---------------------------------------

def test_an_exporter_that_died_before_any_candidate_code_ran_is_no_verdict_on_it(
    analysis, monkeypatch, reward_cache):  # pylint: disable=redefined-outer-name
  item, outcome = _exported(monkeypatch, _HostEnded(
      -signal.SIGABRT, "LLVM ERROR: pthread_create failed: Resource temporarily unavailable",
      BEFORE_CANDIDATE))
  judged, _ = bb._evaluate(outcome)
  # What the reward's cache then does with it, for the next batch of the same honest text.
  stored = dataclasses.replace(_record(item, Status.ERROR), correct=False, reasons=judged.reasons,
                               error=judged.error, error_type=judged.error_type)
  reward_cache.put(item, stored, driver.empty_artifacts(item))
  held = reward_cache.lookup(_item(HONEST, FRESH, "c-2"), rf.ENV)
  assert "tripwire" not in outcome.layers
  assert not _kept_as_verdict(judged) and held is None, (
      f"{outcome.failure}: {outcome.message!r}, typed {judged.error_type}; the next batch is "
      f"served {held and held[0].status}")


@pytest.mark.parametrize("returncode", [-signal.SIGTERM, -signal.SIGXCPU],
                         ids=["sigterm", "sigxcpu"])
def test_a_signal_the_host_sends_is_at_most_a_strike(
    analysis, monkeypatch, returncode):  # pylint: disable=redefined-outer-name
  _, outcome = _exported(monkeypatch, _HostEnded(returncode, "", (*BEFORE_CANDIDATE, "tripwire")))
  judged, _ = bb._evaluate(outcome)
  assert not _kept_as_verdict(judged), (
      f"{outcome.failure}: {outcome.message!r}, typed {judged.error_type}, stored as the "
      "text's verdict")


# -- 2. strikes count events, never a rate ------------------------------------------------------

def _batch(cache, candidate, status, error_type=None):
  """One batch of the reward's cache for the honest text: the judge (stood in for) answers
  `status` in the batch; judged again alone after it, the text passes (the neighbour that
  starved it is gone). Returns the record paid and whether it was judged."""
  item, asked = _item(HONEST, FRESH, candidate), []
  starved = budgets.overrun(budgets.CORRECTNESS, 120.0)

  def measure(items):
    for it in items:
      asked.append(it.candidate)
      record = _record(it, status if len(asked) == 1 else Status.PASS)
      if record.status is not Status.PASS:
        record = dataclasses.replace(record, correct=False, reasons=(starved,),
                                     error_type=error_type)
      yield it, record, driver.empty_artifacts(it)
  (record,) = [r for r, _ in verdicts.evaluate([item], cache, rf.ENV, measure)]
  return record, bool(asked)


def test_an_honest_text_that_passes_between_two_starved_batches_is_still_judged(reward_cache):
  cache = reward_cache
  starved, _ = _batch(cache, "c-1", Status.REJECTED, ErrorType.TIMEOUT)  # a neighbour starved it
  assert rw.reward_of(starved) > 0  # judged again alone, it passed: paid in that batch
  paid = [rw.reward_of(_batch(cache, f"c-{i}", Status.PASS)[0]) for i in range(2, 12)]
  assert all(p > 0 for p in paid)  # ten batches: judged, passed, paid
  _batch(cache, "c-12", Status.REJECTED, ErrorType.TIMEOUT)  # starved once more
  record, judged = _batch(cache, "c-13", Status.PASS)
  assert judged and rw.reward_of(record) > 0, (
      f"after 10 passes and 2 starved batches: judged {judged}, served {record.status} "
      f"({record.reasons}), paid {rw.reward_of(record)}")


def test_one_starved_step_on_two_ranks_holds_nothing(tmp_path):
  folder = tmp_path / "cache"  # the default folder is one per host, shared by every rank
  rank_0, rank_1 = (verdicts.VerdictCache(folder, serve_fresh_passes=False,
                                          judge_limits_again=True) for _ in range(2))
  # One training step: the policy's favourite text in both ranks' shards; a neighbour's load
  # starves the exporters of that moment.
  _batch(rank_0, "c-1", Status.REJECTED, ErrorType.TIMEOUT)
  _batch(rank_1, "c-2", Status.REJECTED, ErrorType.TIMEOUT)
  record, judged = _batch(rank_0, "c-3", Status.PASS)  # the next step
  assert judged and rw.reward_of(record) > 0, (
      f"one starved step: judged {judged}, served {record.status}, paid {rw.reward_of(record)}")


# -- 4. the text read is not the text that reads back -----------------------------------------------

def test_the_text_the_judge_reads_reads_back_as_itself(tmp_path):
  """Closed by refusing any declared encoding but UTF-8 (a UTF-8 text with its declaration
  reads back as itself)."""
  with pytest.raises(kernels.KernelLoadError, match="declares the utf-7 encoding"):
    kernels.read_source(CONTROLS / f"{UTF7}.py")
  source = "# -*- coding: utf-8 -*-\n# caf\u00e9\n" + kernels.kernel_path("gpu", "relu").read_text()
  path = tmp_path / "utf8_relu.py"
  path.write_text(source, encoding="utf-8")
  judged, _ = kernels.read_source(path)
  saved = tmp_path / "published_relu.py"  # the published text, saved as a kernel file
  saved.write_text(judged, encoding="utf-8")
  assert judged == source and kernels.read_source(saved)[0] == judged
