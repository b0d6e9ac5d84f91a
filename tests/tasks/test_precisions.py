"""Precision as a dimension of every task: the registry at bfloat16 and its tolerances, and the
precisions' own registry, which a third precision (float16, registered here) joins.

A task at bfloat16 draws its floating inputs as at float32 and rounds them, returns what its
reference returns on them, and is judged by the bfloat16 class of its output's dtype. The
checks that the classes are right: the bfloat16 XLA baseline passes them, computing below
bfloat16 (float8 e4m3, a truncated mantissa) fails them, and a float32 task answered in
bfloat16 fails the float32 classes.
"""

import dataclasses
import json
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import datasets
import pandas as pd
from huggingface_hub import DatasetCard

from benchmarks import speed_goals
from builder import records as rec
from builder import regenerate
from builder.build import BuildError, build_dataset
from pallasbench_dataset import Size, autotune, get_task, list_tasks, loading, precision, schema
from pallasbench_dataset.evaluate import build_parser as evaluate_parser, evaluate
from pallasbench_dataset.evaluate import main as evaluate_main
from pallasbench_dataset.evaluation.judge import ceilings, timing
from pallasbench_dataset.evaluation.judge.ceilings import MATMUL_CEILINGS, Ceilings
from pallasbench_dataset.schema import RunIdentity
from pallasbench_dataset.evaluation.pipeline import report
from pallasbench_dataset.evaluation.protocol import ExportRequest
from pallasbench_dataset.keys import EvalKey, precision_field
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.tasks.info import precision_table
from pallasbench_dataset.precision import (BFLOAT16, DEFAULT_PRECISION, FLOAT32, PRECISIONS,
                                           Precision, check_precision, get_precision,
                                           precision_order, tolerance_for)
from pallasbench_dataset.tolerance import BF16_TOLERANCES, TOLERANCES, ToleranceClass, compare
from tests import runfixtures as rf
from tests.paths import REPO
from tests.tasks.test_registry import _degeneracy_failures

SPECS = list_tasks()
BF16_SPECS = [s.at_precision(BFLOAT16) for s in SPECS]
IDS = operator.attrgetter("name")
SEED = 3
# The tasks whose output stays float32 at bfloat16, because their reference returns float32
# on bfloat16 inputs: one-hots of integer codes (jax.nn.one_hot's float32) and pwm_scan (its
# reference accumulates into float32 zeros).
FLOAT32_OUTPUTS = {"one_hot", "nucleotide_onehot", "pwm_scan"}
# Families the bfloat16 baseline fails, left out at bfloat16 (tasks._float32_only).
FLOAT32_ONLY_FAMILIES = {("layernorm", "shifted"), ("layernorm_residual", "shifted"),
                         ("fused_softmax_cross_entropy", "shifted"),
                         ("fused_softmax_cross_entropy", "shifted_down"),
                         ("sigmoid_bce", "saturated")}
# One task or more of every tolerance class, for the checks that compute extra references.
CHEAT_TASKS = ("relu", "add", "gelu", "layernorm", "rmsnorm", "softmax", "reduce_sum",
               "log_softmax", "matmul", "swiglu", "flash_attention", "triangle_update")
# Outputs insensitive to their inputs' rounding (docs/tolerance.md): losses dominated by
# log C, distances summed over D. Computed from float8 e4m3 inputs, they pass; the output
# cheats fail them as the others.
INSENSITIVE = ("cross_entropy", "fused_softmax_cross_entropy", "pairwise_distance")


def _floating(x) -> bool:
  return bool(jnp.issubdtype(x.dtype, jnp.floating))


# ---------------------------------------------------------------------------------------------
# Tasks at a precision

