"""Red team round 17: the verdict cache's "the host's load decided it" exemption, chosen by the
candidate.

`verdicts.load_decided` keeps out of the reward's cache every verdict the host's load may have
decided (round 14: a timeout, a stage past its budget, memory exhausted, the analysis helper
killed), so that a neighbour cannot make an honest source's starved verdict stick. Two ways a
candidate takes the same exemption for its own failures:

1. `budgets.ran_out` searches every reason of a `rejected` record for the budget phrase, and a
   rejection's reasons quote the candidate's own names: the exporter's `input_writes` are
   "<pallas_call name>: input <i>", and `pl.pallas_call(..., name=...)` is free text in an
   honest program. A kernel named "... ran past its 1 s budget ..." that is rejected is never
   stored: judged again (export, analysis) in every batch that repeats it. Mutation session 31
   recorded the invariant this breaks ("a candidate's own text naming a budget must not buy it
   another draw: the Status.REJECTED guard in load_decided") for `incorrect` only.
2. A kernel that spins on its unlucky draws (a data-dependent loop in the kernel: the judge's
   time limit or the correctness stage's budget ends it) turns each of its failures into a
   load-decided one. Its text is then judged on fresh seeds in every batch that repeats it,
   and paid whenever a draw is lucky: the lottery the reward's cache was built to stop
   (`serve_fresh_passes=False` stops the pass side; this is the failure side).

Both were strict xfails, each assertion stating what the cache should do; both are closed
(session 32: the cache reads a record's status and error type only; session 33: a limit's
failure that recurs in a second batch is held).
"""

from __future__ import annotations

import dataclasses

import pytest

from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.pipeline import driver, verdicts
from pallasbench_dataset.schema import ErrorType, Status

from tests import runfixtures as rf
from tests.judge import test_building_blocks as bb
# Fixtures of the two modules whose stand-ins these tests use.
from tests.judge.test_building_blocks import analysis  # noqa: F401  pylint: disable=unused-import
from tests.judge.test_cache_attacks import (  # noqa: F401  pylint: disable=unused-import
    FRESH, Judge, _item, _record, _served, reward_cache)

BUDGET_NAME = "k ran past its 1 s budget"


def test_a_rejection_whose_reason_quotes_the_kernel_s_own_name_is_stored(
    analysis, tmp_path):  # pylint: disable=redefined-outer-name
  # The exporter's reading of such a kernel (jaxpr_analysis quotes the pallas_call's name, as
  # round 17 measured through the judge) is given here as the exporter reports it: read in a
  # worker of the whole suite, jaxpr_analysis of such a kernel found no write (an order
  # dependence of the exporter's reading, not this test's subject: the cache's).
  input_writes = (f"{BUDGET_NAME}: input 0",)
  # The judge's record of that export (module analysis stubbed, as test_building_blocks does).
  report = bb._report(bb._entry(artifacts=bb._artifacts()), input_writes=input_writes)
  judged, _ = bb._evaluate(report)
  assert judged.status is Status.REJECTED and judged.error_type is None
  assert judged.reasons == (f"the kernel writes to its input refs ({BUDGET_NAME}: input 0): "
                            "inputs mutated in place",)
  # That record, as the reward's cache gets it for the completion's source.
  reward = rw.KernelReward(device="cpu", size="small", cache_dir=tmp_path / "cache")
  try:
    cache, item = reward.cache, _item("adv_pos_eager_setup_relu", FRESH, "c-1")
    rejected = dataclasses.replace(_record(item, Status.REJECTED), correct=False,
                                   reasons=judged.reasons)
    cache.put(item, rejected, driver.empty_artifacts(item))
    judge = Judge(Status.REJECTED)
    (record,) = _served([_item("adv_pos_eager_setup_relu", FRESH, "c-2")], cache, judge)
    assert not verdicts.load_decided(rejected), "the kernel's own name reads as a stage's budget"
    assert judge.asked == [] and record.cached, "the rejected text is judged again"
  finally:
    reward.close()


