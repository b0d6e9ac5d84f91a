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

Each test states what should hold, as a strict xfail: it fails on the present code because the
attack works.
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

@pytest.mark.xfail(strict=True, reason="red team round 19, finding 1: an exporter that died "
                   "before the candidate's first line (no tripwire layer) is typed 'exited', "
                   "'the kernel's program ended it', a verdict the cache keeps")
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


@pytest.mark.xfail(strict=True, reason="red team round 19, finding 1: a signal the host sends "
                   "(SIGTERM from systemd/Slurm/earlyoom, SIGXCPU from the supervisor's own "
                   "RLIMIT_CPU) is typed 'exited', a verdict the cache keeps at once")
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
  `status`; returns the record paid and whether it was judged."""
  item, asked = _item(HONEST, FRESH, candidate), []
  starved = budgets.overrun(budgets.CORRECTNESS, 120.0)

  def measure(items):
    for it in items:
      asked.append(it.candidate)
      record = _record(it, status)
      if status is not Status.PASS:
        record = dataclasses.replace(record, correct=False, reasons=(starved,),
                                     error_type=error_type)
      yield it, record, driver.empty_artifacts(it)
  (record,) = [r for r, _ in verdicts.evaluate([item], cache, rf.ENV, measure)]
  return record, bool(asked)


@pytest.mark.xfail(strict=True, reason="red team round 19, finding 2: strikes never decay and "
                   "a pass never answers them: an honest text starved twice, ten passes apart, "
                   "is served its failure for good")
def test_an_honest_text_that_passes_between_two_starved_batches_is_still_judged(reward_cache):
  cache = reward_cache
  _batch(cache, "c-1", Status.REJECTED, ErrorType.TIMEOUT)  # a neighbour starved it
  paid = [rw.reward_of(_batch(cache, f"c-{i}", Status.PASS)[0]) for i in range(2, 12)]
  assert all(p > 0 for p in paid)  # ten batches: judged, passed, paid
  _batch(cache, "c-12", Status.REJECTED, ErrorType.TIMEOUT)  # starved once more
  record, judged = _batch(cache, "c-13", Status.PASS)
  assert judged and rw.reward_of(record) > 0, (
      f"after 10 passes and 2 starved batches: judged {judged}, served {record.status} "
      f"({record.reasons}), paid {rw.reward_of(record)}")


@pytest.mark.xfail(strict=True, reason="red team round 19, finding 2: each rank of a "
                   "data-parallel trainer sharing the cache folder is a 'batch': one starved "
                   "step holds an honest text for good")
def test_one_starved_step_on_two_ranks_is_one_strike(tmp_path):
  folder = tmp_path / "cache"  # the default folder is one per host, shared by every rank
  rank_0, rank_1 = (verdicts.VerdictCache(folder, serve_fresh_passes=False, strikes=rw.STRIKES)
                    for _ in range(2))
  # One training step: the policy's favourite text in both ranks' shards; a neighbour's load
  # starves the exporters of that moment.
  _batch(rank_0, "c-1", Status.REJECTED, ErrorType.TIMEOUT)
  _batch(rank_1, "c-2", Status.REJECTED, ErrorType.TIMEOUT)
  record, judged = _batch(rank_0, "c-3", Status.PASS)  # the next step
  assert judged and rw.reward_of(record) > 0, (
      f"one starved step: judged {judged}, served {record.status}, paid {rw.reward_of(record)}")


# -- 3. a strike lost between two drivers ----------------------------------------------------------

@pytest.mark.xfail(strict=True, reason="red team round 19, finding 3: a strike is read, "
                   "counted and written back without a lock; two drivers on one folder lose one")
def test_two_drivers_striking_one_key_count_two(tmp_path, monkeypatch):
  folder = tmp_path / "cache"
  a, b = (verdicts.VerdictCache(folder, serve_fresh_passes=False, strikes=rw.STRIKES)
          for _ in range(2))
  item = _item("adv_cache_lottery_relu", FRESH, "c-1")
  spun = dataclasses.replace(_record(item, Status.TIMEOUT), correct=False,
                             error_type=ErrorType.TIMEOUT, reasons=("spun",))
  write = verdicts.VerdictCache._write

  def a_writes(self, path, entry):  # driver b's whole put lands between a's read and write
    if self is a:
      b.put(item, spun, driver.empty_artifacts(item))
    write(self, path, entry)
  monkeypatch.setattr(verdicts.VerdictCache, "_write", a_writes)
  a.put(item, spun, driver.empty_artifacts(item))
  key = verdicts.key_for(item, rf.ENV)
  assert a.struck(key)[0] == 2 and a.lookup(item, rf.ENV) is not None, (
      f"two unlucky batches, counted {a.struck(key)[0]}: the lottery text is judged again")


# -- 4. the text read is not the text that reads back -----------------------------------------------

@pytest.mark.xfail(strict=True, reason="red team round 19, finding 4: read_source keeps a "
                   "non-UTF-8 coding declaration in the text it returns; saved and read again "
                   "it is another program")
def test_the_text_the_judge_reads_reads_back_as_itself(tmp_path):
  judged, _ = kernels.read_source(CONTROLS / f"{UTF7}.py")
  saved = tmp_path / "published_relu.py"  # the published text, saved as a kernel file
  saved.write_text(judged, encoding="utf-8")
  again, _ = kernels.read_source(saved)
  assert again == judged, (
      f"{kernels.sha256(judged)[:12]} read back as {kernels.sha256(again)[:12]}: "
      f"{[l for l in judged.splitlines() if 'AC0-' in l]} became "
      f"{[l for l in again.splitlines() if 'jnp.maximum' in l]}")