def test_the_precisions_are_named_once_and_unknown_ones_are_refused():
  assert tuple(PRECISIONS) == (FLOAT32, BFLOAT16) == ("float32", "bfloat16")
  assert check_precision("bfloat16") == "bfloat16"
  with pytest.raises(ValueError, match="unknown precision 'float16'; valid precisions: "
                                       "float32, bfloat16"):
    get_task("relu").at_precision("float16")
  with pytest.raises(ValueError, match="no tolerances for 'float16' outputs"):
    tolerance_for(ToleranceClass.EXACT, "float16")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_float32_is_todays_spec_and_bfloat16_rounds_the_same_draws(spec):
  assert spec.precision == FLOAT32 and spec.at_precision(FLOAT32) is spec
  low = spec.at_precision(BFLOAT16)
  assert low.precision == BFLOAT16 and low.at_precision(FLOAT32) is spec
  assert low.at_precision(BFLOAT16) is low
  for x, y, inp in zip(spec.make_inputs(Size.SMALL, SEED), low.make_inputs(Size.SMALL, SEED),
                       low.inputs, strict=True):
    assert y.dtype == jnp.dtype(inp.dtype)
    if _floating(x):
      assert x.dtype == jnp.float32 and y.dtype == jnp.bfloat16
      np.testing.assert_array_equal(np.asarray(y), np.asarray(x.astype(jnp.bfloat16)))
    else:
      assert y.dtype == x.dtype
      np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
  want = FLOAT32 if spec.name in FLOAT32_OUTPUTS else BFLOAT16
  assert low.output_dtype == want
  structs = low.input_structs(Size.SMALL)  # the declared dtype is what the reference returns
  assert str(jax.eval_shape(spec.reference, *structs).dtype) == want
  assert low.tolerance == (TOLERANCES if want == FLOAT32 else BF16_TOLERANCES)[spec.tolerance_class]
  assert {f.name for f in spec.families} - {f.name for f in low.families} == {
      name for task, name in FLOAT32_ONLY_FAMILIES if task == spec.name}


def test_bytes_follow_the_precision():
  matmul, gather = get_task("matmul"), get_task("embedding_lookup")
  assert matmul.at_precision(BFLOAT16).io_bytes(Size.SMALL) * 2 == matmul.io_bytes(Size.SMALL)
  d = gather.dims(Size.SMALL)
  assert gather.min_bytes(Size.SMALL) == 4 * 2 * d["S"] * d["D"] + 4 * d["S"]
  assert gather.at_precision(BFLOAT16).min_bytes(Size.SMALL) == 2 * 2 * d["S"] * d["D"] + 4 * d["S"]


def test_expected_is_the_float64_reference_on_the_bfloat16_inputs_rounded():
  spec = get_task("layernorm").at_precision(BFLOAT16)
  (x,) = spec.make_inputs(Size.SMALL, SEED)
  xd = np.asarray(x.astype(jnp.float32), np.float64)
  centered = xd - xd.mean(axis=-1, keepdims=True)
  want = centered / np.sqrt((centered ** 2).mean(axis=-1, keepdims=True) + 1e-5)
  got = spec.expected(x)
  assert got.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(got.astype(jnp.float32)),
                                want.astype(jnp.bfloat16).astype(np.float32))


@pytest.mark.parametrize("spec", BF16_SPECS, ids=IDS)
def test_the_bfloat16_reference_is_a_sound_non_degenerate_oracle(spec):
  out = jax.jit(spec.reference)(*spec.make_inputs(Size.SMALL, 0))
  assert out.dtype == jnp.dtype(spec.output_dtype)
  assert np.all(np.isfinite(np.asarray(out, np.float32)))
  assert _degeneracy_failures(spec, jax.jit(spec.reference)) == []
  shape = spec.output_shape(Size.SMALL)
  assert _degeneracy_failures(spec, lambda *a: np.zeros(shape, np.float32))


# ---------------------------------------------------------------------------------------------
# The bfloat16 tolerances: what passes, what fails

@pytest.mark.parametrize(("spec", "family"), [
    pytest.param(get_task(t), get_task(t).family(f), id=f"{t}-{f}")
    for t, f in sorted(FLOAT32_ONLY_FAMILIES)])