def _lottery(cache, candidate, status, reason=None, error_type=None):
  """One batch of the reward's cache for a lottery kernel that spins on its unlucky draws: the
  judge (stood in for) answers `status`; returns the record paid and whether it was judged."""
  item = _item("adv_cache_lottery_relu", FRESH, candidate)

  def measure(items):
    for it in items:
      asked.append(it.candidate)
      record = _record(it, status)
      if status is not Status.PASS:
        record = dataclasses.replace(record, correct=False, reasons=(reason,) if reason else (),
                                     error=reason if error_type else None, error_type=error_type)
      yield it, record, driver.empty_artifacts(it)
  asked: list[str] = []
  (record,) = [r for r, _ in verdicts.evaluate([item], cache, rf.ENV, measure)]
  return record, bool(asked)


# Red team round 17, finding 2, closed (session 33): the reward's cache counts each batch's
# load-decided failure of a key (`VerdictCache.struck`) and holds the key's last one once it
# has recurred in `reward.STRIKES` batches, whatever passes came between.
def test_a_lottery_kernel_cannot_keep_its_failures_out_of_the_cache(reward_cache):
  cache = reward_cache
  spun_budget = budgets.overrun(budgets.CORRECTNESS, 120.0)
  spun_limit = ("the judge found no verdict within the 60 s limit: its correctness runs stage "
                "ran for the last 58 s; the process was killed")
  # Batch 1: an unlucky draw; the kernel's device loop spun until the correctness stage's
  # budget ended it (a `rejected` typed timeout, as the judge writes it).
  first, judged_1 = _lottery(cache, "c-1", Status.REJECTED, spun_budget, ErrorType.TIMEOUT)
  # Batch 2: a lucky draw, paid: one load-decided failure may be a neighbour's doing.
  lucky, judged_2 = _lottery(cache, "c-2", Status.PASS)
  # Batch 3: unlucky again; the judge's time limit ended it.
  second, judged_3 = _lottery(cache, "c-3", Status.TIMEOUT, spun_limit, ErrorType.TIMEOUT)
  assert judged_1 and judged_2 and judged_3
  assert verdicts.load_decided(first) and verdicts.load_decided(second)
  assert rw.reward_of(first) == 0.0 and rw.reward_of(lucky) > 0 and rw.reward_of(second) == 0.0
  # Batch 4: a lucky draw would pay again, but the text has ended by a limit in two batches.
  fourth, judged_4 = _lottery(cache, "c-4", Status.PASS)
  assert not judged_4 and fourth.cached and rw.reward_of(fourth) == 0.0, (
      f"judged again in batch 4: {judged_4}; paid {rw.reward_of(fourth)}")
  assert fourth.status is Status.TIMEOUT and fourth.reasons == (spun_limit,)


def test_one_starved_batch_is_judged_again_and_only_batches_count_as_strikes(reward_cache):
  """The honest neighbour: one load-decided failure (twins of one batch count once) leaves
  the text to be judged again, and a cache that counts no strikes (a population run's) serves
  what it stored, never a limit's failure."""
  cache = reward_cache
  starved = budgets.overrun(budgets.CORRECTNESS, 120.0)
  items = [_item("adv_cache_lottery_relu", FRESH, c) for c in ("c-1", "c-2", "c-3")]
  asked: list[str] = []

  def measure(todo):
    for it in todo:
      asked.append(it.candidate)
      yield it, dataclasses.replace(_record(it, Status.REJECTED), correct=False,
                                    reasons=(starved,), error_type=ErrorType.TIMEOUT), \
          driver.empty_artifacts(it)
  records = [r for r, _ in verdicts.evaluate(items, cache, rf.ENV, measure)]
  assert asked == ["c-1"] and [r.cached for r in records] == [False, True, True]
  key = verdicts.key_for(items[0], rf.ENV)
  assert cache.struck(key)[0] == 1 and cache.get(key) is None
  _, judged = _lottery(cache, "c-4", Status.PASS)
  assert judged, "one starved batch held the text"
  population = verdicts.VerdictCache(cache.folder)  # no strikes: never serves a limit's failure
  cache.put(items[0], records[0], driver.empty_artifacts(items[0]))
  assert cache.struck(key)[0] == 2
  assert cache.lookup(items[0], rf.ENV)[0].status is Status.REJECTED
  assert population.lookup(items[0], rf.ENV)[0].status is Status.PASS  # batch 2's pass


def test_strikes_must_be_a_positive_count(tmp_path):
  with pytest.raises(ValueError, match="positive"):
    verdicts.VerdictCache(tmp_path, strikes=0)
