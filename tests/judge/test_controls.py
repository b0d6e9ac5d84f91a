"""The evaluator judged by its controls: every broken kernel caught, every honest one passed.

Negative controls live in tests/controls/ (one file each, expected outcome in its docstring);
positive controls (pos_*) are correct kernels written in other styles than kernels_gpu/.
All run on the CPU in interpret mode, through the sandboxed exporter and the judge process,
in one module-scoped set of runs at once (tests/two_cores.py): the controls and the shipped
kernels in two halves, and beside them the hanging kernel and the memory hog, each with its
limits. The attacks on the judge itself are in judge/test_attacks.py (controls adv_*).
"""

import dataclasses
import json
import pathlib
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from pallasbench_dataset import evaluate as evaluate_cli
from pallasbench_dataset.evaluation.judge import core as judge
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.kernels import kernel_path
from pallasbench_dataset.schema import ErrorType, EvalRecord, Status, from_json_dict, to_json_dict
from pallasbench_dataset.tasks import Size, get_task

from tests import two_cores
from tests.paths import CONTROLS

OPTIONS = EvalOptions(seeds=(11, 12, 13, 14, 15), check_edge=False, timing_iterations=2,
                      timing_rounds=1, warmup=1)
LIMITS = Limits(timeout_s=300, memory_bytes=8 << 30)

# control file -> (task, expected status, expected error type or a text every reason list contains)
EXPECTED = {
    "identity_relu": ("relu", Status.REJECTED, "not_input_copy"),
    "zeros_relu": ("relu", Status.REJECTED, "output_std"),
    "constant_sigmoid": ("sigmoid", Status.REJECTED, "output_std"),
    "jnp_only_relu": ("relu", Status.REJECTED, "no Pallas kernel in the exported module"),
    "interpret_forced_relu": ("relu", Status.REJECTED, "no Pallas kernel in the exported module"),
    "outside_matmul": ("matmul", Status.REJECTED, "contractions outside the kernel"),
    "outside_exp": ("exp", Status.REJECTED, "the real work is done outside the kernel"),
    "cached_relu": ("relu", Status.REJECTED, "host callbacks"),
    "mutates_input_relu": ("relu", Status.REJECTED, "writes to its input refs"),
    "ignores_input_add": ("add", Status.REJECTED, "output ignores input(s) ['y']"),
    "unwritten_relu": ("relu", Status.INCORRECT, "NaN/Inf where the reference is finite"),
    "wrong_math_relu": ("relu", Status.INCORRECT, "not allclose"),
    "nan_relu": ("relu", Status.INCORRECT, "NaN/Inf where the reference is finite"),
    "wrong_dtype_relu": ("relu", Status.ERROR, ErrorType.OUTPUT),
    "wrong_shape_relu": ("relu", Status.ERROR, ErrorType.OUTPUT),
    "raises_relu": ("relu", Status.ERROR, ErrorType.TRACE),
    "syntax_error": ("relu", Status.ERROR, ErrorType.LOAD),
    "no_kernel_function": ("relu", Status.ERROR, ErrorType.LOAD),
    "aborts_relu": ("relu", Status.ERROR, ErrorType.CRASH),
    "pos_calls_reference_relu": ("relu", Status.PASS, None),
    "pos_softmax_rowwise": ("softmax", Status.PASS, None),
    "pos_matmul_strips": ("matmul", Status.PASS, None),
    "pos_add_tiles": ("add", Status.PASS, None),
}


def _item(name, task, options=OPTIONS, size="small"):
  path = CONTROLS / f"{name}.py"
  return WorkItem(task=task, variant="candidate", size=size, source=path.read_text(),
                  filename=str(path), options=options)


# The shipped kernels judged with the edge shape: (variant, task).
SHIPPED = (("gpu", "relu"), ("tpu", "layernorm"), ("gpu", "pairwise_distance"))
WITH_EDGE = dataclasses.replace(OPTIONS, check_edge=True)


@dataclasses.dataclass(frozen=True)
class Judged:
  controls: dict[str, EvalRecord]
  shipped: list[EvalRecord]       # in SHIPPED's order
  hang: list[EvalRecord]          # hangs_relu, then pos_calls_reference_relu in the same run
  hog: EvalRecord


