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
failure is judged again alone on the same draw, and held where it recurs).
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


SPUN_BUDGET = budgets.overrun(budgets.CORRECTNESS, 120.0)
SPUN_LIMIT = ("the judge found no verdict within the 60 s limit: its correctness runs stage "
              "ran for the last 58 s; the process was killed")
# How a judge's run ends, as the judge and the driver write it.
SPUN = {"budget": (Status.REJECTED, SPUN_BUDGET, ErrorType.TIMEOUT),
        "limit": (Status.TIMEOUT, SPUN_LIMIT, ErrorType.TIMEOUT),
        "crash": (Status.ERROR, "the exporter died with SIGKILL", ErrorType.CRASH),
        "pass": (Status.PASS, None, None),
        "incorrect": (Status.INCORRECT, "seed 7: not allclose", None)}


class Runs:
  """Stands in for the judge: the n-th call of `measure` ends its items as `endings[n]`;
  records every call's items (candidate, seeds) and the secrets they carry."""

  def __init__(self, *endings):
    self.endings, self.calls, self.secrets = list(endings), [], []

  def __call__(self, items):
    if not items:  # a batch the cache answered whole
      return
    status, reason, error_type = SPUN[self.endings[len(self.calls)]]
    self.calls.append([(it.candidate, it.options.seeds) for it in items])
    self.secrets.append([it.secret for it in items])
    for it in items:
      record = dataclasses.replace(_record(it, status), seeds=it.options.seeds or (7, 8))
      if status is not Status.PASS:
        record = dataclasses.replace(record, correct=False, reasons=(reason,),
                                     error=reason if status is not Status.REJECTED else None,
                                     error_type=error_type)
      yield it, record, driver.empty_artifacts(it)


def _batch(cache, candidates, runs, control="adv_cache_lottery_relu"):
  """One batch of a cache for `candidates` (all of one text): the records paid."""
  return [r for r, _ in verdicts.evaluate([_item(control, FRESH, c) for c in candidates],
                                          cache, rf.ENV, runs)]


# Red team round 17, finding 2, closed (session 33): the reward's cache judges a limit's failure
# once more at the end of its batch, alone and on the same seeds, and holds one that recurs.
@pytest.mark.parametrize("first,again", [("budget", "limit"), ("limit", "limit"),
                                         ("crash", "crash"), ("budget", "crash")])
def test_a_lottery_kernel_cannot_keep_its_failures_out_of_the_cache(reward_cache, first, again):
  cache = reward_cache
  runs = Runs(first, again)  # an unlucky draw: the kernel spins (or dies) on it, and again
  (record,) = _batch(cache, ["c-1"], runs)
  [[(first, drawn)], again_alone] = runs.calls
  assert first == "c-1" and len(drawn) == FRESH.num_seeds  # the driver drew the seeds
  assert again_alone == [("c-1", drawn)], "judged again alone, on the same seeds"
  # and on the same secret, so the timing's inputs and kept outputs are drawn again (round 20)
  assert runs.secrets[0] == runs.secrets[1] and runs.secrets[0][0] is not None
  assert verdicts.load_decided(record) and rw.reward_of(record) == 0.0
  lucky = Runs("pass")  # batch 2: a lucky draw would pay; the text is held
  (record,) = _batch(cache, ["c-2"], lucky)
  assert lucky.calls == [] and record.cached and rw.reward_of(record) == 0.0
  assert (record.status, record.reasons) == (SPUN[again][0], (SPUN[again][1],))


def test_a_source_a_neighbour_starved_is_judged_again_alone_and_paid(reward_cache):
  """The honest neighbour: starved in its batch (and its twin with it), it passes alone, is
  paid, and nothing holds it; the next batch judges it again as any fresh-seed pass."""
  cache = reward_cache
  runs = Runs("budget", "pass")
  records = _batch(cache, ["c-1", "c-2"], runs, "adv_pos_eager_setup_relu")
  [[(first, drawn)], again_alone] = runs.calls
  assert first == "c-1" and again_alone == [("c-1", drawn)]
  assert [(r.status, r.cached) for r in records] == [(Status.PASS, False), (Status.PASS, True)]
  assert all(rw.reward_of(r) > 0 for r in records)
  later = Runs("pass")
  (record,) = _batch(cache, ["c-3"], later, "adv_pos_eager_setup_relu")
  assert [c for c, _ in later.calls[0]] == ["c-3"] and rw.reward_of(record) > 0


def test_what_a_source_answers_alone_is_its_verdict(reward_cache):
  """Judged again alone, a failure of the kernel's own (here `incorrect` on the same draw) is
  stored and served like any: the next batch is not judged."""
  cache = reward_cache
  (record,) = _batch(cache, ["c-1"], Runs("budget", "incorrect"))
  assert record.status is Status.INCORRECT
  later = Runs("pass")
  (record,) = _batch(cache, ["c-2"], later)
  assert later.calls == [] and record.cached and record.status is Status.INCORRECT


def test_each_source_is_judged_again_alone_after_the_batch(reward_cache):
  """Two starved sources of one batch are judged again one at a time, after every first
  measurement of the batch (no source of it beside them), each on the seeds the driver drew
  for it, also where its judge was killed before it wrote them."""
  cache = reward_cache
  items = [_item("adv_cache_lottery_relu", FRESH, "c-1"),
           _item("adv_pos_eager_setup_relu", FRESH, "c-2")]

  def measure(todo):
    calls.append([it.candidate for it in todo])
    for it in todo:
      ending = "limit" if len(calls) == 1 else "pass"
      status, reason, error_type = SPUN[ending]
      record = _record(it, status)
      if ending == "limit":  # killed before it answered: no seeds
        record = dataclasses.replace(record, correct=False, reasons=(reason,), seeds=(),
                                     error=reason, error_type=error_type)
      seen.append(it.options.seeds)
      yield it, record, driver.empty_artifacts(it)
  calls, seen = [], []
  records = [r for r, _ in verdicts.evaluate(items, cache, rf.ENV, measure)]
  assert calls == [["c-1", "c-2"], ["c-1"], ["c-2"]]
  assert seen[2:] == seen[:2] and all(len(s) == FRESH.num_seeds for s in seen)
  assert seen[0] != seen[1]  # a draw per source
  assert [r.status for r in records] == [Status.PASS, Status.PASS]


def test_a_population_run_never_judges_again_in_its_batch(tmp_path):
  cache = verdicts.VerdictCache(tmp_path)  # a population run's: no judge_limits_again
  runs = Runs("budget")
  (record,) = _batch(cache, ["c-1"], runs)
  assert runs.calls == [[("c-1", ())]] and verdicts.load_decided(record)  # the judge draws
  assert cache.lookup(_item("adv_cache_lottery_relu", FRESH, "c-2"), rf.ENV) is None
