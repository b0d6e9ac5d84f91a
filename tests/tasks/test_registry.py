"""The task registry: docs/tasks.md is its page as it is, its ids and levels hold together, and
every reference is a sound, non-degenerate oracle."""

import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset import Size, get_task, list_tasks
from pallasbench_dataset import filters
from pallasbench_dataset.tasks import LEVEL_SPLITS, info
from tests.paths import REPO

SPECS = list_tasks()
PAGE = REPO / "docs" / "tasks.md"

CORRECTED = {"cross_entropy", "embedding_lookup", "one_hot", "nucleotide_onehot",
             "rmsnorm_residual", "layernorm_residual", "fused_softmax_cross_entropy",
             "sigmoid_bce", "pwm_scan", "flash_attention", "transformer_block", "triangle_update"}


def test_docs_tasks_md_is_the_registry_as_it_is():
  """The page is where the registry's names, levels, shapes and notes are reviewed: a change to
  the registry shows there, or this fails."""
  assert PAGE.read_text() == info.markdown(), f"docs/tasks.md is stale: run `{info.DOC_COMMAND}`"


def test_the_page_shows_each_input_and_the_output_at_every_size():
  page = info.markdown()
  rows = [line for line in page.splitlines() if line.startswith("| 8 | matmul |")]
  assert rows == ["| 8 | matmul | matmul | `x` (256, 256) / (1024, 1024) / (4096, 4096) / "
                  "(200, 300); `y` (256, 256) / (1024, 1024) / (4096, 4096) / (300, 100) | "
                  "(256, 256) / (1024, 1024) / (4096, 4096) / (200, 100) | matmul |"]
  assert ("| 25 | embedding_lookup | index | `table` (8000, 256) / (32000, 768) / (128000, 1024) "
          "/ (1000, 300); `ids` int32 (128,) / (512,) / (2048,) / (100,) |") in page


def test_task_ids_count_up_in_level_order_and_list_tasks_filters_by_level():
  assert [s.task_id for s in SPECS] == list(range(1, len(SPECS) + 1))
  assert [s.level for s in SPECS] == sorted(s.level for s in SPECS)
  assert sorted({s.level for s in SPECS}) == sorted(LEVEL_SPLITS)
  for level, split in LEVEL_SPLITS.items():
    at_level = list_tasks(levels=(level,))
    assert at_level == tuple(s for s in SPECS if s.level == level) and at_level
    assert all(s.split == split for s in at_level)


def test_get_task_returns_the_spec_and_rejects_unknown_names():
  assert get_task("softmax").task_id == 14
  with pytest.raises(KeyError, match="unknown task 'softmx'.*softmax"):
    get_task("softmx")


def test_unknown_size_is_a_clear_error():
  with pytest.raises(ValueError, match="unknown size 'huge'"):
    get_task("relu").input_shapes("huge")


@pytest.mark.parametrize("spec", SPECS, ids=operator.attrgetter("name"))
def test_corrections_are_recorded_in_notes(spec):
  assert ("(corrected)" in spec.notes) == (spec.name in CORRECTED), spec.notes


@pytest.mark.parametrize("spec", SPECS, ids=operator.attrgetter("name"))
def test_inputs_are_deterministic_per_seed_and_differ_across_seeds(spec):
  a, b, c = (spec.make_inputs(Size.SMALL, s) for s in (3, 3, 4))
  for x, y, z, ispec in zip(a, b, c, spec.inputs):
    assert x.dtype == jnp.dtype(ispec.dtype)
    np.testing.assert_array_equal(x, y)
    assert not np.array_equal(x, z), f"{spec.name}.{ispec.name} is the same for seeds 3 and 4"


@pytest.mark.parametrize("spec", SPECS, ids=operator.attrgetter("name"))
def test_io_bytes_are_inputs_plus_output(spec):
  inputs = spec.make_inputs(Size.SMALL, 0)
  out = jax.eval_shape(spec.reference, *inputs)
  expected = sum(x.nbytes for x in inputs) + np.prod(out.shape) * out.dtype.itemsize
  assert spec.io_bytes(Size.SMALL) == expected
  if spec.touched_bytes is None:
    assert spec.min_bytes(Size.SMALL) == expected
  else:  # a gather moves the rows it reads, not the whole table
    assert spec.min_bytes(Size.SMALL) < expected


def _degeneracy_failures(spec, fn, size=Size.SMALL, seed=0):
  """Names of the degeneracy filters `fn` fails as an implementation of `spec`."""
  inputs = [np.asarray(x) for x in spec.make_inputs(size, seed)]
  names = [i.name for i in spec.inputs]
  other = spec.make_inputs(size, seed + 1000)
  out = np.asarray(fn(*inputs))
  if out.shape != spec.output_shape(size):
    return ["output_shape"]
  thr = filters.threshold(np.asarray(spec.expected(*inputs)))
  impacts = [np.asarray(fn(*inputs[:i], np.asarray(x), *inputs[i + 1:])) for i, x in enumerate(other)]
  results = [*filters.output_filters(out, inputs, names, thr),
             filters.input_impact(impacts, names, out, thr)]
  return [r.name for r in results if not r.passed]


