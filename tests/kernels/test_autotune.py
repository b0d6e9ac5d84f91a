"""The autotuner: its config spaces, candidates, tuning runs and the tables it writes (CPU; the
measurements themselves come from a GPU run). The tables' configs themselves:
kernels/test_tuned_configs.py."""

from __future__ import annotations

import ast
import json
import shutil
import time
import types

import jax
import jax.numpy as jnp
import pytest

from pallasbench_dataset import autotune
from pallasbench_dataset.evaluation.judge import compile_profile
from pallasbench_dataset.kernels import load_kernel, load_module, tree_dir
from pallasbench_dataset.lowering import abstract_gpu
from pallasbench_dataset.precision import BFLOAT16, FLOAT32
from pallasbench_dataset.tasks import get_task, list_tasks

H200 = "NVIDIA H200"
TUNABLE = [s.name for s in list_tasks() if autotune.is_tunable(load_kernel("gpu", s.name))]




def test_every_fixed_kernel_is_tunable():
  assert TUNABLE == [s.name for s in list_tasks()]
  assert not autotune.is_tunable(load_kernel("tpu", "relu"))


def test_candidates_put_the_default_first_and_keep_only_compilable_configs():
  module = load_kernel("gpu", "matmul")
  default = module.config_for(*get_task("matmul").input_structs("medium"))
  configs = autotune.candidates(module, default, 6)
  assert configs[0] == default and len(configs) == 6
  assert all(module.config_ok(c) for c in configs[1:])
  assert default not in configs[1:] and len({json.dumps(c, sort_keys=True) for c in configs}) == 6
  assert configs == autotune.candidates(module, default, 6)  # deterministic
  assert autotune.candidates(module, default, 1) == [default]


def test_candidates_thin_the_whole_space_evenly():
  module = load_kernel("gpu", "flash_attention")
  default = module.config_for(*get_task("flash_attention").input_structs("medium"))
  configs = autotune.candidates(module, default, 24)[1:]
  for name, values in module.CONFIG_SPACE.items():
    assert {c[name] for c in configs} == set(values), name  # every value of every parameter


def test_candidates_share_the_room_between_backends_and_can_keep_one():
  module = load_kernel("gpu", "matmul")
  triton, mosaic = autotune.spaces(module)
  default = dict(backend="triton", block_m=64, block_n=64, block_k=32, group_m=1,
                 k_major=False, num_warps=4, num_stages=3)
  configs = autotune.candidates(module, default, 21)
  assert configs[0] == default
  by_backend = [[c for c in configs[1:] if c["backend"] == b] for b in ("triton", "mosaic_gpu")]
  assert [len(b) for b in by_backend] == [10, 10]
  assert all(set(c) == set(mosaic) for c in by_backend[1])
  assert {c["tile_n"] for c in by_backend[1]} == set(mosaic["tile_n"])
  only = autotune.candidates(module, default, 21, backends=["mosaic_gpu"])
  assert only[0] == default and all(c["backend"] == "mosaic_gpu" for c in only[1:])
  assert len(only) == 21
  flash = load_kernel("gpu", "flash_attention")
  assert autotune.spaces(flash) == (flash.CONFIG_SPACE,)
  flash_default = flash.config_for(*get_task("flash_attention").input_structs("medium"))
  # a space that names no backend is not one of the backends asked for
  assert autotune.candidates(flash, flash_default, 21, backends=["mosaic_gpu"]) == [flash_default]


def test_what_a_small_space_leaves_of_its_share_goes_to_the_larger_ones():
  module = types.SimpleNamespace(
      CONFIG_SPACE=({"a": tuple(range(30)), "b": (2,)}, {"a": (0, 1), "b": (0,)},
                    {"a": tuple(range(10)), "b": (1,)}),  # shared smallest-first, not in order
      config_ok=lambda c: True)
  configs = autotune.candidates(module, {"a": 0, "b": 0}, 25)[1:]
  per_space = [sum(c["b"] == b for c in configs) for b in (0, 1, 2)]
  assert per_space == [1, 10, 13]  # the default is not tried twice
  assert len({json.dumps(c, sort_keys=True) for c in configs}) == 24
  assert [sum(c["b"] == b for c in autotune.candidates(module, {"a": 0, "b": 0}, 7)[1:])
          for b in (0, 1, 2)] == [1, 3, 2]


