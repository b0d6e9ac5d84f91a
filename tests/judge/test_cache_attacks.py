"""Class 15 of the adversarial controls: the verdict cache as the attacker's lever.

The reward (`reward.KernelReward`), population runs and the suite look a kernel's verdict up in
the verdict cache before judging it (`verdicts.evaluate`). A cached verdict pays its source
again without any new evidence, so the cache is part of the judge: it may serve only a verdict
that judging the same source again, on this judge, could not turn in the candidate's favour.

- a pass that outlives its judge (tests/controls/adv_stale_verdict_relu.py): a verdict is keyed
  by JUDGE_VERSION, bumped by hand, and the judge's verdicts changed across 46 commits under
  "3"; a pass stored by a judge with a hole since closed paid its exploit after the fix;
- a lottery ticket (tests/controls/adv_cache_lottery_relu.py): a verdict drawn on fresh seeds is
  a sample; a kernel wrong on some draws passes some evaluations, and a cached pass turned one
  lucky evaluation into a pass for every repeat of the text.

The stored entries are written here as the other judge (or the lucky evaluation) wrote them,
and `measure` stands in for the judge (it says what judging again finds): the cache's decisions
are what is tested, in milliseconds. The controls' real verdicts are in test_attacks.py.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluation.judge import core
from pallasbench_dataset.evaluation.judge.core import JUDGE_VERSION, EvalOptions
from pallasbench_dataset.evaluation.judge.module_analysis import ModuleAnalysisError
from pallasbench_dataset.evaluation.pipeline import driver, verdicts
from pallasbench_dataset.kernels import Variant, tree_dir
from pallasbench_dataset.schema import ErrorType, Status, to_json_dict

from tests import runfixtures as rf
from tests.paths import CONTROLS

FRESH = EvalOptions(num_seeds=5, timing_iterations=5, timing_rounds=1, warmup=1)  # as the reward
FIXED = dataclasses.replace(FRESH, seeds=(1, 2, 3, 4, 5))


def _item(control: str, options: EvalOptions = FRESH, candidate: str | None = None
          ) -> driver.WorkItem:
  return driver.WorkItem(task="relu", variant="candidate", size="small",
                         source=(CONTROLS / f"{control}.py").read_text(),
                         filename=f"{control}.py", options=options, candidate=candidate)


def _record(item: driver.WorkItem, status: Status):
  passed = status is Status.PASS
  return rf.record(None, "relu", "candidate", "small", kernel_sha256=item.kernel_sha256,
                   status=status, correct=passed, device="gpu", judge_version=JUDGE_VERSION,
                   candidate=item.candidate,
                   reasons=() if passed else ("seed 5: not allclose (judged again)",))


class Judge:
  """Stands in for the judge: what judging again finds, and which items it was asked."""

  def __init__(self, status: Status):
    self.status, self.asked = status, []

  def __call__(self, items):
    for item in items:
      self.asked.append(item.candidate)
      yield item, _record(item, self.status), driver.empty_artifacts(item)


def _served(items, cache, judge):
  return [record for record, _ in verdicts.evaluate(items, cache, rf.ENV, judge)]


def _store(cache, item, status):
  cache.put(item, _record(item, status), driver.empty_artifacts(item))


@pytest.fixture
def reward_cache(tmp_path):
  """The verdict cache as the reward consults it (no cluster is started)."""
  reward = rw.KernelReward(device="cpu", size="small", cache_dir=tmp_path / "cache")
  yield reward.cache
  reward.close()


# -- a pass that outlives its judge ----------------------------------------------------------------

def test_a_pass_stored_by_other_judge_code_is_judged_again(tmp_path, monkeypatch):
  cache, item = verdicts.VerdictCache(tmp_path), _item("adv_stale_verdict_relu", FIXED, "c-1")
  with monkeypatch.context() as other_judge:  # its JUDGE_VERSION is ours; its code is not
    other_judge.setattr(verdicts, "judge_code", lambda: "0" * 64, raising=False)
    _store(cache, item, Status.PASS)
  judge = Judge(Status.REJECTED)  # today's judge: the work is done outside the kernel
  (record,) = _served([item], cache, judge)
  assert judge.asked == ["c-1"]
  assert record.status is Status.REJECTED and not record.cached


def test_the_judge_code_is_every_python_file_of_the_package_and_the_trees(tmp_path):
  """Any change to a file the verdict depends on (its bytes, its name, a new file) is other
  code; files that are not Python are not read."""
  package, tree = tmp_path / "pallasbench_dataset", tmp_path / "kernels_gpu"
  for folder in (package / "judge", tree):
    folder.mkdir(parents=True)
  (package / "judge" / "core.py").write_text("JUDGE_VERSION = '3'\n")
  (tree / "relu.py").write_text("def kernel(x): ...\n")
  (tree / "notes.txt").write_text("not code")
  digests = [verdicts.code_digest([package, tree])]
  (tree / "notes.txt").write_text("still not code")
  assert verdicts.code_digest([package, tree]) == digests[0]
  (package / "judge" / "core.py").write_text("JUDGE_VERSION = '3'  # a hole closed\n")
  digests.append(verdicts.code_digest([package, tree]))
  (tree / "relu.py").rename(tree / "gelu.py")
  digests.append(verdicts.code_digest([package, tree]))
  (package / "filters.py").write_text("")
  digests.append(verdicts.code_digest([package, tree]))
  assert len(set(digests)) == 4
  assert len(verdicts.judge_code()) == 64 and verdicts.judge_code() == verdicts.judge_code()


def test_the_judges_code_digest_reads_the_package_and_both_shipped_trees():
  """The roots judge_code digests: the package the judge runs and the kernel trees the copy
  check exports (a tuned config or a kernel edit changes what a verdict says)."""
  package = pathlib.Path(verdicts.__file__).resolve().parents[2]
  roots = [package, tree_dir(Variant.GPU).resolve(), tree_dir(Variant.TPU).resolve()]
  assert package.name == "pallasbench_dataset" and (package / "evaluation").is_dir()
  assert verdicts.judge_code() == verdicts.code_digest(roots)


def test_an_install_without_a_tree_digests_what_it_has(monkeypatch):
  """A missing kernel tree (an install of the package alone) leaves it out of the digest, and
  only it: the package and the other tree are still read, whichever tree is missing."""
  package = pathlib.Path(verdicts.__file__).resolve().parents[2]
  trees = {v: tree_dir(v).resolve() for v in (Variant.GPU, Variant.TPU)}
  for missing, kept in ((Variant.TPU, Variant.GPU), (Variant.GPU, Variant.TPU)):

    def without(variant, missing=missing):
      if variant is missing:
        raise FileNotFoundError(f"kernels_{variant.value} is not importable")
      return tree_dir(variant)

    monkeypatch.setattr(verdicts, "tree_dir", without)
    assert verdicts.judge_code.__wrapped__() == verdicts.code_digest([package, trees[kept]])
  monkeypatch.setattr(verdicts, "tree_dir", lambda variant: without(Variant.GPU))
  assert verdicts.judge_code.__wrapped__() == verdicts.code_digest([package])


def test_a_verdict_of_this_judge_code_is_served(reward_cache):
  """The honest neighbour: the cache still pays what this judge stored (fixed seeds)."""
  cache, item = reward_cache, _item("adv_pos_rejudged_relu", FIXED, "c-1")
  _store(cache, item, Status.PASS)
  judge = Judge(Status.PASS)
  (record,) = _served([item], cache, judge)
  assert judge.asked == [] and record.status is Status.PASS and record.cached


# -- a lottery ticket ------------------------------------------------------------------------------

def test_a_pass_on_fresh_seeds_is_judged_again_for_a_reward(reward_cache):
  cache, item = reward_cache, _item("adv_cache_lottery_relu", FRESH, "c-1")
  _store(cache, item, Status.PASS)  # the lucky evaluation
  judge = Judge(Status.INCORRECT)   # the next draw finds it wrong
  (record,) = _served([item], cache, judge)
  assert judge.asked == ["c-1"]
  assert record.status is Status.INCORRECT and not record.cached
  again = _item("adv_cache_lottery_relu", FRESH, "c-2")  # the failure, a counterexample, stays
  (record,) = _served([again], cache, Judge(Status.PASS))
  assert record.status is Status.INCORRECT and record.cached


def test_a_failure_on_fresh_seeds_is_served_to_a_reward(reward_cache):
  """A counterexample holds whatever seeds come next: a cached failure costs nothing."""
  cache, item = reward_cache, _item("adv_cache_lottery_relu", FRESH, "c-1")
  _store(cache, item, Status.INCORRECT)
  judge = Judge(Status.PASS)
  (record,) = _served([item], cache, judge)
  assert judge.asked == [] and record.status is Status.INCORRECT and record.cached


# -- a verdict the host's load decided (red team round 14, class 16) --------------------------------

def _kept_out(cache, item, record):
  """`record` was put: nothing is stored or served."""
  key = verdicts.key_for(item, record.environment)
  assert cache.get(key) is None and cache.lookup(item, record.environment) is None


@pytest.mark.parametrize("status,error_type,reason", [
    (Status.TIMEOUT, "timeout", "export (import, trace, lower) took longer than 60 s; the "
     "exporter was killed"),
    (Status.REJECTED, "timeout", "the correctness runs stage ran past its 120 s budget; its "
     "process was killed"),
    (Status.REJECTED, "timeout", "compile stage: the compile did not finish within the 30 s "
     "compile budget; it was killed"),
    (Status.ERROR, "out_of_memory", "RESOURCE_EXHAUSTED: out of memory allocating 8 GiB"),
], ids=["timeout", "stage_budget", "compile_budget", "out_of_memory"])
def test_a_verdict_the_host_s_load_decided_is_judged_again(reward_cache, status, error_type,
                                                            reason):
  cache, item = reward_cache, _item("adv_pos_eager_setup_relu", FRESH, "c-1")
  starved = dataclasses.replace(  # as the judge and the driver write them
      _record(item, status), correct=False,
      reasons=(reason,) if status is Status.REJECTED or not error_type else (),
      error=reason if error_type else None,
      error_type=None if error_type is None else ErrorType(error_type))
  cache.put(item, starved, driver.empty_artifacts(item))  # the batch beside a hog
  _kept_out(cache, item, starved)
  key = verdicts.key_for(item, starved.environment)        # nor served, stored by older code
  path = cache._path(key)  # pylint: disable=protected-access
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps({"key": key.fields(), "record": to_json_dict(starved),
                              "artifacts": to_json_dict(driver.empty_artifacts(item))}))
  assert cache.get(key) is not None
  judge = Judge(Status.PASS)                               # an idle host: the honest verdict
  (record,) = _served([_item("adv_pos_eager_setup_relu", FRESH, "c-2")], cache, judge)
  assert judge.asked == ["c-2"] and record.status is Status.PASS and not record.cached


# Red team round 15: the analysis helper's deaths are the host's too. The helper is killed, or
# aborts, for reasons its neighbours decide: LLVM's thread pool aborts when the sandboxed
# user's task slots are gone (adv_thread_hog_relu, tests/judge/demo_thread_griefing.py: an
# honest relu got the first reason below), the OOM killer picks it, a loaded core stretches its
# 60 s. The helper names what ended it (`ModuleAnalysisError.ended_by`, set in
# analysis_process' `_wait`: test_module_analysis checks each), the judge's `Unanalysable`
# makes it the record's error type, and the cache keeps no such record whatever its reasons say.
@pytest.mark.parametrize("reason,ended_by", [
    ("the module analysis process died with SIGABRT while analysing the module",
     ErrorType.CRASH),
    ("the module analysis process was killed by SIGKILL while analysing the module",
     ErrorType.CRASH),
    ("the module analysis took longer than 60 s while analysing the module", ErrorType.TIMEOUT),
    ("the module analysis outgrew 4.0 GiB (4.1 GiB) while analysing the module",
     ErrorType.OUT_OF_MEMORY),
], ids=["aborted", "killed", "analysis_time", "analysis_memory"])
def test_an_analysis_the_neighbours_ended_is_judged_again(reward_cache, reason, ended_by):
  cache, item = reward_cache, _item("adv_pos_eager_setup_relu", FRESH, "c-1")
  failure = core.Unanalysable(ModuleAnalysisError(
      f"{reason}: the artifact's module cannot be read safely", ended_by))
  assert failure.status is Status.REJECTED and failure.error_type is ended_by
  starved = dataclasses.replace(_record(item, failure.status), correct=False,
                                error_type=failure.error_type, error=str(failure),
                                reasons=(str(failure),))
  cache.put(item, starved, driver.empty_artifacts(item))  # the batch beside a thread hog
  _kept_out(cache, item, starved)
  judge = Judge(Status.PASS)                               # an idle host: the honest verdict
  (record,) = _served([_item("adv_pos_eager_setup_relu", FRESH, "c-2")], cache, judge)
  assert judge.asked == ["c-2"] and record.status is Status.PASS and not record.cached


def test_a_module_the_analysis_refused_is_still_a_kept_rejection(reward_cache):
  """A refusal no limit or signal ended (the module nested past the analysis' limits) is the
  artifact's own verdict: stored and served."""
  cache, item = reward_cache, _item("adv_pos_eager_setup_relu", FRESH, "c-1")
  failure = core.Unanalysable(ModuleAnalysisError("calls and regions nested deeper than 64"))
  assert failure.error_type is None
  refused = dataclasses.replace(_record(item, failure.status), correct=False,
                                reasons=(str(failure),))
  cache.put(item, refused, driver.empty_artifacts(item))
  judge = Judge(Status.PASS)
  (record,) = _served([_item("adv_pos_eager_setup_relu", FRESH, "c-2")], cache, judge)
  assert judge.asked == [] and record.status is Status.REJECTED and record.cached


def test_a_rejection_for_another_reason_is_still_stored_and_served(reward_cache):
  """Only the load's verdicts are kept out: a rejection that names a budget in passing (the
  analysis's op budget) is the artifact's own."""
  cache, item = reward_cache, _item("adv_pos_eager_setup_relu", FRESH, "c-1")
  refused = dataclasses.replace(_record(item, Status.REJECTED), correct=False, reasons=(
      "the module analysis ran past its op budget of 2000000 ops",))
  cache.put(item, refused, driver.empty_artifacts(item))
  judge = Judge(Status.PASS)
  (record,) = _served([_item("adv_pos_eager_setup_relu", FRESH, "c-2")], cache, judge)
  assert judge.asked == [] and record.status is Status.REJECTED and record.cached



def test_a_rejection_a_budget_ended_is_kept_out_whatever_its_reasons_say(reward_cache):
  """The record's error type decides, not its reasons: a rejection whose stage ran past its
  budget (error type `timeout`, as the judge writes it) was decided, in part, by the host's
  load, and is neither stored nor served, whatever its first reason says."""
  cache, item = reward_cache, _item("adv_pos_eager_setup_relu", FRESH, "c-1")
  starved = dataclasses.replace(_record(item, Status.REJECTED), correct=False,
                                error_type=ErrorType.TIMEOUT, reasons=(
      "the kernel reads its inputs outside their blocks",
      "the correctness runs stage ran past its 120 s budget; its process was killed"))
  assert verdicts.load_decided(starved)
  cache.put(item, starved, driver.empty_artifacts(item))
  _kept_out(cache, item, starved)


@pytest.mark.parametrize("status,error_type,reason", [
    (Status.INCORRECT, None, "seed 2: not allclose; the kernel printed 'the correctness runs "
     "stage ran past its 120 s budget'"),
    (Status.ERROR, "runtime_error", "ValueError: the kernel indexes past its block"),
], ids=["incorrect_naming_a_budget", "runtime_error"])
def test_a_failure_of_the_kernel_s_own_is_stored_and_served_whatever_it_says(
    reward_cache, status, error_type, reason):
  """Only a timeout, a rejection for a stage's budget and memory exhausted are kept out: a
  failure of the kernel's own (a wrong answer, an error it raised) is stored and served, also
  where its reasons (which a candidate's output may fill) name a budget, so that a failing
  candidate cannot buy itself another draw on fresh seeds."""
  cache, item = reward_cache, _item("adv_cache_lottery_relu", FRESH, "c-1")
  failed = dataclasses.replace(
      _record(item, status), correct=False, reasons=() if error_type else (reason,),
      error=reason if error_type else None,
      error_type=None if error_type is None else ErrorType(error_type))
  assert not verdicts.load_decided(failed)
  cache.put(item, failed, driver.empty_artifacts(item))
  judge = Judge(Status.PASS)
  (record,) = _served([_item("adv_cache_lottery_relu", FRESH, "c-2")], cache, judge)
  assert judge.asked == [] and record.status is status and record.cached

def test_twins_in_one_run_share_one_measurement_of_a_pass(reward_cache):
  """One draw for every copy of a source in a run: each copy's expected reward is the
  kernel's, and the run judges it once."""
  cache = reward_cache
  items = [_item("adv_pos_rejudged_relu", FRESH, f"c-{n}") for n in range(3)]
  judge = Judge(Status.PASS)
  records = _served(items, cache, judge)
  assert judge.asked == ["c-0"]
  assert [r.status for r in records] == [Status.PASS] * 3
  assert [r.cached for r in records] == [False, True, True]


def test_a_population_run_keeps_its_fresh_seed_passes(tmp_path):
  """The default cache (population runs, the suite) pays no reward: a resubmitted population
  costs nothing but what changed, its passes included."""
  cache, item = verdicts.VerdictCache(tmp_path), _item("adv_pos_rejudged_relu", FRESH, "c-1")
  _store(cache, item, Status.PASS)
  judge = Judge(Status.PASS)
  (record,) = _served([item], cache, judge)
  assert judge.asked == [] and record.cached


# -- a record of another text (red team round 21, finding 8) ---------------------------------------

def test_a_record_of_another_text_is_never_stored_under_this_one(reward_cache):
  """Whoever hands the cache a record (a stage of another caller's item, a bug), it stores a
  verdict only under the text it was measured on."""
  cache, item = reward_cache, _item("adv_cache_lottery_relu", FRESH, "c-1")
  other = _item("aborts_relu", FRESH, "c-1")
  record = _record(other, Status.INCORRECT)
  cache.put(item, record, driver.empty_artifacts(item))
  _kept_out(cache, item, record)
  cache.put(other, record, driver.empty_artifacts(other))  # its own text: stored
  assert cache.lookup(other, record.environment) is not None