def test_the_families_left_out_at_bfloat16_are_the_ones_its_baseline_fails(spec, family):
  """The evidence for tasks._float32_only: at bfloat16 the XLA baseline fails these, while
  it passes at float32 (tests/tasks/test_input_families.py)."""
  low = spec.at_precision(BFLOAT16)
  inputs = low.family_inputs(family, Size.SMALL, SEED)
  assert not compare(jax.jit(low.reference)(*inputs), low.expected(*inputs), low.tolerance).passed


def _e4m3(x):
  return x.astype(jnp.float8_e4m3fn).astype(x.dtype)


def _truncated(x, kept_bits=4):
  """x in bfloat16 with all but `kept_bits` of its 7 stored mantissa bits cut off."""
  bits = jax.lax.bitcast_convert_type(x.astype(jnp.bfloat16), jnp.uint16)
  mask = jnp.uint16((0xFFFF << (7 - kept_bits)) & 0xFFFF)
  return jax.lax.bitcast_convert_type(bits & mask, jnp.bfloat16)


def _in_float32(spec, inputs, transform=lambda x: x):
  """The float32 reference on `inputs` (floating ones through `transform`, widened), rounded
  to the task's output dtype: a kernel computing in float32 inside."""
  wide = [transform(x).astype(jnp.float32) if _floating(x) else x for x in inputs]
  return jax.jit(get_task(spec.name).reference)(*wide).astype(spec.output_dtype)


@pytest.mark.parametrize("name", [*CHEAT_TASKS, *INSENSITIVE])
def test_bfloat16_passes_float32_inside_and_fails_computing_below_bfloat16(name):
  spec = get_task(name).at_precision(BFLOAT16)
  inputs = spec.make_inputs(Size.SMALL, SEED)
  want = spec.expected(*inputs)
  assert compare(_in_float32(spec, inputs), want, spec.tolerance).passed
  cheats = {"float8 e4m3 output": _e4m3(want.astype(jnp.float32)).astype(jnp.bfloat16),
            "4-bit mantissa output": _truncated(want)}
  for what, out in cheats.items():
    result = compare(out, want, spec.tolerance)
    assert not result.passed, f"{name} with a {what} passed the bfloat16 tolerance"
  low_inputs = compare(_in_float32(spec, inputs, _e4m3), want, spec.tolerance)
  assert low_inputs.passed == (name in INSENSITIVE), (name, low_inputs)


@pytest.mark.parametrize("name", [*CHEAT_TASKS, "pwm_scan"])
def test_a_float32_task_answered_in_bfloat16_fails_the_float32_tolerance(name):
  """The bfloat16 task's answer (the XLA baseline on the rounded inputs) given to the float32
  task, widened back to float32."""
  spec = get_task(name)
  inputs = spec.make_inputs(Size.SMALL, SEED)
  low = spec.at_precision(BFLOAT16)
  rounded = [x.astype(jnp.bfloat16) if _floating(x) else x for x in inputs]
  answer = jax.jit(low.reference)(*rounded).astype(jnp.float32)
  result = compare(answer, spec.expected(*inputs), spec.tolerance)
  assert not result.passed, f"{name}: a bfloat16 answer passed the float32 tolerance"


def test_the_bfloat16_classes_are_at_least_one_ulp_and_looser_than_float32():
  one_ulp = 2.0 ** -7
  for kind, tol in BF16_TOLERANCES.items():
    f32 = TOLERANCES[kind]
    assert tol.kind is kind and tol.atol_scale is f32.atol_scale
    assert one_ulp <= tol.rtol < 4 * one_ulp and tol.rtol >= f32.rtol and tol.atol >= f32.atol
    assert (tol.max_rel_l2 is None) == (f32.max_rel_l2 is None)


# ---------------------------------------------------------------------------------------------
# The evaluation path carries the precision

RELEASED_RECORDS = sorted(REPO.glob(
    "data/results/*/records.jsonl"))


