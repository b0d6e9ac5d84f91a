"""Test session setup: CPU backend, 32-bit JAX, no GPU needed, one persistent compilation
cache for the run; the slow tests marked."""

import os
import pathlib
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  (after the platform is chosen)
import pytest  # noqa: E402

from pallasbench_dataset.evaluation.judge import compile_profile  # noqa: E402
from tests.paths import TESTS  # noqa: E402

# What takes minutes on two cores: whole evaluations (exporter and judge processes, Dask
# clusters) and sweeps that run every kernel, tuned config or precision in interpret mode. A
# file's path below tests/ marks all its tests, `path::test` one test (every parametrization of
# it).
# `pytest -m "not slow"` is the fast loop; CI runs everything.
SLOW = frozenset({
    "builder/test_build.py", "builder/test_disk_faults.py", "builder/test_precision_card.py",
    "builder/test_precision_configs.py", "builder/test_push.py", "builder/test_regenerate.py",
    "builder/test_release.py", "judge/test_attacks.py", "judge/test_controls.py",
    "judge/test_gpu.py", "judge/test_logic.py", "kernels/test_autotune.py",
    "kernels/test_mosaic_bf16.py", "kernels/test_mosaic_transpose.py", "kernels/test_trees.py",
    "kernels/test_tuned_configs.py",
    "pipeline/test_end_to_end.py", "pipeline/test_interrupts.py", "population/test_runs.py",
    "sandbox/test_through_export.py", "sandbox/test_walls.py", "tasks/test_input_families.py",
    "tasks/test_precisions.py", "training/test_reward.py",
    "builder/test_pieces.py::test_build_with_its_own_repo_id_at_the_first_size_planned",
    "builder/test_pieces.py::test_build_with_population_runs",
    "builder/test_pieces.py::test_build_writes_every_file_of_the_folder",
    "builder/test_pieces.py::test_partial_build_lists_what_is_missing",
    "builder/test_pieces.py::test_rebuild_swaps_the_folder_in_whole",
    "builder/test_pieces.py::test_stale_counts_and_features_of_the_card",
    "judge/test_building_blocks.py::test_the_judge_draws_31_bit_seeds",
    "judge/test_kernel_state.py::test_every_shipped_mosaic_gpu_kernels_host_code_is_mosaic_gpus",
    "judge/test_module_analysis.py::test_a_module_that_crashes_the_parser_is_refused_not_fatal",
    "judge/test_module_analysis.py::test_an_analysis_past_its_time_is_refused_and_the_helper_replaced",
    "judge/test_module_analysis.py::test_gpu_kernels_pass_at_medium_and_edge",
    "judge/test_rounds_and_ceilings.py::test_checked_timed_outputs_are_a_secret_sample_not_the_first_calls",
    "kernels/test_numerics.py::test_transformer_block_rmsnorm_rounds_to_tf32_to_nearest_and_pads_with_zeros",
    "pipeline/test_commands.py::test_a_build_that_fails_after_measuring_says_how_to_build_what_was_kept",
    "pipeline/test_commands.py::test_a_plot_is_compared_by_what_it_shows",
    "population/test_scaffolds.py::test_openevolve_scores_the_initial_program_and_zeroes_a_broken_child",
    "population/test_scaffolds.py::test_shinka_scores_the_initial_program_and_zeroes_a_broken_one",
    "tasks/test_registry.py::test_degeneracy_check_rejects_passthrough_and_zeros",
    "tasks/test_registry.py::test_inputs_are_deterministic_per_seed_and_differ_across_seeds",
    "tasks/test_registry.py::test_io_bytes_are_inputs_plus_output",
    "tasks/test_registry.py::test_reference_is_a_sound_non_degenerate_oracle",
})


# The files that took over 40 s on a worker in the whole suite's last timed run, longest first
# (docs/measurements.md, eighteenth session). CI runs `-n 2 --dist loadscope`: a file is one
# unit, handed to the first worker that is free. Started first, the long files run side by
# side while the short ones fill in around them; started last, one long file runs alone at the
# end while the other worker idles.
LONGEST = (
    "kernels/test_tuned_configs.py", "pipeline/test_end_to_end.py", "population/test_runs.py",
    "judge/test_attacks.py", "kernels/test_trees.py", "tasks/test_precisions.py",
    "tasks/test_registry.py", "kernels/test_mosaic_bf16.py", "tasks/test_input_families.py",
    "judge/test_controls.py", "pipeline/test_commands.py", "builder/test_push.py",
    "builder/test_pieces.py", "pipeline/test_interrupts.py", "builder/test_build.py",
    "population/test_scaffolds.py", "judge/test_module_analysis.py", "kernels/test_autotune.py",
    "builder/test_release.py",
)


# Most of the suite's time is XLA compiling, and the same programs (references, input draws,
# interpret-mode kernels) are compiled again by each xdist worker and each judge process the
# tests start. The run's first process (xdist's controller, or the only one) makes a folder
# for JAX's persistent compilation cache and names it in the environment, which the workers
# and the processes the tests start inherit; it removes the folder at the end. Processes that
# set a cache of their own (the pipeline's compile stage and judges, the autotuner's compile
# children, tests of the cache) use theirs instead. The sandbox gives the exporter a scrubbed
# environment, so candidate code never learns of the folder (and the walls let it write
# nothing outside its scratch). A cache dir already in the environment is used as it is, and
# kept: a CI job can carry one from run to run.
_CACHE_ENV = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
              "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


def _share_compilation_cache(config):
  if not hasattr(config, "workerinput") and "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    folder = tempfile.mkdtemp(prefix="pallasbench-tests-jax-cache-")
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    os.environ.update(_CACHE_ENV, JAX_COMPILATION_CACHE_DIR=folder)
  compile_profile.use_persistent_cache(pathlib.Path(os.environ["JAX_COMPILATION_CACHE_DIR"]))


def pytest_configure(config):
  """xdist's loadscope hands the files out by their number of tests unless told to keep the
  collection's order, which `pytest_collection_modifyitems` makes longest first."""
  if config.pluginmanager.hasplugin("xdist"):
    config.option.loadscopereorder = False
  _share_compilation_cache(config)


@pytest.fixture(scope="session", autouse=True)
def _pin_jax_config():
  jax.config.update("jax_enable_x64", False)
  yield


def _file(item) -> str:
  """The item's file as SLOW and LONGEST name it: its path below tests/."""
  return item.path.resolve().relative_to(TESTS).as_posix()


def _file_order(items):
  """Items sorted file by file: the LONGEST files in their order, then the others by their
  number of tests, most first (xdist's own order); the items of a file keep theirs."""
  counts = {}
  for item in items:
    counts[item.path] = counts.get(item.path, 0) + 1
  def key(item):
    name = _file(item)
    return (LONGEST.index(name) if name in LONGEST else len(LONGEST), -counts[item.path],
            str(item.path))
  return sorted(items, key=key)


def pytest_collection_modifyitems(items):
  items[:] = _file_order(items)
  for item in items:
    if {_file(item), f"{_file(item)}::{item.originalname}"} & SLOW:
      item.add_marker(pytest.mark.slow)
