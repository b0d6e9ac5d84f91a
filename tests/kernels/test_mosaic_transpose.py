"""The float32 Mosaic GPU contractions' in-kernel transpose (#37; CPU: interpret mode, and the
lowering for an abstract H200). TF32 `wgmma` reads y K-major; with `transpose_in_kernel` y stays
(K, N) in HBM and each compute warpgroup transposes its columns through registers into a
K-major shared-memory buffer, in place of XLA's transpose before the kernel."""

from __future__ import annotations

import functools
import itertools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset import autotune
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.lowering import abstract_gpu, export_for
from pallasbench_dataset.precision import BFLOAT16, FLOAT32
from pallasbench_dataset.tasks import Size, get_task, list_tasks
from pallasbench_dataset.tolerance import compare

KEY = "transpose_in_kernel"
TRANSPOSING = [s.name for s in list_tasks()
               if any(KEY in space for space in autotune.spaces(load_kernel("gpu", s.name)))]
SMALLEST = dict(backend="mosaic_gpu", tile_m=64, tile_n=64, stages=3)


def _mosaic_space(module) -> dict:
  return next(s for s in autotune.spaces(module) if s.get("backend") == ("mosaic_gpu",))


def _export(module, config, structs):
  return export_for("cuda", functools.partial(module.kernel, interpret=False, config=config),
                    *structs)


def test_the_float32_stragglers_offer_the_in_kernel_transpose():
  """#37's float32 contractions below 0.9x XLA at `large` (and swiglu, geglu's twin)."""
  assert sorted(TRANSPOSING) == sorted(["matmul", "batched_matmul", "matmul_relu",
                                        "linear_bias_relu", "swiglu", "geglu"])
  for task in TRANSPOSING:
    assert _mosaic_space(load_kernel("gpu", task))[KEY] == (False, True), task


@pytest.mark.parametrize("m, k, n", [(70, 20, 50), (130, 100, 200)],
                         ids=["one_k_step", "four_k_steps"])
@pytest.mark.parametrize("split_n", [False, True])
@pytest.mark.parametrize("delay", [0, 1])
def test_matmul_transposed_in_kernel_matches_float64_and_the_xla_transpose(m, k, n, split_n,
                                                                          delay):
  """No dimension a tile multiple (zero padding), K within one 32-wide step (delay clamped to
  0) and over four; each warpgroup's columns (split_n) or all of them. Interpret mode runs
  wgmma in f32, so the product is within f32 rounding of float64 and equal, bit for bit, to
  the one XLA's transpose feeds (the same wgmma on the same operands)."""
  module = load_kernel("gpu", "matmul")
  x = jax.random.normal(jax.random.key(0), (m, k), jnp.float32)
  y = jax.random.normal(jax.random.key(1), (k, n), jnp.float32)
  config = dict(SMALLEST, split_n=split_n, delay=delay)
  out = module.kernel(x, y, interpret=True, config={**config, KEY: True})
  assert out.shape == (m, n) and out.dtype == jnp.float32
  want = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
  error = float(np.max(np.abs(np.asarray(out, np.float64) - want)))
  assert error < 1e-5 * math.sqrt(k) * 4, error
  via_xla = module.kernel(x, y, interpret=True, config={**config, KEY: False})
  np.testing.assert_array_equal(np.asarray(out), np.asarray(via_xla))


@pytest.mark.parametrize("k", [20, None], ids=["one_k_step", "edge_k"])
@pytest.mark.parametrize("task", TRANSPOSING)
def test_every_transposing_kernel_is_correct_at_odd_shapes(task, k):
  """The task's edge dimensions (none a tile multiple) with M = 70 and N = 150, so that with
  split_n the second warpgroup's columns are real ones, and K within one step or the edge's;
  split_n both ways with delay 1 (two buffers per warpgroup, unless one K step clamps it):
  within the task's tolerance of its float64 reference, and equal to the XLA-transposed path,
  bit for bit."""
  module, spec = load_kernel("gpu", task), get_task(task)
  dims = {**spec.dims(Size.EDGE), "M": 70, "N": 150, **({"K": k} if k else {})}
  inputs = spec.make_inputs(dims, 5)
  expected = spec.expected(*inputs)
  for split_n in (False, True):
    config = dict(SMALLEST, split_n=split_n, delay=1)
    out = module.kernel(*inputs, interpret=True, config={**config, KEY: True})
    result = compare(out, expected, spec.tolerance)
    assert result.passed, (config, result.reason)
    via_xla = module.kernel(*inputs, interpret=True, config={**config, KEY: False})
    np.testing.assert_array_equal(np.asarray(out), np.asarray(via_xla), err_msg=str(config))


def _lowers(module, config, structs) -> tuple[bool, str]:
  """Whether Mosaic GPU compiles `config` for the H200, else the error's smem_bytes."""
  try:
    _export(module, config, structs)
  except ValueError as e:
    found = re.search(r"smem_bytes=(\d+)", str(e))
    assert found, str(e)
    return False, found.group(1)
  return True, ""