@pytest.fixture(scope="module")
def judged() -> Judged:
  controls = [_item(name, task) for name, (task, _, _) in EXPECTED.items()]
  shipped = [WorkItem(task=t, variant=v, size="small", source=kernel_path(v, t).read_text(),
                      filename=f"{v}/{t}.py", options=WITH_EDGE) for v, t in SHIPPED]
  first, second, hang, (hog,) = two_cores.run_at_once([
      *((half, LIMITS) for half in two_cores.halves([*controls, *shipped])),
      ([_item("hangs_relu", "relu"), _item("pos_calls_reference_relu", "relu")],
       Limits(timeout_s=40, memory_bytes=8 << 30)),  # room for the honest one on a loaded host
      ([_item("hogs_memory_relu", "relu")], Limits(timeout_s=120, memory_bytes=3 << 30))])
  records = [*first, *second]
  return Judged(controls=dict(zip(EXPECTED, records)), shipped=records[len(EXPECTED):],
                hang=hang, hog=hog)


@pytest.fixture(scope="module")
def control_records(judged):
  return judged.controls


@pytest.mark.parametrize("name", list(EXPECTED))
def test_control_gets_its_exact_status(control_records, name):
  _, status, detail = EXPECTED[name]
  record = control_records[name]
  assert record.status is status, (name, record.status, record.reasons, record.error)
  if isinstance(detail, ErrorType):
    assert record.error_type is detail, (record.error_type, record.error)
    assert record.error and record.reasons
  elif detail is not None:
    assert any(detail in r for r in record.reasons), record.reasons
  else:
    assert record.correct and record.robust and record.reasons == ()
    assert record.runtime_ms > 0 and record.baseline_ms > 0 and record.speedup > 0
    assert record.timing_method == "wallclock" and not record.timing_comparable
  assert (record.status is Status.PASS) == (record.reasons == ())
  assert record.judge_version == judge.JUDGE_VERSION and "tripwire" in record.sandbox


def test_every_control_file_has_an_expectation():
  files = {p.stem for p in CONTROLS.glob("*.py")}
  special = {"hangs_relu", "hogs_memory_relu"}
  assert files - {f for f in files if f.startswith("adv_")} == set(EXPECTED) | special


def test_records_round_trip_through_json(control_records):
  for record in control_records.values():
    text = json.dumps(to_json_dict(record))
    assert json.dumps(to_json_dict(from_json_dict(EvalRecord, json.loads(text)))) == text


def test_hanging_kernel_times_out_and_the_run_goes_on(judged):
  records = judged.hang
  assert records[0].status is Status.TIMEOUT and records[0].error_type is ErrorType.TIMEOUT
  assert records[1].status is Status.PASS


def test_memory_hog_is_killed_at_the_limit(judged):
  record = judged.hog
  assert record.status is Status.ERROR and record.error_type is ErrorType.OUT_OF_MEMORY
  assert "exceeded" in record.error


def test_speedup_is_baseline_over_kernel():
  assert judge.speedup(kernel_ms=2.0, baseline_ms=4.0) == 2.0  # the kernel is twice as fast
  assert judge.speedup(kernel_ms=4.0, baseline_ms=2.0) == 0.5


def test_general_shapes_and_lowering_checks_of_the_shipped_trees(judged):
  gpu, tpu, tuned = judged.shipped
  assert gpu.status is Status.PASS and gpu.general_shapes is True
  assert tpu.status is Status.PASS and tpu.general_shapes is False  # 128-row blocks, 333 rows
  assert "edge shape" in tpu.edge_error and tpu.reasons == ()  # reported, not a rejection
  assert gpu.compile.lowers_triton is True and gpu.compile.lowers_tpu is False
  assert tpu.compile.lowers_tpu is True
  assert gpu.compile.pallas_calls[0].name == "relu" and gpu.compile.triton_ir_bytes > 0
  # the structure read from the Triton export; the config a tunable kernel declares for it
  assert gpu.backends == ("triton",) and json.loads(gpu.kernel_config) == dict(block=4096,
                                                                                num_warps=8)
  assert tpu.kernel_config is None  # the originals declare no config
  assert tuned.status is Status.PASS and tuned.backends == ("triton",)
  assert json.loads(tuned.kernel_config) == dict(block=64, chunk=1, num_stages=2, num_warps=4)