def test_requests_and_records_without_a_precision_read_as_float32():
  request = ExportRequest(task="relu", source="", filename="k.py", exports=(("small", ("cpu",)),))
  old = json.loads(request.to_json())
  del old["precision"]
  assert ExportRequest.from_json(json.dumps(old)).precision == FLOAT32
  low = dataclasses.replace(request, precision=BFLOAT16)
  assert ExportRequest.from_json(low.to_json()) == low
  assert RELEASED_RECORDS, "no released run in data/results"
  line = json.loads(RELEASED_RECORDS[0].read_text().splitlines()[0])
  line.pop("precision", None)  # as every record before release 5 was written
  record = schema.from_json_dict(schema.EvalRecord, line)
  assert record.precision == FLOAT32
  assert schema.config_row(record)["precision"] == FLOAT32  # `runs` says float32 where absent
  assert schema.to_json_dict(record)["precision"] == FLOAT32


def test_evaluate_refuses_an_unknown_precision_before_anything_runs():
  with pytest.raises(ValueError, match="valid precisions: float32, bfloat16"):
    evaluate("relu", source="def kernel(x, interpret=False): return x", precision="fp8",
             device="cpu")


def test_the_cli_evaluates_a_fixed_kernel_at_bfloat16(capsys):
  kernel = REPO / "kernels_gpu" / "softmax.py"
  code = evaluate_main(["--task", "softmax", "--kernel", str(kernel), "--device", "cpu",
                        "--precision", "bfloat16", "--seeds", "1", "2", "--json"])
  record = json.loads(capsys.readouterr().out)
  assert code == 0 and record["status"] == "pass", record["reasons"]
  assert record["precision"] == BFLOAT16 and record["rtol"] == 1.6e-2
  assert record["input_shapes"] == ["(256, 256)"] and record["input_families"] == [
      "shifted", "shifted_down", "peaked", "spiked"]


def test_the_precision_table_is_generated_from_the_registry_and_in_the_docs():
  table = precision_table(BFLOAT16)
  rows = [line for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()]
  assert len(rows) == len(SPECS)
  float32_rows = {row.split(" | ")[1] for row in rows if " | float32 | " in row}
  assert float32_rows == FLOAT32_OUTPUTS
  assert "| 6 | layernorm | x | - | bfloat16 |" in table and "| shifted |" in table
  docs = REPO / "docs" / "precisions.md"
  assert docs.read_text().rstrip().endswith(table), "regenerate docs/precisions.md's table"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_a_kernels_configs_are_per_precision(spec):
  """shape_class names the floating dtype where it is not float32: a float32 table entry never
  configures a bfloat16 call (and float32's classes are today's)."""
  module = load_kernel("gpu", spec.name)
  wide = module.shape_class(*spec.input_structs(Size.MEDIUM))
  low = module.shape_class(*spec.at_precision(BFLOAT16).input_structs(Size.MEDIUM))
  assert ":" not in wide
  assert low == (wide if spec.name in {"one_hot", "nucleotide_onehot"} else wide + ":bfloat16")


# ---------------------------------------------------------------------------------------------
# The registry: a third precision is one descriptor, and an unknown one is refused where it enters.

FLOAT16 = Precision(name="float16", dtype="float16", itemsize=2, tolerances=BF16_TOLERANCES,
                    ceiling="matmul_bf16_tflops", seed=False, config="fp16")
UNKNOWN = "unknown precision 'float16'; valid precisions: float32, bfloat16"
CHOICE = "invalid choice: 'float16' (choose from 'float32', 'bfloat16')"  # argparse's
CEILINGS = Ceilings(copy_gbps=3900.0, read_gbps=4000.0, matmul_tflops=400.0, method="cupti",
                    matmul_bf16_tflops=800.0)


@pytest.fixture
def float16(monkeypatch):
  """float16 registered beside float32 and bfloat16, for the length of a test."""
  monkeypatch.setitem(precision.PRECISIONS, FLOAT16.name, FLOAT16)
  return FLOAT16


