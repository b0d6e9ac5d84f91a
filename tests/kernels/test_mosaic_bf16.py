"""The fixed kernels' Mosaic GPU paths at bfloat16 (CPU: interpret mode, and the lowering for
an abstract H200): bf16 `wgmma` on the operands as they are (no transpose, no TF32 rounding),
f32 accumulators, a bfloat16 output."""

from __future__ import annotations

import functools

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

MOSAIC = [s.name for s in list_tasks()
          if any(space.get("backend") == ("mosaic_gpu",)
                 for space in autotune.spaces(load_kernel("gpu", s.name)))]


def _ends_of_the_space(module) -> tuple[dict, dict]:
  """The first and last Mosaic GPU configs that config_ok admits."""
  configs = autotune.candidates(module, {"backend": None}, 1000, ["mosaic_gpu"])[1:]
  return configs[0], configs[-1]


def _export(module, spec, config, size):
  return export_for("cuda", functools.partial(module.kernel, interpret=False, config=config),
                    *spec.input_structs(size))


def test_the_ten_contraction_kernels_have_a_mosaic_gpu_path():
  assert sorted(MOSAIC) == sorted(["matmul", "batched_matmul", "matmul_relu", "matmul_gelu",
                                   "matmul_silu", "linear_bias_relu", "swiglu", "geglu",
                                   "gated_mlp", "transformer_block"])


@pytest.mark.parametrize("task", MOSAIC)
def test_every_mosaic_gpu_path_is_correct_and_lowers_at_bfloat16(task):
  """The first and last Mosaic GPU configs of the space: interpret mode against the bfloat16
  tolerance with a bfloat16 output, the first at the small size and the last at the edge size
  (zero padding to whole tiles: the kernels run the same whole tiles at both), and the Mosaic
  GPU lowering for an abstract H200 at `medium` and `large`."""
  module, spec = load_kernel("gpu", task), get_task(task).at_precision(BFLOAT16)
  assert spec.output_dtype == BFLOAT16
  first, last = _ends_of_the_space(module)
  for config, size in ((first, Size.SMALL), (last, Size.EDGE)):
    inputs = spec.make_inputs(size, 2)
    out = module.kernel(*inputs, interpret=True, config=config)
    assert out.dtype == jnp.bfloat16, (config, size, out.dtype)
    result = compare(out, spec.expected(*inputs), spec.tolerance)
    assert result.passed, (config, size, result.reason)
  for config in (first, last):
    for size in (Size.MEDIUM, Size.LARGE):
      exported = _export(module, spec, config, size)
      assert "mosaic_gpu_v2" in exported.mlir_module()
      assert exported.out_avals[0].dtype == jnp.bfloat16, (config, size)
      assert exported.out_avals[0].shape == spec.output_shape(size)


def test_every_contraction_runs_a_tuned_mosaic_gpu_config_at_bfloat16_on_an_h200():
  """The H200's tables hold a bfloat16 Mosaic GPU config for each contraction at `medium` and
  `large` (its own shape class, beside the float32 one), so a bfloat16 contraction never falls
  back to the untuned Triton default (0.42-0.75x XLA there against 0.99-1.53x tuned)."""
  untuned = []
  with abstract_gpu():
    for task in MOSAIC:
      module, spec = load_kernel("gpu", task), get_task(task).at_precision(BFLOAT16)
      for size in (Size.MEDIUM, Size.LARGE):
        structs = spec.input_structs(size)
        shape = module.shape_class(*structs)
        tuned = module.TUNED_CONFIGS["NVIDIA H200"].get(shape)
        if not tuned or tuned["backend"] != "mosaic_gpu" or module.config_for(*structs) != tuned:
          untuned.append(f"{task} {size} {shape}")
  assert not untuned, untuned


ROUNDED_TO_TF32 = {"gated_mlp", "transformer_block", "swiglu", "geglu"}


@pytest.mark.parametrize("task", MOSAIC)
def test_the_bfloat16_mosaic_path_runs_bf16_wgmma_on_the_operands_as_they_are(task):
  """At bfloat16 no operand is transposed or rounded before the kernels (16-bit `wgmma` reads
  B N-major, and bf16 operands need no TF32 rounding), the `wgmma` is bf16 and the output is
  bfloat16; at float32 the same config transposes the weights for TF32 `wgmma`."""
  module = load_kernel("gpu", task)
  config = _ends_of_the_space(module)[0]
  texts = {}
  for precision in (FLOAT32, BFLOAT16):
    spec = get_task(task).at_precision(precision)
    exported = _export(module, spec, config, Size.MEDIUM)
    assert exported.out_avals[0].dtype == jnp.dtype(precision)
    texts[precision] = exported.mlir_module()
  assert "stablehlo.transpose" in texts[FLOAT32]
  assert ".f32.tf32.tf32" in texts[FLOAT32]
  # The gated contractions round their f32 operands to TF32 before `wgmma` truncates them.
  assert ("stablehlo.reduce_precision" in texts[FLOAT32]) == (task in ROUNDED_TO_TF32)
  assert "stablehlo.transpose" not in texts[BFLOAT16]
  assert "stablehlo.reduce_precision" not in texts[BFLOAT16]
  assert ".f32.bf16.bf16" in texts[BFLOAT16]
  assert ".tf32" not in texts[BFLOAT16]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_a_k_loop_of_one_step_with_a_delayed_release_is_correct(dtype):
  """delay=1 releases each stage a step late; with a single K step (K = 32 f32 or 64 bf16
  elements) and split_n that raced (wrong sums or a barrier error in interpret mode), so the
  kernel delays nothing then."""
  module = load_kernel("gpu", "matmul")
  tile_k = module.ROW_BYTES // jnp.dtype(dtype).itemsize
  x = jax.random.normal(jax.random.key(0), (128, tile_k), jnp.float32).astype(dtype)
  y = jax.random.normal(jax.random.key(1), (tile_k, 256), jnp.float32).astype(dtype)
  config = dict(backend="mosaic_gpu", tile_m=64, tile_n=64, stages=3, split_n=True, delay=1)
  out = module.kernel(x, y, interpret=True, config=config)
  want = np.asarray(x, np.float32) @ np.asarray(y, np.float32)
  np.testing.assert_allclose(np.asarray(out, np.float32), want, rtol=2e-2, atol=0.1)
