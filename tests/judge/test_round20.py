"""Red team round 20 (docs/red-team/round20.md).

Round 17's lottery (a kernel that spins on its unlucky draws, so that a limit, not a wrong
answer, ends them and the cache keeps nothing) was closed in session 33 by judging such a
failure once more, alone, "on the same draw", and holding it when it recurs: the driver draws
the correctness seeds (`verdicts._drawn`), so the second judgement sees the same inputs. Three
things of the first judgement are not the same in the second (1 to 3); 4 and 5 are apart:

1. the program. Judging again exports again, and the exporter runs the candidate's file
   again: what it exports is the candidate's choice each time (a coin from `os.urandom` at
   import, measured: one text, one set of --seeds, `timeout` then `pass`,
   tests/controls/adv_r20_export_coin_relu.py). A lottery that flips for its program is held
   only when the coin comes up the same twice;
2. the timing stage's inputs. Every timed call draws fresh OS seeds (`core.TimingSets`), in the
   second judgement too, so a kernel whose unlucky draws fall in the timing stage (53 timed
   calls on a GPU against about a dozen correctness draws) gets a fresh lottery for them
   (measured: one deterministic text, one set of --seeds, `pass` and `timeout` in its timing
   stage, tests/controls/adv_r20_timing_spin_relu.py);
3. and, on a GPU, not even the same artifact on the same inputs: device code may read the
   GPU's clocks (inline PTX `mov.u32 $0, %clock;` declares nothing, so kernel_state passes
   it), so a kernel can flip its own coin at run time. The cuda export of such a kernel is
   read without a finding (measured: tests/controls/adv_r20_clock_coin_relu.py). A fix that
   replays the first judgement exactly still replays a coin.
4. (GPU, reasoned; the rule measured) the judge process that ran a kernel memcheck then
   caught writing outside its buffers is kept for the next item: memcheck runs after the
   correctness runs, which ran the kernel unwatched about a dozen times in that process, and
   `driver.device_suspect` replaces a judge after an `error` only, never after a rejection
   (tests/controls/adv_r20_oob_writer_relu.py: such a writer, which a CPU judge passes).
5. (a false positive) round 19's refusal of declared encodings other than UTF-8 refuses UTF-8
   itself under the names Python accepts for it: `tokenize.detect_encoding` normalises only
   `utf-8`/`utf_8`, so `# -*- coding: utf8 -*-` is "the utf8 encoding" and an honest file is
   not judged (the CLI exits 2; a population folder holding it is refused whole).

Each test states what should hold; written as strict xfails, they pass since the fixes
(round20.md, "Since").
"""

from __future__ import annotations

import dataclasses
import functools
import types

import pytest

from pallasbench_dataset import kernels
from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluation.judge import budgets, module_analysis
from pallasbench_dataset.evaluation.judge import core as judge
from pallasbench_dataset.evaluation.pipeline import driver, verdicts
from pallasbench_dataset.kernels import load_module
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.schema import ErrorType, FilterResult, Status
from pallasbench_dataset.tasks import get_task

from tests import runfixtures as rf
from tests.judge import test_building_blocks as bb
# Fixtures of the modules whose stand-ins these tests use.
from tests.judge.test_building_blocks import analysis  # noqa: F401  pylint: disable=unused-import
from tests.judge.test_cache_attacks import (  # noqa: F401  pylint: disable=unused-import
    FRESH, _item, _record, reward_cache)
from tests.paths import CONTROLS

COIN = "adv_r20_export_coin_relu"


class _Exporter:
  """Stands in for the pipeline as the candidate's program sees it: each `measure` call of an
  item without its export exports the text again, and the control's import draws its coin
  again (scripted here: heads, then tails, as the CLI measured them in round 20); heads spins
  on the driver's draw until the correctness stage's budget ends it, tails is plain relu and
  passes. As `suite._schedule` does (`_with_its_export`, tested in test_in_process), a record
  the load may have decided comes back with the export its judge ran, and an item that
  carries its export is not exported again (`driver.export`)."""

  def __init__(self, *coins):
    self.coins, self.exports = list(coins), []

  def __call__(self, items):
    for it in items:
      heads = it.exported.heads if it.exported is not None else self.coins[len(self.exports)]
      self.exports.append((it.candidate, it.options.seeds, heads))
      record = dataclasses.replace(_record(it, Status.PASS), seeds=it.options.seeds)
      if heads:
        spun = budgets.overrun(budgets.CORRECTNESS, 120.0)
        record = dataclasses.replace(record, status=Status.REJECTED, correct=False,
                                     reasons=(spun,), error_type=ErrorType.TIMEOUT)
        it = dataclasses.replace(it, exported=types.SimpleNamespace(failure=None, heads=heads))
      yield it, record, driver.empty_artifacts(it)


# -- 1. judged again, the candidate's program is exported again --------------------------------