def test_the_descriptors_say_what_follows_from_each_precision():
  assert [get_precision(p) for p in PRECISIONS] == list(PRECISIONS.values())
  single, half = get_precision(FLOAT32), get_precision(BFLOAT16)
  assert (single.dtype, single.itemsize, single.config, single.suffix) == (
      "float32", 4, "default", "")
  assert (half.dtype, half.itemsize, half.config, half.suffix) == ("bfloat16", 2, "bf16", "_bf16")
  assert [p.name for p in PRECISIONS.values() if p.seed] == [DEFAULT_PRECISION] == [FLOAT32]
  assert (single.tolerances, half.tolerances) == (TOLERANCES, BF16_TOLERANCES)
  assert all(jnp.dtype(p.dtype).itemsize == p.itemsize for p in PRECISIONS.values())
  assert (CEILINGS.matmul_for(FLOAT32), CEILINGS.matmul_for(BFLOAT16)) == (400.0, 800.0)
  assert {p.ceiling for p in PRECISIONS.values()} <= set(MATMUL_CEILINGS)
  # the names stored records give the rates, each a field of Ceilings
  assert MATMUL_CEILINGS == ("matmul_tflops", "matmul_bf16_tflops")
  assert set(MATMUL_CEILINGS) <= {f.name for f in dataclasses.fields(Ceilings)}
  with pytest.raises(dataclasses.FrozenInstanceError):
    half.config = "other"  # type: ignore[misc]


def test_a_registered_precision_is_a_task_dtype_a_tolerance_a_ceiling_and_a_key(float16,
                                                                                monkeypatch):
  spec = get_task("layernorm").at_precision("float16")
  assert spec.precision == "float16" and spec.output_dtype == "float16"
  assert {i.dtype for i in spec.inputs} == {"float16"}
  assert spec.tolerance == BF16_TOLERANCES[spec.tolerance_class]
  assert tolerance_for(ToleranceClass.MATMUL, "float16") == BF16_TOLERANCES[ToleranceClass.MATMUL]
  x = spec.make_inputs(Size.SMALL, SEED)[0]
  assert x.dtype == jnp.float16
  assert spec.at_precision(FLOAT32) is get_task("layernorm")
  assert CEILINGS.matmul_for("float16") == 800.0  # its own rate, not float32's
  key = EvalKey("relu", "gpu", "medium", "float16")
  assert key.label() == "relu/gpu/medium/float16" and precision_field("float16") == {
      "precision": "float16"}
  keys = [key, EvalKey("relu", "gpu", "medium", BFLOAT16), EvalKey("relu", "gpu", "medium")]
  assert [k.precision for k in sorted(keys)] == [FLOAT32, BFLOAT16, "float16"]
  assert evaluate_parser().parse_args(
      ["--task", "relu", "--kernel", "k.py", "--precision", "float16"]).precision == "float16"
  table = precision_table("float16")
  assert "| # | task | float16 inputs | integer inputs | output | why | tolerance at float16 |" in table
  assert "| 6 | layernorm | x | - | float16 |" in table
  assert "float32 on float16 inputs" in table  # the tasks whose reference accumulates
  unmeasured = dataclasses.replace(FLOAT16, name="float8", ceiling="matmul_fp8_tflops")
  monkeypatch.setitem(precision.PRECISIONS, "float8", unmeasured)
  with pytest.raises(ValueError, match="precision 'float8' is held against 'matmul_fp8_tflops', "
                                       "which the judge does not measure"):
    CEILINGS.matmul_for("float8")