def test_config_ok_rejects_tiles_past_shared_memory():
  module = load_kernel("gpu", "matmul")
  big = dict(backend="triton", block_m=128, block_n=256, block_k=64, group_m=1, k_major=True,
             num_warps=8, num_stages=4)
  assert not module.config_ok(big)                       # 4 x 64 x 384 x 4 B = 384 KiB
  assert module.config_ok({**big, "block_k": 32})        # 192 KiB
  assert not module.config_ok({**big, "block_k": 32, "num_warps": 4})  # 256 accumulators/thread
  mosaic = dict(backend="mosaic_gpu", tile_m=128, tile_n=128, stages=4, split_n=True, delay=0)
  assert module.config_ok(mosaic)                        # 4 x 32 x 384 x 4 B + 32 KiB = 224 KiB
  assert not module.config_ok({**mosaic, "stages": 5})
  assert not module.config_ok({**mosaic, "tile_n": 256})  # 256 accumulators/thread


SOURCE = '''"""doc."""
from typing import Final

A: Final = 1
# The autotuner's choices.
TUNED_CONFIGS: Final = {
    "old": {},
}


def kernel(x):
  return x
'''


def test_replace_table_rewrites_only_the_table():
  table = {H200: {"1024x1024": {"block": 64, "k_major": True}}}
  new = autotune.replace_table(SOURCE, table)
  before, after = SOURCE.split("TUNED_CONFIGS")[0], SOURCE.split("}\n", 1)[1]
  assert new.startswith(before) and new.endswith(after)
  namespace: dict = {}
  exec(compile(new, "<tuned>", "exec"), namespace)  # pylint: disable=exec-used
  assert namespace["TUNED_CONFIGS"] == table and namespace["A"] == 1
  assert autotune.replace_table(new, table) == new
  assert "TUNED_CONFIGS: Final = {}\n" in autotune.replace_table(SOURCE, {})


def test_replace_table_needs_a_table():
  with pytest.raises(autotune.TuningError, match="no TUNED_CONFIGS"):
    autotune.replace_table('"""doc."""\nA = 1\n', {})


def test_write_tables_keeps_other_entries_and_the_last_line_wins(tmp_path):
  shutil.copy(tree_dir("gpu") / "matmul.py", tmp_path / "matmul.py")
  first = dict(block_m=64, block_n=64, block_k=32, group_m=1, k_major=False, num_warps=4,
               num_stages=2)
  second = {**first, "num_stages": 3}
  lines = [{"task": "matmul", "device_kind": "NVIDIA B200", "shape_class": "8x8,8x8", "best": first},
           {"task": "matmul", "device_kind": H200, "shape_class": "8x8,8x8", "best": first},
           {"task": "matmul", "device_kind": H200, "shape_class": "8x8,8x8", "best": second}]
  assert autotune.write_tables(lines, tmp_path) == [str(tmp_path / "matmul.py")]
  source = (tmp_path / "matmul.py").read_text()
  table = load_module(source, "matmul.py").TUNED_CONFIGS
  assert table["NVIDIA B200"]["8x8,8x8"] == first and table[H200]["8x8,8x8"] == second
  shipped = load_kernel("gpu", "matmul").TUNED_CONFIGS[H200]
  assert all(table[H200][k] == v for k, v in shipped.items())  # the shipped entries kept
  assert autotune.write_tables(lines, tmp_path) == []  # nothing new: the file is not touched
  ast.parse(source)


