"""How many XLA programs of its own the judge compiles for a correctness check it has not run
before in its process.

On an H200 each such compile costs about 0.2 s, most of a cold check's seconds
(docs/measurements.md, "the judge's own compiles"): the bounds below are the counts measured
once a family's transforms, the reference with its casts, and an input set's copy and
comparison compiled as one program each, so that a change that compiles op by op again fails
here. A task given a new family or input compiles
more, legitimately: measure it (`python -m benchmarks.judge_compiles --tasks T --names`) and
raise its bound.
"""

import concurrent.futures
import multiprocessing

import jax
import numpy as np
import pytest

from benchmarks import judge_compiles

# (task, precision): the most programs a cold `small` check may compile, in a fresh process.
MAX_COLD_COMPILES = {("relu", "float32"): 18, ("layernorm", "float32"): 21,
                     ("matmul", "bfloat16"): 25, ("linear_bias_relu", "float32"): 27}


def test_the_counter_counts_each_program_compiled_once():
  with judge_compiles.compiles() as seen:
    add_one = jax.jit(lambda x: x + 1)
    add_one(np.float32(1.0))
    add_one(np.float32(2.0))  # the same program: served from JAX's cache, not compiled
  assert [name for name, _ in seen] == ["jit(<lambda>)"]
  with judge_compiles.compiles() as again:
    add_one(np.float32(3.0))
  assert not again


@pytest.mark.parametrize(("task", "precision"), list(MAX_COLD_COMPILES))
def test_a_cold_check_compiles_no_more_programs_than_measured(task, precision):
  with concurrent.futures.ProcessPoolExecutor(
      max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
    row = pool.submit(judge_compiles.check_costs, task, "small", precision).result()
  assert row["cold_compiles"] <= MAX_COLD_COMPILES[task, precision], row["programs"]
  assert row["warm_compiles"] == 0, "a second check of the same kind compiled again"