@pytest.mark.parametrize("spec", SPECS, ids=operator.attrgetter("name"))
def test_reference_is_a_sound_non_degenerate_oracle(spec):
  inputs = spec.make_inputs(Size.SMALL, 0)
  out = jax.jit(spec.reference)(*inputs)
  assert out.shape == spec.output_shape(Size.SMALL)
  assert out.dtype == jnp.dtype(spec.output_dtype)
  assert np.all(np.isfinite(out)), f"{spec.name}: reference output is not finite"
  assert _degeneracy_failures(spec, jax.jit(spec.reference)) == []


@pytest.mark.parametrize("spec", SPECS, ids=operator.attrgetter("name"))
def test_degeneracy_check_rejects_passthrough_and_zeros(spec):
  """Negative controls for the check above: it must be able to fail."""
  shape = spec.output_shape(Size.SMALL)
  zeros = lambda *args: np.zeros(shape, np.float32)  # noqa: E731
  first = lambda *args: np.asarray(args[0], np.float32)  # noqa: E731
  assert _degeneracy_failures(spec, zeros), f"{spec.name}: zeros passed"
  assert _degeneracy_failures(spec, first), f"{spec.name}: passthrough of the first input passed"


@pytest.mark.parametrize("spec", SPECS, ids=operator.attrgetter("name"))
def test_reference_source_runs_on_its_own(spec):
  namespace = {}
  exec(compile(spec.reference_source, f"{spec.name}.py", "exec"), namespace)  # noqa: S102
  inputs = spec.make_inputs(Size.SMALL, 1)
  np.testing.assert_array_equal(namespace["reference"](*inputs), spec.reference(*inputs))


@pytest.mark.parametrize("spec", SPECS, ids=operator.attrgetter("name"))
def test_edge_size_dims_are_not_block_multiples(spec):
  dims = spec.dims(Size.EDGE)
  assert any(v % 8 for v in dims.values()), f"{spec.name}: edge dims {dict(dims)} are all multiples of 8"


def test_distributions_follow_tasks_md():
  large_ids = np.asarray(get_task("embedding_lookup").make_inputs(Size.SMALL, 0)[1])
  assert large_ids.min() >= 0 and large_ids.max() < 8000 and large_ids.max() > 4000

  ids = np.asarray(get_task("one_hot").make_inputs(Size.LARGE, 0)[0])
  oob = (ids < 0) | (ids >= 1024)
  assert 0.003 < oob.mean() < 0.03 and (ids < 0).any() and (ids >= 1024).any()

  seq = np.asarray(get_task("nucleotide_onehot").make_inputs(Size.LARGE, 0)[0])
  assert set(np.unique(seq)) == {0, 1, 2, 3, 4} and 0.01 < (seq == 4).mean() < 0.03

  logits, labels = get_task("cross_entropy").make_inputs(Size.SMALL, 0)
  np.testing.assert_allclose(np.sum(labels, -1), 1.0, rtol=1e-5)
  assert np.all(np.asarray(labels) > 0)

  _, hard = get_task("fused_softmax_cross_entropy").make_inputs(Size.MEDIUM, 0)
  assert hard.dtype == jnp.int32 and hard.min() >= 0 and hard.max() < 4096

  seq_onehot, _ = get_task("pwm_scan").make_inputs(Size.SMALL, 0)
  assert np.all(np.sum(seq_onehot, -1) == 1) and set(np.unique(seq_onehot)) == {0.0, 1.0}

  mask = np.asarray(get_task("triangle_update").make_inputs(Size.MEDIUM, 0)[1])
  assert set(np.unique(mask)) == {0.0, 1.0} and 0.07 < (mask == 0).mean() < 0.13

  for name in ("log", "rsqrt"):
    (x,) = get_task(name).make_inputs(Size.SMALL, 0)
    assert x.min() >= 0.1 and x.max() < 5.0

  (x,) = get_task("clamp").make_inputs(Size.SMALL, 0)
  assert 0.5 < float(np.mean(np.abs(x) > 1)) < 0.75

  _, targets = get_task("sigmoid_bce").make_inputs(Size.SMALL, 0)
  assert targets.min() >= 0 and targets.max() <= 1

  _, w = get_task("matmul").make_inputs(Size.MEDIUM, 0)
  assert abs(float(np.std(w)) * np.sqrt(1024) - 1) < 0.02
  wo = get_task("transformer_block").make_inputs(Size.SMALL, 0)[4]
  assert abs(float(np.std(wo)) * np.sqrt(2 * 32) - 1) < 0.05