def test_write_tables_refuses_a_precision_its_shape_class_does_not_name(tmp_path):
  """one_hot's inputs are integers, so its shape class is the same at every precision: a
  bfloat16 line would silently replace the float32 config that release runs measured."""
  shutil.copy(tree_dir("gpu") / "one_hot.py", tmp_path / "one_hot.py")
  before = (tmp_path / "one_hot.py").read_text()
  config = dict(load_kernel("gpu", "one_hot").TUNED_CONFIGS[H200]["2048"])
  line = {"task": "one_hot", "size": "large", "device_kind": H200, "shape_class": "2048",
          "precision": "bfloat16", "best": {**config, "num_warps": 2}}
  with pytest.raises(autotune.TuningError, match=r"one_hot large \(2048\)"):
    autotune.write_tables([line], tmp_path)
  assert (tmp_path / "one_hot.py").read_text() == before
  named = {**line, "shape_class": "2048:bfloat16"}
  assert autotune.write_tables([named], tmp_path) == [str(tmp_path / "one_hot.py")]


def test_a_tuned_config_applies_only_to_its_gpu_and_shape_class():
  module = load_kernel("gpu", "flash_attention")
  structs = get_task("flash_attention").input_structs("medium")
  tuned = module.TUNED_CONFIGS[H200][module.shape_class(*structs)]
  with abstract_gpu():
    assert module.config_for(*structs) == tuned
  with abstract_gpu("NVIDIA A100-SXM4-80GB", 108):
    assert module.config_for(*structs) == module._default_config(*structs[0].shape)  # pylint: disable=protected-access
  assert module.config_for(*structs)["splits"] == 1  # the CPU: the default


def test_read_results_skips_a_torn_last_line_and_names_a_bad_one(tmp_path):
  path = tmp_path / "r.jsonl"
  path.write_text('{"task": "a"}\n{"task": "b"}\n{"tas')
  assert [r["task"] for r in autotune.read_results(path)] == ["a", "b"]
  path.write_text('{"task": "a"}\nnot json\n{"task": "b"}\n')
  with pytest.raises(autotune.TuningError, match=r"r.jsonl:2: not a JSON line"):
    autotune.read_results(path)
  assert autotune.read_results(tmp_path / "none.jsonl") == []


def test_tune_on_the_cpu_measures_checks_and_picks_the_fastest():
  line = autotune.tune("pairwise_distance", "small", max_configs=3, workers=2)
  assert line["task"] == "pairwise_distance" and line["device_kind"] == "cpu"
  assert len(line["configs"]) == 3 and line["configs"][0]["config"] == line["default"]
  assert all(c["status"] == "ok" and c["screen_ms"] > 0 for c in line["configs"])
  timed = [c for c in line["configs"] if "runtime_ms" in c]
  assert line["best_ms"] == min(c["runtime_ms"] for c in timed) and line["baseline_ms"] > 0
  assert line["best"] in [c["config"] for c in timed]
  json.dumps(line)


def test_tune_at_bfloat16_poses_the_task_there_and_names_the_precision():
  line = autotune.tune("relu", "small", max_configs=2, workers=2, precision=BFLOAT16)
  assert line["precision"] == BFLOAT16 and line["shape_class"].endswith(":bfloat16")
  assert all(c["status"] == "ok" for c in line["configs"])
  assert autotune.line_key(line) == ("relu", "small", BFLOAT16)
  assert autotune.line_key({"task": "relu", "size": "small"}) == ("relu", "small", FLOAT32)