def _timed_matmuls(monkeypatch):
  """ceilings.measure on a pretend GPU with small sizes, each call timed at 0.5 ms; the dtypes
  of the matmuls it timed, in order."""
  monkeypatch.setattr(ceilings.jax, "default_backend", lambda: "gpu")
  monkeypatch.setattr(ceilings, "COPY_ELEMENTS", 1 << 10)
  monkeypatch.setattr(ceilings, "MATMUL_N", 8)
  dtypes = []

  def fake(fns, sets, *, iterations, rounds, warmup, method):  # pylint: disable=unused-argument
    dtypes.extend(args[0].dtype.name for (args,) in sets if len(args) == 2)
    return [timing.Timed(samples=timing.Samples(method=method, samples_ms=(0.5, 0.5),
                                                kernel_names=()), kept={}) for _ in fns]
  monkeypatch.setattr(ceilings, "time_interleaved", fake)
  return dtypes


def test_the_judge_times_one_matmul_per_rate_in_its_precisions_dtype(float16, monkeypatch):
  """One matmul per rate the registered precisions are held against, in the dtype of the
  first precision held against it (float16 shares bfloat16's here: not timed again); a
  precision whose rate is not a measured one is refused, not silently left out."""
  dtypes = _timed_matmuls(monkeypatch)
  got = ceilings.measure(timing.TimingMethod.WALLCLOCK)
  assert dtypes == ["float32", "bfloat16"]
  assert got.matmul_tflops == got.matmul_bf16_tflops == pytest.approx(2 * 8**3 / 0.5 / 1e9)
  assert got.method == ("wallclock: 1 GiB copy and read-only sum, 8^3 float32 and bfloat16 XLA "
                        "matmuls at default precision, median of 10")
  dtypes.clear()
  half = dataclasses.replace(PRECISIONS[BFLOAT16], dtype="float16")  # the descriptor's dtype
  monkeypatch.setitem(precision.PRECISIONS, BFLOAT16, half)
  assert "float16 XLA matmuls" in ceilings.measure(timing.TimingMethod.WALLCLOCK).method
  assert dtypes == ["float32", "float16"]
  monkeypatch.setitem(precision.PRECISIONS, "float16",
                      dataclasses.replace(float16, ceiling="matmul_fp16_tflops"))
  with pytest.raises(ValueError, match="precision 'float16' is held against "
                                       "'matmul_fp16_tflops', which the judge does not measure"):
    ceilings.measure(timing.TimingMethod.WALLCLOCK)


def test_ceilings_raise_serialize_and_name_the_run_field_by_field():
  """Every rate, whatever precision it belongs to, is raised, serialized and put on the
  record's run under `ceiling_<its name>`."""
  low = Ceilings(copy_gbps=1.0, read_gbps=None, matmul_tflops=3.0, method="a",
                 matmul_bf16_tflops=None)
  high = Ceilings(copy_gbps=0.5, read_gbps=2.0, matmul_tflops=4.0, method="b",
                  matmul_bf16_tflops=9.0)
  assert low.raised(high) == Ceilings(copy_gbps=1.0, read_gbps=2.0, matmul_tflops=4.0,
                                      method="a", matmul_bf16_tflops=9.0)
  assert high.to_json() == {"copy_gbps": 0.5, "read_gbps": 2.0, "matmul_tflops": 4.0,
                            "matmul_bf16_tflops": 9.0, "bandwidth_gbps": 2.0, "method": "b"}
  run = high.run_info(RunIdentity(command="c", run_id="r", gpu_index=0))
  assert run == schema.RunInfo(command="c", run_id="r", gpu_index=0, ceiling_copy_gbps=0.5,
                               ceiling_read_gbps=2.0, ceiling_matmul_tflops=4.0,
                               ceiling_matmul_bf16_tflops=9.0, ceiling_method="b")


def test_the_runs_report_names_each_precisions_measured_rate(float16):
  """Each precision's matmul rate, after float32's, where the run measured it (float16 is
  held against bfloat16's here)."""
  manifest = {"ceilings": {"copy_gbps": 3900.0, "read_gbps": 4000.0, "matmul_tflops": 410.3,
                           "matmul_bf16_tflops": 820.5}}
  assert report.summary([], manifest).splitlines()[0] == (
      "ceilings: copy 3900 GB/s, read 4000 GB/s, matmul 410.3 TFLOP/s (bfloat16 820.5, "
      "float16 820.5)")
  manifest["ceilings"]["matmul_bf16_tflops"] = None  # a run before bfloat16 was measured
  assert report.summary([], manifest).splitlines()[0].endswith("matmul 410.3 TFLOP/s")


