"""The pipeline's run folder and stage budgets: one writer per run folder, twin evaluations
that differ in size measured apart, and a stage's budget ending a candidate's evaluation in a
verdict the cache keeps."""

import textwrap
import types

import pytest

from pallasbench_dataset.evaluation.judge import budgets
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.evaluation.pipeline import suite, verdicts
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, empty_artifacts
from pallasbench_dataset.kernels import sha256
from pallasbench_dataset.schema import Artifacts, Status

from tests import runfixtures as rf, two_cores
from tests.paths import CONTROLS

OPTIONS = EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1)


def test_a_run_folder_has_one_writer_at_a_time(tmp_path):
  """While one run holds the folder, a second is refused (a shared lock would let both append
  to one records.jsonl); once the first ends, the folder is free again."""
  with suite._single_writer(tmp_path):  # pylint: disable=protected-access
    with pytest.raises(FileExistsError, match="being written by another run"):
      with suite._single_writer(tmp_path):  # pylint: disable=protected-access
        pass
  with suite._single_writer(tmp_path):  # pylint: disable=protected-access
    pass


def _item(size: str) -> WorkItem:
  return WorkItem(task="relu", variant="candidate", size=size, source="the same source",
                  filename="c.py", options=OPTIONS, candidate=f"relu/at-{size}")


def _measured(item: WorkItem):
  record = rf.record(types.SimpleNamespace(), "relu", "candidate", item.size,
                     kernel_sha256=sha256(item.source), candidate=item.candidate)
  return item, record, Artifacts(task="relu", variant="candidate", size=item.size, jaxpr="j",
                                 stablehlo=None, triton_ir=None, ptx=None,
                                 candidate=item.candidate)


def test_twin_evaluations_at_two_sizes_are_each_measured(tmp_path):
  """One kernel source at two sizes is two measurements: neither size may get the other's
  record."""
  small, medium = _item("small"), _item("medium")
  measured = []

  def measure(items):
    measured.extend(item.size for item in items)
    return [_measured(item) for item in items]
  out = list(verdicts.evaluate([small, medium], verdicts.VerdictCache(tmp_path), None, measure))
  assert sorted(measured) == ["medium", "small"]
  assert sorted((r.candidate, r.size, r.cached) for r, _ in out) == [
      ("relu/at-medium", "medium", False), ("relu/at-small", "small", False)]
  assert sorted((a.candidate, a.size) for _, a in out) == [
      ("relu/at-medium", "medium"), ("relu/at-small", "small")]


# relu whose kernel loops until a count its input could lower, which it never does: exported and
# admitted in seconds, its correctness runs never end.
SPINS = textwrap.dedent('''
    import functools
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def _body(x_ref, o_ref):
      x = x_ref[...]
      stop = jnp.int32(2**31 - 1) - jnp.isnan(x[0, 0]).astype(jnp.int32)
      i, v = jax.lax.while_loop(lambda c: c[0] < stop, lambda c: (c[0] + 1, c[1] * 1.0001),
                                (jnp.int32(0), x))
      o_ref[...] = jnp.where(i >= 0, jnp.maximum(x, 0.0), v)

    @functools.partial(jax.jit, static_argnames=("interpret",))
    def kernel(x, interpret=False):
      spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
      return pl.pallas_call(_body, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec],
                            out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                            interpret=interpret)(x)
    ''')
LIMIT_S = 120.0
BUDGETS = {budgets.EXPORT: 20.0, budgets.CORRECTNESS: 8.0}


def _candidate(name: str, source: str) -> WorkItem:
  return WorkItem(task="relu", variant="candidate", size="small", source=source,
                  filename=f"{name}.py", options=OPTIONS, candidate=f"relu/{name}")


def test_a_stage_over_its_budget_is_rejected_at_once_and_judged_again(tmp_path, monkeypatch):
  """A candidate that holds the exporter (it never returns while traced) or the judge's
  correctness runs (its kernel never ends) gets `rejected` naming the stage and its budget,
  long before the evaluation's limit. The host's load may have decided such a verdict (red team
  round 14), so a resubmission is judged again, not served from the verdict cache. An honest
  kernel judged beside them, within every budget, still passes, and is served."""
  monkeypatch.setattr(budgets, "STAGE_BUDGETS_S", {
      "cpu": {**budgets.STAGE_BUDGETS_S["cpu"], **BUDGETS}})
  items = [_candidate("hangs", (CONTROLS / "hangs_relu.py").read_text()),
           _candidate("spins", SPINS),
           _candidate("honest", (CONTROLS / "pos_calls_reference_relu.py").read_text())]
  limits = Limits(timeout_s=LIMIT_S, memory_bytes=8 << 30)
  cache = verdicts.VerdictCache(tmp_path)

  def measure(todo):  # the hanging export waits out its budget beside the other two
    lists = [todo[:1], todo[1:]]
    records = [r for rs in two_cores.run_at_once([(one, limits) for one in lists]) for r in rs]
    return [(item, record, empty_artifacts(item)) for item, record in zip(todo, records)]
  first = {r.candidate: r for r, _ in verdicts.evaluate(items, cache, None, measure)}
  hangs, spins, honest = (first[f"relu/{n}"] for n in ("hangs", "spins", "honest"))
  assert (hangs.status, hangs.reasons) == (Status.REJECTED, (
      "the export stage ran past its 20 s budget (import, trace, lower); its process was killed",))
  assert (spins.status, spins.reasons) == (Status.REJECTED, (
      "the correctness runs stage ran past its 8 s budget; its process was killed",))
  assert spins.eval_wall_s < LIMIT_S / 2
  assert honest.status is Status.PASS, honest.reasons

  def measure_again(todo):  # what a second measurement would say: the same
    asked.extend(item.candidate for item in todo)
    return [(item, first[item.candidate], empty_artifacts(item)) for item in todo]
  asked: list[str] = []
  again = {r.candidate: r for r, _ in verdicts.evaluate(items, cache, spins.environment,
                                                          measure_again)}
  assert asked == ["relu/hangs", "relu/spins"]
  assert again["relu/honest"].cached and again["relu/honest"].status is Status.PASS