def test_cli_exit_status_and_json(capsys):
  ok = evaluate_cli.main(["--task", "relu", "--kernel", str(CONTROLS / "pos_calls_reference_relu.py"),
                          "--device", "cpu", "--json", "--seeds", "1", "2", "3", "4", "5"])
  out = json.loads(capsys.readouterr().out)
  assert ok == 0
  for field in ("task", "status", "correct", "robust", "reasons", "max_abs_error", "runtime_ms",
                "baseline_ms", "speedup"):
    assert field in out
  assert evaluate_cli.main(["--task", "relu", "--kernel", str(CONTROLS / "wrong_math_relu.py"),
                            "--device", "cpu"]) == 1
  assert evaluate_cli.main(["--task", "relux", "--kernel", str(CONTROLS / "wrong_math_relu.py"),
                            "--device", "cpu"]) == 2
  assert evaluate_cli.main(["--task", "relu", "--kernel", "missing.py", "--device", "cpu"]) == 2
  assert "unknown task 'relux'" in capsys.readouterr().err


def test_timing_draws_what_each_call_reads():
  """A gather shares its big table (larger than the L2) across calls and draws the ids for each
  call; other tasks draw every input for each call, from fresh OS seeds (no public timing
  input)."""
  spec = get_task("embedding_lookup")
  dims = spec.dims(Size.SMALL)  # table 8 MB, 128 ids
  sets = judge.timing_sets(spec, dims, l2_bytes=1 << 20)
  given = []
  for call in range(4):
    given.append(sets.args(call))
    assert given[-1][0] is given[0][0]
    given[-1] = (given[-1][0], np.array(given[-1][1]))
    sets.after(call)
  assert len({row.tobytes() for _, row in given}) == 4
  relu = get_task("relu")
  first, again = (judge.timing_sets(relu, relu.dims(Size.SMALL), l2_bytes=1 << 20)
                  for _ in range(2))
  assert not jnp.array_equal(first.args(0)[0], again.args(0)[0])


def test_device_auto_resolves_to_cpu_without_a_gpu():
  assert evaluate_cli.resolve_device("auto") == "cpu"
  assert evaluate_cli.resolve_device("cpu") == "cpu"
  with pytest.raises(RuntimeError, match="no usable NVIDIA GPU"):
    evaluate_cli.resolve_device("gpu")
  with pytest.raises(ValueError, match="auto, gpu or cpu"):
    evaluate_cli.resolve_device("tpu")


def test_evaluate_works_from_a_plain_script_without_a_main_guard(tmp_path):
  """The exporter and the judge start as programs: nothing re-imports the caller's script
  (a multiprocessing 'spawn' child would run this script's top level again, recursively).
  The script passes the kernel as source text (`source=`), so this is also the API's test
  of source text: the record is the candidate's, of its task, on the seeds asked."""
  script = tmp_path / "score.py"
  marker = tmp_path / "runs.txt"
  script.write_text(
      "import pathlib\n"
      f"with open({str(marker)!r}, 'a') as f:\n    f.write('ran\\n')\n"
      "from pallasbench_dataset.evaluation.judge.core import EvalOptions\n"
      "from pallasbench_dataset.evaluate import evaluate\n"
      f"source = pathlib.Path({str(CONTROLS / 'pos_add_tiles.py')!r}).read_text()\n"
      "r = evaluate('add', source=source, size='small', device='cpu', options=EvalOptions("
      "seeds=(1, 2), check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1))\n"
      "print('STATUS', r.status.value, r.variant, r.task, list(r.seeds))\n")
  proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                        timeout=600, check=False, cwd=tmp_path)
  assert "STATUS pass candidate add [1, 2]" in proc.stdout, proc.stderr[-2000:]
  assert marker.read_text() == "ran\n"  # the script's top level ran once