def _float16(records):
  """The same evaluations at float16, each kernel 1.25 times slower than at float32, so that a
  float16 figure can be told from a float32 one."""
  out = []
  for r in records:
    runtime = None if r.runtime_ms is None else r.runtime_ms * 1.25
    speedup = None if runtime is None or r.baseline_ms is None else r.baseline_ms / runtime
    out.append(dataclasses.replace(r, precision="float16", runtime_ms=runtime, speedup=speedup))
  return out


def test_a_card_builds_with_a_third_precision_in_its_own_config(float16, tmp_path, monkeypatch):
  trees = rf.write_tree(tmp_path / "trees")
  records = rf.standard_records(trees)
  single = rf.write_run(tmp_path / "run-a", records, rf.artifacts_for(records))
  half = _float16(records)
  artifacts = [dataclasses.replace(a, precision="float16") for a in rf.artifacts_for(half)]
  run16 = rf.write_run(tmp_path / "run-b", half, artifacts, precisions=["float16"])
  summary = build_dataset([single, run16], tmp_path / "out", kernel_trees=trees, repo_id="org/pb")
  out = summary.out_dir
  assert summary.rows["fp16"] == summary.rows["default"] == {
      "level_1": 2, "level_2": 1, "level_3": 1}
  data = DatasetCard.load(out / "README.md").data.to_dict()
  assert {"default", "fp16", "runs"} <= {c["config_name"] for c in data["configs"]}
  assert "fp16" in {i["config_name"] for i in data["dataset_info"]}
  fixed = {r.task: r for r in half if r.variant == "gpu"}
  rows = [row for split in sorted((out / "fp16").glob("*.parquet"))
          for row in pd.read_parquet(split).itertuples()]
  assert sorted(row.Op_Name for row in rows) == sorted(fixed)
  for row in rows:
    assert (row.Pallas_Runtime, row.Pallas_Speedup) == (fixed[row.Op_Name].runtime_ms,
                                                        fixed[row.Op_Name].speedup)
  assert all("float16" in row.JAX_Code_Functional for row in rows)  # it draws float16 inputs
  assert loading.configs() == ("default", "bf16", "fp16", "runs", "artifacts", "candidates")
  monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
  assert sorted(loading.to_pandas(out, "fp16")["Op_Name"]) == sorted(fixed)  # loads by name
  runs = pd.read_parquet(next((out / "runs").glob("*.parquet")))
  assert runs.groupby("precision").size().to_dict() == {"float16": 8, "float32": 8}
  plots = sorted(p.name for p in (out / "plots").iterdir())
  assert plots == ["roofline.png", "roofline_fp16.png", "speedup.png", "speedup_fp16.png"]
  assert "### Size `medium` (float16)" in (out / "README.md").read_text()
  alone = build_dataset([single], tmp_path / "alone", kernel_trees=trees, repo_id="org/pb").out_dir
  assert (out / "default" / "level_1-00000-of-00001.parquet").read_bytes() == (
      alone / "default" / "level_1-00000-of-00001.parquet").read_bytes()


def test_a_third_precisions_repeats_get_their_part_of_the_card(float16, tmp_path):
  """A second run repeating float16 evaluations: the reproducibility section has a float16
  part beside float32's, as bfloat16 has."""
  trees = rf.write_tree(tmp_path / "trees")
  records = rf.standard_records(trees)
  half = _float16(records)
  first = rf.write_run(tmp_path / "r1", records + half, precisions=["float32", "float16"])
  again = rf.write_run(tmp_path / "r2", half, precisions=["float16"])
  text = (build_dataset([first, again], tmp_path / "out", kernel_trees=trees).out_dir
          / "README.md").read_text()
  section = text.split("### Reproducibility\n", 1)[1].split("\n### ", 1)[0]
  assert "#### float32\n\nNo float32 evaluation was repeated.\n" in section
  part = section.split("#### float16\n", 1)[1]
  assert "evaluations were timed in two independent runs (runs `r1` and `r2`)" in part
  assert "the same verdict in both runs" in part


