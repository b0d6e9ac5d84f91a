"""Resuming a population run: a resume continues only the population its folder holds."""

import dataclasses

import pytest

from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.evaluation.pipeline import cluster, suite
from pallasbench_dataset.population.candidates import (
    CANDIDATES, Candidate, PopulationError, read_candidates, to_jsonl)
from pallasbench_dataset.population.run import evaluate_population

STORED = (Candidate(id="relu/a", task="relu", source="# a\n", kind="tuning"),
          Candidate(id="relu/b", task="relu", source="# b\n", kind="tuning"))


def _resume(run_dir, candidates):
  evaluate_population(
      candidates, run_dir, size="small", device="cpu",
      options=EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1,
                          warmup=1),
      limits=Limits(timeout_s=30, memory_bytes=1 << 30),
      cluster_options=suite.ClusterOptions(plan=cluster.WorkerPlan(gpus=(), cpu_workers=1),
                                           compile_budget_s=30),
      git_commit="abc", command="test", cache=None, resume=True)


@pytest.mark.parametrize("other", [
    (dataclasses.replace(STORED[0], source="# another a\n"), STORED[1]),
    (STORED[0], dataclasses.replace(STORED[1], id="relu/c")),
], ids=["another_source", "another_id"])
def test_resume_refuses_another_population_of_the_same_size(tmp_path, other):
  """Another population with as many candidates must not silently continue the stored one;
  the folder is left as it was."""
  run_dir = tmp_path / "run"
  run_dir.mkdir()
  (run_dir / CANDIDATES).write_text(to_jsonl(STORED))
  with pytest.raises(PopulationError, match="holds another population"):
    _resume(run_dir, list(other))
  assert read_candidates(run_dir / CANDIDATES) == list(STORED)
  assert sorted(p.name for p in run_dir.iterdir()) == [CANDIDATES]