def test_a_limit_s_failure_is_judged_again_on_the_program_it_was_ended_on(reward_cache):
  cache = reward_cache
  exporter = _Exporter(True, False)  # the first export spins on the draw; the second is relu
  (record,) = [r for r, _ in verdicts.evaluate([_item(COIN, FRESH, "c-1")], cache, rf.ENV,
                                               exporter)]
  (first, drawn, _), (again, same, _) = exporter.exports
  assert (first, again) == ("c-1", "c-1") and same == drawn  # alone, on the same seeds
  held = cache.lookup(_item(COIN, FRESH, "c-2"), rf.ENV)
  assert rw.reward_of(record) == 0.0 and held is not None, (
      f"the draw that spun was judged again on a new export: {record.status.value}, paid "
      f"{rw.reward_of(record):.2f}; the next batch is {'held' if held else 'judged afresh'}")


# -- 2. judged again, the timing stage draws new inputs ----------------------------------------

def _timed_seeds(monkeypatch):
  """The seeds of every input set the timing stage gives the candidate, as it draws them."""
  drawn: list[tuple[int, ...]] = []
  original = judge.TimingSets.args

  def args(self, call):
    out = original(self, call)
    if not self.whose:  # the candidate's sets (the baseline's are its own)
      drawn.append(self._given[call])  # pylint: disable=protected-access
    return out
  monkeypatch.setattr(judge.TimingSets, "args", args)
  return drawn


def test_judged_again_on_the_same_seeds_the_timing_stage_sees_the_same_inputs(
    analysis, monkeypatch):  # pylint: disable=redefined-outer-name
  drawn = _timed_seeds(monkeypatch)
  report = bb._report(bb._entry(artifacts=bb._artifacts()))  # pylint: disable=protected-access
  # The driver's draw: the seeds and the secret it keeps to judge the same draws again.
  item = dataclasses.replace(bb._item(bb._outcome(report), seeds=(3, 1)), secret=7)  # pylint: disable=protected-access
  first, _ = judge.evaluate_artifact(item, bb._ctx())  # pylint: disable=protected-access
  timed_first, drawn[:] = list(drawn), []
  again, _ = judge.evaluate_artifact(item, bb._ctx())  # pylint: disable=protected-access
  assert first.status is again.status is Status.PASS and first.seeds == again.seeds
  assert timed_first and drawn == timed_first, (
      f"on the seeds {first.seeds} both times, the timed calls got {timed_first} and then "
      f"{drawn}")


# -- 3. device code flips its own coin ---------------------------------------------------------

def test_device_code_that_reads_a_clock_is_no_pure_function_of_its_inputs():
  spec = get_task("relu")
  dims = spec.dims("small")
  module = load_module((CONTROLS / "adv_r20_clock_coin_relu.py").read_text(),
                       "adv_r20_clock_coin_relu.py")
  text = export_for("cuda", functools.partial(module.kernel, interpret=False),
                    *spec.input_structs("small")).mlir_module()
  report = module_analysis.analyze_module(text)
  reasons = module_analysis.module_reasons(report, task_flops=spec.flops(dims),
                                           output_elements=512 * 512,
                                           task_bytes=spec.io_bytes(dims))
  assert [k.backend for k in report.kernels] == ["triton"] and "%clock" in text
  assert report.stateful_ops and reasons, (
      f"a kernel whose spin follows %clock: stateful ops {report.stateful_ops}, reasons {reasons}")


# -- 4. a judge whose device memory a kernel wrote past its buffers is kept -------------------

def test_a_judge_that_ran_a_kernel_writing_outside_its_buffers_is_replaced():
  item = _item("adv_pos_eager_setup_relu", FRESH, "c-1")
  found = ("the kernel accessed device memory outside its buffers (compute-sanitizer memcheck: "
           "========= Invalid __global__ write of size 4 bytes)")
  record = dataclasses.replace(
      _record(item, Status.REJECTED), correct=True, robust=False, reasons=(found,),
      filters=(FilterResult(name="memcheck", passed=False, value=None, threshold=None,
                            detail="errors: Invalid __global__ write of size 4 bytes"),))
  assert record.compile is not None and record.compile.compile_s is not None  # it ran here
  assert driver.device_suspect(record), (
      f"{record.status.value} by memcheck ({found[:60]}...): the judge is kept for the next item")


# -- 5. UTF-8 under another of its names ------------------------------------------------------

@pytest.mark.parametrize("name", ["utf8", "UTF8", "u8"])
def test_a_utf8_file_declared_by_another_name_of_utf8_is_read(tmp_path, name):
  control = (CONTROLS / "adv_r20_pos_utf8_alias_relu.py").read_text(encoding="utf-8")
  path = tmp_path / "declared_relu.py"
  path.write_text(control.replace("coding: utf8", f"coding: {name}", 1), encoding="utf-8")
  compile(path.read_bytes(), str(path), "exec")  # Python reads it (bytes: its declaration)
  try:
    read = kernels.read_source(path)[0]
  except kernels.KernelLoadError as e:
    read = f"refused: {e}"
  assert read == path.read_text(encoding="utf-8"), f"Python runs it; read_source: {read[:120]}"