def _refusals(tmp_path):
  """Each place a precision enters, asked for float16 while it is not registered: (what is
  called, the error it must raise, the message it must say)."""
  trees = rf.write_tree(tmp_path / "trees")
  relu = rf.record(trees, "relu")
  bad_record = rf.write_run(tmp_path / "record", [dataclasses.replace(relu, precision="float16")])
  bad_plan = rf.write_run(tmp_path / "plan", [relu], precisions=["float16"])
  run = rf.write_run(tmp_path / "run", [relu])
  return {
      "get_precision": (lambda: get_precision("float16"), ValueError, UNKNOWN),
      "check_precision": (lambda: check_precision("float16"), ValueError, UNKNOWN),
      "precision_order": (lambda: precision_order("float16"), ValueError, UNKNOWN),
      "at_precision": (lambda: get_task("relu").at_precision("float16"), ValueError, UNKNOWN),
      "tolerance_for": (lambda: tolerance_for(ToleranceClass.EXACT, "float16"), ValueError,
                        "no tolerances for 'float16' outputs; outputs are float32 or bfloat16"),
      "matmul_for": (lambda: CEILINGS.matmul_for("float16"), ValueError, UNKNOWN),
      "EvalKey order": (lambda: sorted([EvalKey("relu", "gpu", "medium", "float16"),
                                        EvalKey("relu", "gpu", "medium")]), ValueError, UNKNOWN),
      "evaluate": (lambda: evaluate("relu", source="def kernel(x, interpret=False): return x",
                                    precision="float16", device="cpu"), ValueError, UNKNOWN),
      "a record": (lambda: rec.read_run(bad_record), BuildError, "unknown precision 'float16'"),
      "a manifest": (lambda: rec.read_run(bad_plan), BuildError, "unknown precision 'float16'"),
      "evaluate's CLI": (lambda: evaluate_parser().parse_args(
          ["--task", "relu", "--kernel", "k.py", "--precision", "float16"]), SystemExit,
          CHOICE),
      "regenerate's CLI": (lambda: regenerate.build_parser().parse_args(
          ["--precisions", "float16"]), SystemExit,
          "invalid choice(s) ['float16'] (choose from float32, bfloat16"),
      "the report's CLI": (lambda: report.main([str(run), "--precisions", "float16"]),
                           SystemExit, CHOICE),
      "the speed goals' CLI": (lambda: speed_goals.main([str(run), "--precision", "float16"]),
                               SystemExit, CHOICE),
  }


REFUSALS = ("get_precision", "check_precision", "precision_order", "at_precision",
            "tolerance_for", "matmul_for", "EvalKey order", "evaluate", "a record", "a manifest",
            "evaluate's CLI", "regenerate's CLI", "the report's CLI", "the speed goals' CLI")


@pytest.mark.parametrize("entry", REFUSALS)
def test_an_unknown_precision_is_refused_with_the_valid_ones_where_it_enters(entry, tmp_path,
                                                                             capsys):
  call, error, message = _refusals(tmp_path)[entry]
  with pytest.raises(error) as raised:
    call()
  said = capsys.readouterr().err if error is SystemExit else str(raised.value)
  assert message in said


def test_autotune_refuses_an_unknown_precision(tmp_path, capsys):
  assert autotune.main(["--tasks", "relu", "--precisions", "float16", "--allow-cpu",
                        "--results", str(tmp_path / "tuned.jsonl")]) == 2
  assert f"error: {UNKNOWN}" in capsys.readouterr().err