def test_cli_tunes_each_precision_and_resumes_by_precision(tmp_path, monkeypatch, capsys):
  """A line that names no precision is float32's: a run at both precisions
  tunes only the bfloat16 half, and an unknown precision is refused before anything runs."""
  results = tmp_path / "r.jsonl"
  results.write_text(json.dumps({"task": "relu", "size": "small"}) + "\n")
  asked = []
  def fake(task, size, *, precision, **_):
    asked.append((task, size, precision))
    return {"task": task, "size": size, "precision": precision}
  monkeypatch.setattr(autotune, "tune", fake)
  argv = ["--tasks", "relu", "--sizes", "small", "--results", str(results), "--allow-cpu"]
  assert autotune.main([*argv, "--precisions", "float32", "bfloat16"]) == 0
  assert asked == [("relu", "small", BFLOAT16)]
  assert "1 to tune, 1 already in" in capsys.readouterr().out
  assert autotune.main([*argv, "--precisions", "float16"]) == 2
  assert "unknown precision 'float16'" in capsys.readouterr().err
  assert asked == [("relu", "small", BFLOAT16)]


def test_tune_records_a_config_that_fails_and_never_keeps_it(monkeypatch):
  def with_a_bad_one(module, default, max_configs, backends):
    return [dict(default), {**default, "block": 12}, {**default, "unknown": 1}]
  monkeypatch.setattr(autotune, "candidates", with_a_bad_one)
  line = autotune.tune("pairwise_distance", "small", max_configs=3, workers=2)
  statuses = [c["status"] for c in line["configs"]]
  assert statuses[0] == "ok" and statuses[2] == "compile_error"
  assert "unknown" in line["configs"][2]["error"]
  assert "unknown" not in line["best"]


def test_tune_refuses_a_kernel_without_a_config_space(monkeypatch):
  untunable = load_kernel("tpu", "relu")
  monkeypatch.setattr(autotune, "load_kernel", lambda variant, task: untunable)
  with pytest.raises(autotune.TuningError, match="declares no tunable config"):
    autotune.tune("relu", "small", max_configs=2, workers=1)


@pytest.mark.parametrize("argv, message", [
    (["--tasks", "nope", "--results", "r.jsonl"], "unknown task(s) ['nope']"),
    (["--write-tables", "missing.jsonl"], "missing.jsonl does not exist"),
])
def test_cli_errors(tmp_path, monkeypatch, capsys, argv, message):
  monkeypatch.chdir(tmp_path)
  assert autotune.main(argv) == 2
  assert message in capsys.readouterr().err


def test_cli_resumes_what_is_in_the_results(tmp_path, capsys):
  results = tmp_path / "r.jsonl"
  results.write_text(json.dumps({"task": "pairwise_distance", "size": "small"}) + "\n")
  assert autotune.main(["--tasks", "pairwise_distance", "--sizes", "small",
                        "--results", str(results), "--allow-cpu"]) == 0
  assert "0 to tune, 1 already in" in capsys.readouterr().out


SLOW_KERNEL = '''"""A kernel whose `slow` config never finishes tracing (a hung compile)."""
import time

import jax.numpy as jnp

CONFIG_SPACE = {"slow": (False, True)}


def kernel(x, *, interpret=False, config=None):
  if config["slow"]:
    time.sleep(600)
  return jnp.sin(x)
'''


def test_a_compile_past_its_budget_is_killed_and_the_others_are_kept(tmp_path):
  path = tmp_path / "slow_kernel.py"
  path.write_text(SLOW_KERNEL)
  module = load_module(SLOW_KERNEL, str(path))
  cache = tmp_path / "cache"
  structs = (jax.ShapeDtypeStruct((8,), jnp.float32),)
  previous = jax.config.jax_compilation_cache_dir  # the run's cache (tests/conftest.py)
  compile_profile.use_persistent_cache(cache)
  try:
    start = time.monotonic()
    (fast, fast_error), (slow, slow_error) = autotune._compile_all(  # pylint: disable=protected-access
        module, [{"slow": False}, {"slow": True}], structs, interpret=True, workers=2,
        budget_s=25.0, cache_dir=cache)
  finally:
    jax.config.update("jax_compilation_cache_dir", previous)
  assert time.monotonic() - start < 120
  assert fast_error is None and float(fast(jnp.ones(8, jnp.float32))[0]) == pytest.approx(0.841471)
  assert slow is None and "past its 25 s budget" in slow_error
