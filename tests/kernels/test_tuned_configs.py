"""The tuned-config tables the fixed kernels read, and their Mosaic GPU paths (CPU: every
tuned config correct in interpret mode and lowering for an abstract H200; the measurements
themselves come from a GPU run). The autotuner that writes the tables: kernels/test_autotune.py."""

from __future__ import annotations

import functools
import json
import math

import pytest

from pallasbench_dataset import autotune
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.precision import BFLOAT16, FLOAT32, PRECISIONS
from pallasbench_dataset.tasks import Size, get_task, list_tasks
from pallasbench_dataset.tolerance import compare

H200 = "NVIDIA H200"
TUNABLE = [s.name for s in list_tasks() if autotune.is_tunable(load_kernel("gpu", s.name))]

def _entries():
  for task in TUNABLE:
    for device, classes in load_kernel("gpu", task).TUNED_CONFIGS.items():
      for shape, config in classes.items():
        yield pytest.param(task, device, shape, config, id=f"{task}-{shape}")


def _precision_of(shape_class: str) -> str:
  """The precision a shape class is for: its dtype suffix (':bfloat16'), else float32."""
  suffix = shape_class.rsplit(":", 1)[-1] if ":" in shape_class else ""
  return suffix if suffix in PRECISIONS else FLOAT32


def test_a_shape_class_names_its_precision():
  assert _precision_of("256x32,32x64:bfloat16") == BFLOAT16 and _precision_of("256x32") == FLOAT32


@functools.cache
def _checked_inputs(task: str, precision: str, size: Size) -> tuple:
  """The inputs (seed 1) at `size` and the reference's answer: the same for every config of a
  task, so computed once."""
  spec = get_task(task).at_precision(precision)
  inputs = spec.make_inputs(size, 1)
  return inputs, spec.expected(*inputs)


def _interpret_sizes(config: dict) -> tuple[Size, ...]:
  """Where a config is checked in interpret mode: small and edge; a Mosaic GPU config at edge
  alone: its Mosaic kernels get every operand padded to whole tiles outside the kernel, so they
  run whole tiles at every size, and edge is where the padding and the masks of the Triton
  kernels beside them (transformer_block's) are exercised."""
  return (Size.EDGE,) if config.get("backend") == "mosaic_gpu" else (Size.SMALL, Size.EDGE)


@functools.cache
def _interpret_failures(task: str, precision: str, config_json: str) -> tuple:
  """(size, reason) for each size where `config` is not correct in interpret mode at
  `precision`: masks or padding make a config shape-general, so this is the same check for
  every shape class a config is tuned for, and it runs once per config."""
  module, spec = load_kernel("gpu", task), get_task(task).at_precision(precision)
  config = json.loads(config_json)
  failures = []
  for size in _interpret_sizes(config):
    inputs, expected = _checked_inputs(task, precision, size)
    result = compare(module.kernel(*inputs, interpret=True, config=config), expected,
                     spec.tolerance)
    if not result.passed:
      failures.append((size, result.reason))
  return tuple(failures)


@pytest.mark.parametrize("task, device, shape, config", list(_entries()))
def test_every_tuned_config_is_correct_and_lowers(task, device, shape, config):
  """Interpret mode (`_interpret_sizes`, once per distinct config: 176 entries hold 158),
  and the lowering (Triton or Mosaic GPU, as the config says) for an abstract H200 at the size
  whose shape class the entry is for."""
  assert device == H200  # the only GPU tuned so far; another needs its abstract device here
  module = load_kernel("gpu", task)
  spec = get_task(task).at_precision(_precision_of(shape))
  assert _interpret_failures(task, spec.precision, json.dumps(config, sort_keys=True)) == ()
  sizes = [s for s in (Size.MEDIUM, Size.LARGE)
           if module.shape_class(*spec.input_structs(s)) == shape]
  assert sizes, f"no size of {task} has the shape class {shape}"
  exported = export_for("cuda", functools.partial(module.kernel, interpret=False, config=config),
                        *spec.input_structs(sizes[0]))
  target = "mosaic_gpu_v2" if config.get("backend") == "mosaic_gpu" else "__gpu$xla.gpu.triton"
  assert target in exported.mlir_module()
  assert math.prod(exported.out_avals[0].shape) == math.prod(spec.output_shape(sizes[0]))


@pytest.mark.parametrize("task", TUNABLE)
def test_every_space_is_shape_general(task):
  """Two configs spread across the space (the autotuner's picks past the default): correct in
  interpret mode at the edge size (no dimension a block multiple), since a config tuned for
  one shape class runs every shape of that class."""
  module, spec = load_kernel("gpu", task), get_task(task)
  default = module.config_for(*spec.input_structs(Size.MEDIUM))
  inputs = spec.make_inputs(Size.EDGE, 4)
  expected = spec.expected(*inputs)
  for config in autotune.candidates(module, default, 3)[1:]:
    out = module.kernel(*inputs, interpret=True, config=config)
    result = compare(out, expected, spec.tolerance)
    assert result.passed, (config, result.reason)


MOSAIC = [t for t in TUNABLE if any(s.get("backend") == ("mosaic_gpu",)
                                    for s in autotune.spaces(load_kernel("gpu", t)))]


@pytest.mark.parametrize("task", MOSAIC)
def test_every_mosaic_gpu_path_is_correct_and_lowers(task):
  """The first and last Mosaic GPU configs of the space, tuned or not: interpret mode, the
  first at the small size (whole tiles, nothing padded) and the last at the edge size (every
  operand zero-padded to whole tiles, which makes them shape-general: the kernels themselves
  run the same whole tiles at both), and the Mosaic GPU lowering for an abstract H200 at
  `medium`."""
  module, spec = load_kernel("gpu", task), get_task(task)
  configs = autotune.candidates(module, {"backend": None}, 1000, ["mosaic_gpu"])[1:]
  for config, size in ((configs[0], Size.SMALL), (configs[-1], Size.EDGE)):
    inputs = spec.make_inputs(size, 2)
    out = module.kernel(*inputs, interpret=True, config=config)
    result = compare(out, spec.expected(*inputs), spec.tolerance)
    assert result.passed, (config, size, result.reason)
  for config in (configs[0], configs[-1]):
    exported = export_for("cuda", functools.partial(module.kernel, interpret=False, config=config),
                          *spec.input_structs(Size.MEDIUM))
    assert "mosaic_gpu_v2" in exported.mlir_module()
  assert {"matmul", "swiglu", "gated_mlp", "batched_matmul"} <= set(MOSAIC)


@pytest.mark.parametrize("structure", ["loop", "whole_rows", "tiles"])
def test_each_qk_softmax_structure_is_correct_where_s_is_not_a_block_multiple(structure):
  """qk_softmax's three spaces at the edge size (S = 100, 32-key blocks): the key loop's
  masked last block, whole rows' last block started early (its first keys counted once), and
  the tiles' statistics combined across a partial key block."""
  module, spec = load_kernel("gpu", "qk_softmax"), get_task("qk_softmax")
  space = next(s for s in autotune.spaces(module)
               if s["whole_rows"] == (structure == "whole_rows",)
               and s["tiles"] == (structure == "tiles",))
  config = {name: values[0] for name, values in space.items()}
  inputs = spec.make_inputs(Size.EDGE, 3)
  assert inputs[0].shape[0] % config["block_k"]
  out = module.kernel(*inputs, interpret=True, config=config)
  result = compare(out, spec.expected(*inputs), spec.tolerance)
  assert result.passed, result.reason