@pytest.mark.parametrize("task", TRANSPOSING)
def test_config_ok_counts_the_transpose_buffers_as_mosaic_gpu_allocates_them(task):
  """Every transposing config at float32: where Mosaic GPU's own shared-memory check refuses
  it for the H200, config_ok does too; where it passes, config_ok judges it as its twin without
  the option (the buffers fit; only the registers can refuse it). So the `delay + 1` buffers
  of (tile_n, 32) floats per warpgroup and weight are both counted and allocated: one buffer
  at delay 1 would compile configs config_ok refuses, a count too low would admit ones that
  fail, one too high would refuse ones that fit."""
  module, spec = load_kernel("gpu", task), get_task(task)
  structs = spec.input_structs(Size.MEDIUM)
  space = _mosaic_space(module)
  disagree = []
  for values in itertools.product(*space.values()):
    config = dict(zip(space, values))
    if not config[KEY]:
      continue
    lowers, smem = _lowers(module, config, structs)
    want = module.config_ok({**config, KEY: False}) if lowers else False
    if module.config_ok(config) != want:
      disagree.append((config, smem))
  assert not disagree, disagree


@pytest.mark.parametrize("task", TRANSPOSING)
def test_the_transposing_configs_lower_for_the_h200_without_an_xla_transpose(task):
  """The first and last transposing configs config_ok admits, at `medium` and `large`: a
  Mosaic GPU kernel with TF32 `wgmma`, and no transpose left in the XLA module around it, nor
  a rounding of the weights (the gated kernels round x alone there: their weights are rounded
  in registers)."""
  module, spec = load_kernel("gpu", task), get_task(task)
  configs = [c for c in autotune.candidates(module, {"backend": None}, 1000, ["mosaic_gpu"])[1:]
             if c[KEY]]
  for config in (configs[0], configs[-1]):
    for size in (Size.MEDIUM, Size.LARGE):
      text = _export(module, config, spec.input_structs(size)).mlir_module()
      assert "mosaic_gpu_v2" in text and ".f32.tf32.tf32" in text, (config, size)
      assert "stablehlo.transpose" not in text, (config, size)
      assert text.count("stablehlo.reduce_precision") <= 1, (config, size)
      without = _export(module, {**config, KEY: False}, spec.input_structs(size)).mlir_module()
      assert "stablehlo.transpose" in without, (config, size)


@pytest.mark.parametrize("task", TRANSPOSING)
def test_at_bfloat16_the_option_changes_nothing(task):
  """16-bit `wgmma` reads y (K, N) as it lies: there is nothing to transpose, and a config
  with the option traces to the same program as its twin without it (the exported modules
  cannot be compared: Mosaic GPU's serialized kernel differs from one export to the next),
  while at float32 the two programs differ."""
  module = load_kernel("gpu", task)
  config = dict(SMALLEST, split_n=True, delay=1)
  for precision, same in ((BFLOAT16, True), (FLOAT32, False)):
    structs = get_task(task).at_precision(precision).input_structs(Size.MEDIUM)
    with abstract_gpu():
      programs = [str(jax.make_jaxpr(functools.partial(
          module.kernel, interpret=False, config={**config, KEY: flag}))(*structs))
                  for flag in (False, True)]
    assert (programs[0] == programs[1]) == same, precision


@pytest.mark.parametrize("task", TRANSPOSING)
def test_the_autotuner_tries_both_ways_at_float32(task):
  """The default 24 configs of a tuning run, and a Mosaic-GPU-only run: both values of the
  option among the Mosaic GPU picks, every pick admitted by config_ok."""
  module, spec = load_kernel("gpu", task), get_task(task)
  for size in (Size.MEDIUM, Size.LARGE):
    default = module.config_for(*spec.input_structs(size))
    for backends in (None, ["mosaic_gpu"]):
      picks = [c for c in autotune.candidates(module, default, 24, backends)[1:]
               if c["backend"] == "mosaic_gpu"]
      assert {c[KEY] for c in picks} == {False, True}, (size, backends)
      assert all(module.config_ok(c) for c in picks)


@pytest.mark.parametrize("task", TRANSPOSING)
def test_a_tuned_config_without_the_option_transposes_in_xla(task):
  """The shipped tables name no option (until an H200 tuning run writes them): their float32
  configs run exactly as before it existed, y transposed by XLA."""
  module, spec = load_kernel("gpu", task), get_task(task)
  assert not any(KEY in c for c in module.TUNED_CONFIGS["NVIDIA H200"].values())
  with abstract_gpu():
    config = module.config_for(*spec.input_structs(Size.LARGE))
  assert config["backend"] == "mosaic_gpu" and KEY not in config
  text = _export(module, config, spec.input_structs(Size.LARGE)).mlir_module()
  assert "stablehlo.transpose" in text
