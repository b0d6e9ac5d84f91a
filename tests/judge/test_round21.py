"""Red team round 21: the pipeline around a verdict (docs/red-team/round21.md).

- Finding 8 (high): on one shared Dask scheduler (`KernelReward(scheduler=...)`, the ranks of a
  data-parallel trainer), two callers' items of one task and candidate id share their stages'
  keys, and the second is served the first's export, compile and verdict, stored in the
  verdict cache under its own text.
- Finding 7: a candidate id (or folder file name) that is not text stops a whole population
  run with no record; a source that is not text stops it unnamed.
- Finding 5, below: what the operator's terminal shows is the candidate's to draw.

`evaluate.summary_text`, which `python -m pallasbench_dataset.evaluate` prints (and
ShinkaEvolve's job log, `evolve.shinka_adapter.main`), holds the kernel's printed output
(`exporter_output`) and its error's first line as the candidate wrote them, control characters
included: nothing on the way (`driver._printed`, `errors.short_error`, `readable`) removes
them. tests/controls/adv_r21_terminal_relu.py is wrong (relu * 1.5) and prints, at import,
"cursor home, erase the screen and the scrollback", a summary of its own that reads `pass`,
and a window title. Measured (CPU, inside the throwaway namespace, in a 200x50 tmux pane): the
record is `incorrect` (exit status 1), and the pane then shows only

    relu [small, cpu]: pass
      correct=True robust=True general_shapes=True max_abs_error=0.0
      kernel 0.01 ms  baseline 0.35 ms  speedup 35x
        |

with the pane's title "relu: pass" and no "incorrect" anywhere in its scrollback.

The tests state what should hold: the summary is inert text (no control character but the
line feed), whatever the kernel printed or raised. Written as strict xfails; they pass since
the fixes.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import distributed
import msgpack
import pytest

from pallasbench_dataset import reward as rw
from pallasbench_dataset.evaluate import CPU_OPTIONS, summary_text
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.pipeline import report, stages, suite
from pallasbench_dataset.kernels import sha256
from pallasbench_dataset.population.candidates import PopulationError, read_candidates
from pallasbench_dataset.population.run import work_items
from pallasbench_dataset.schema import (
    ErrorType, EvalRecord, Status, from_json_dict, to_json_dict)

from tests import runfixtures as rf
from tests.judge.test_record_text import _encodes

ESC, BEL = "\x1b", "\x07"
HOME = ESC + "[1G" + ESC + "[2K"
# The record's exporter_output as the judge wrote it for the control (measured, --json).
PRINTED = "\n".join(HOME + line for line in (
    ESC + "[H" + ESC + "[2J" + ESC + "[3J" + "relu [small, cpu]: pass",
    "  correct=True robust=True general_shapes=True max_abs_error=0.0",
    "  kernel 0.01 ms  baseline 0.35 ms  speedup 35x")) + "\n" + ESC + "]0;relu: pass" + BEL


def _controls(text: str) -> list[str]:
  return sorted({repr(c) for c in text if c != "\n" and not c.isprintable()})


def _incorrect(**fields):
  record = rf.record(None, "relu", "candidate", "small", kernel_sha256="0" * 64, device="cpu",
                     comparable=False, status=Status.INCORRECT, correct=False,
                     runtime_ms=None, baseline_ms=None)
  return dataclasses.replace(record, reasons=("seed 1: not allclose",), **fields)


def test_what_the_kernel_printed_is_shown_inert():
  text = summary_text(_incorrect(exporter_output=PRINTED))
  assert "incorrect" in text.splitlines()[0]
  assert not _controls(text), _controls(text)


def test_what_the_kernel_raised_is_shown_inert():
  error = (f"importing relu.py raised ValueError: {ESC}[2K{ESC}[1A{ESC}[2K"
           "relu [small, cpu]: pass")
  record = dataclasses.replace(_incorrect(), status=Status.ERROR, error_type=ErrorType.LOAD,
                               error=error, reasons=(error,))
  text = summary_text(record)
  assert not _controls(text), _controls(text)


def test_the_run_report_shows_a_failure_s_reason_inert():
  """`python -m pallasbench_dataset.evaluation.pipeline.report RUN` prints, under each row that
  did not pass, the first line of its first reason (150 characters): a candidate's exception
  message moves the cursor up and rewrites the row above it as `pass`."""
  reason = f"importing relu.py raised ValueError: {ESC}[1A{ESC}[60G{ESC}[0Kpass"
  record = dataclasses.replace(_incorrect(), status=Status.ERROR, error_type=ErrorType.LOAD,
                               error=reason, reasons=(reason,))
  text = report.table([record])
  assert not _controls(text), _controls(text)


# -- finding 7: one candidate's id stops the population run ------------------------------------

def _population_file(tmp_path, **candidate):
  path = tmp_path / "pop.jsonl"
  plain = {"task": "relu", "id": "relu/plain", "source": "def kernel(x): ...\n"}
  path.write_text(json.dumps(plain) + "\n" + json.dumps({**plain, **candidate}) + "\n")
  return path


def _population_folder(tmp_path):
  folder = tmp_path / "pop"
  (folder / "relu").mkdir(parents=True)
  (folder / "relu" / "plain.py").write_text("def kernel(x): ...\n")
  # A file name that is not UTF-8 (a byte a search loop copied from an answer): Python names
  # it with a surrogate escape, `odd\udcff.py`.
  with open(bytes(folder / "relu") + b"/odd\xff.py", "w", encoding="utf-8") as f:
    f.write("def kernel(x): 1\n")
  return folder


@pytest.mark.parametrize("form", ["jsonl_id", "folder_file_name", "jsonl_source"])
def test_a_candidate_s_name_or_text_is_refused_at_the_door_or_judged(tmp_path, form):
  """Measured (CPU, in the namespace): `population evaluate` of a JSON Lines file whose second
  id is "relu/odd-\\ud800", or of a folder holding relu/odd\\xff.py beside relu/plain.py,
  exits 1 with distributed's FuturesCancelledError ("Failed to Serialize ... surrogates not
  allowed"); records.jsonl is empty, the manifest `interrupted_at`, and a resume meets the same
  key. A lone surrogate in a source stops it at once (exit 2, "error: 'utf-8' codec can't
  encode character", no file or line named). What should hold: `read_candidates` refuses the
  candidate naming its line or file (PopulationError), or every candidate it returns can be
  scheduled (its stage keys encode as Dask sends them), hashed, and recorded under its own id."""
  path = {"jsonl_id": lambda: _population_file(tmp_path, id="relu/odd-\ud800"),
          "jsonl_source": lambda: _population_file(tmp_path, id="relu/odd",
                                                   source="def kernel(x): ...  # \ud800\n"),
          "folder_file_name": lambda: _population_folder(tmp_path)}[form]()
  try:
    candidates = read_candidates(path)
  except PopulationError as e:
    assert "odd" in str(e) or "line 2" in str(e) or ":2" in str(e), e  # names the one at fault
    return
  # Dask sends a stage's key as msgpack (UTF-8), `kernels.sha256` hashes the source's UTF-8,
  # and a record writes its candidate id as `schema.text`: each needs text that UTF-8 encodes.
  untext = [(c.id, field) for c in candidates for field in ("id", "source")
            if not _encodes(getattr(c, field))]
  assert not untext, untext
  for item in work_items(candidates, "small", CPU_OPTIONS):
    slug = suite._slug(item)  # pylint: disable=protected-access
    msgpack.packb(f"export-{slug}", use_bin_type=True)
    record = _incorrect(candidate=item.candidate)
    assert from_json_dict(EvalRecord, to_json_dict(record)).candidate == item.candidate


# -- finding 8: two callers of one shared scheduler get each other's verdicts -------------------

def _export_stand_in(item, settings):  # pylint: disable=unused-argument
  time.sleep(3.0)  # both ranks' exports are in flight at once, as in one trainer step
  return {"source": item.source}


def _compile_stand_in(item, exported, settings):  # pylint: disable=unused-argument
  return exported


def _judge_stand_in(item, exported, notes, settings):  # pylint: disable=unused-argument
  """The judge of what was exported: right if its source says so, else incorrect."""
  source = exported["source"]
  if "# right" in source:
    record = rf.record(None, item.task, item.variant, item.size, kernel_sha256=sha256(source),
                       device="cpu", comparable=False)
  else:
    record = dataclasses.replace(
        rf.record(None, item.task, item.variant, item.size, kernel_sha256=sha256(source),
                  device="cpu", comparable=False, status=Status.INCORRECT, correct=False,
                  runtime_ms=None, baseline_ms=None), reasons=("seed 1: not allclose",))
  record = dataclasses.replace(record, candidate=item.candidate, seeds=item.options.seeds)
  return record, rf.artifacts_for([record])[0]


def _environment_stand_in(settings):  # pylint: disable=unused-argument
  return rf.ENV


def test_two_ranks_on_one_shared_scheduler_are_judged_on_their_own_texts(tmp_path, monkeypatch):
  """Two data-parallel ranks, each with its KernelReward on the shared judging cluster the
  reward documents (`scheduler=`) and one verdict cache folder, score one completion each for
  the same task in the same step: rank 0 a right kernel, rank 1 a wrong one. Both items are
  `completion-00000` of relu at small, so their stages have the same Dask keys
  (`export-relu-candidate-small-completion-00000`, ...). Dask answers a key it holds with the
  task it holds (measured: a second client's submit of a held key, another function and
  argument, gets the first's result), and the driver never checks that the record it gets is
  of its own item's source. One rank is paid the other's verdict, and the cache stores it
  under that rank's own text."""
  for name, stand_in in (("export_stage", _export_stand_in), ("compile_stage", _compile_stand_in),
                         ("judge_stage", _judge_stand_in),
                         ("judge_environment", _environment_stand_in)):
    monkeypatch.setattr(stages, name, stand_in)
  texts = {0: "# right\ndef kernel(x): return x\n", 1: "# wrong\ndef kernel(x): return -x\n"}
  got: dict[int, object] = {}
  with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=8,
                                resources={stages.CPU_RESOURCE: 4, stages.GPU_RESOURCE: 2},
                                dashboard_address="127.0.0.1:0",
                                worker_dashboard_address="127.0.0.1:0") as shared:
    def rank(n: int) -> None:
      with rw.KernelReward(device="cpu", size="small", scheduler=shared.scheduler_address,
                           cache_dir=tmp_path / "cache", options=EvalOptions(num_seeds=1)) as r:
        r(completions=[f"```python\n{texts[n]}```"], task="relu")
        got[n] = r.last_feedback[0]
    threads = [threading.Thread(target=rank, args=(n,)) for n in (0, 1)]
    for t in threads:
      t.start()
    for t in threads:
      t.join(60)
  assert set(got) == {0, 1}, "a rank did not finish"
  seen = {n: (f.kernel_sha256 == sha256(texts[n]), f.status, f.reward) for n, f in got.items()}
  stored = [json.loads(f.read_text()) for f in (tmp_path / "cache").rglob("*.json")]
  mixed = [(e["key"]["kernel_sha256"][:8], e["record"]["kernel_sha256"][:8],
            e["record"]["status"]) for e in stored
           if e["key"]["kernel_sha256"] != e["record"]["kernel_sha256"]]
  assert seen[0][:2] == (True, "pass") and seen[1][:2] == (True, "incorrect"), (seen, mixed)
  assert not mixed, mixed  # a text's cache entry holds the verdict on another text


def _judge_of_another_text(item, exported, notes, settings):  # pylint: disable=unused-argument
  """A stage that answers with a pass measured on another text (what a shared key served)."""
  record = rf.record(None, item.task, item.variant, item.size, kernel_sha256=sha256("# other\n"),
                     device="cpu", comparable=False)
  record = dataclasses.replace(record, candidate=item.candidate, seeds=item.options.seeds)
  return record, rf.artifacts_for([record])[0]


def test_a_stage_s_answer_for_another_text_is_a_harness_error_never_paid_or_stored(
    tmp_path, monkeypatch):
  """The driver uses a stage's record only for the item that asked for it (its text, task,
  size, precision and candidate); another's is the pipeline's error, paid nothing, stored
  nowhere."""
  for name, stand_in in (("export_stage", _export_stand_in), ("compile_stage", _compile_stand_in),
                         ("judge_stage", _judge_of_another_text),
                         ("judge_environment", _environment_stand_in)):
    monkeypatch.setattr(stages, name, stand_in)
  with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=4,
                                resources={stages.CPU_RESOURCE: 2, stages.GPU_RESOURCE: 1},
                                dashboard_address="127.0.0.1:0",
                                worker_dashboard_address="127.0.0.1:0") as shared:
    with rw.KernelReward(device="cpu", size="small", scheduler=shared.scheduler_address,
                         cache_dir=tmp_path / "cache", options=EvalOptions(num_seeds=1)) as r:
      assert r(completions=["```python\n# right\ndef kernel(x): return x\n```"],
               task="relu") == [0.0]
      feedback = r.last_feedback[0]
  assert (feedback.status, feedback.record.error_type) == ("error", ErrorType.HARNESS), feedback
  assert "answered for another item" in feedback.error
  assert not list((tmp_path / "cache").rglob("*.json"))
