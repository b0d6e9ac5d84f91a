"""Red team round 22 (docs/red-team/round22.md): the fixes of rounds 20 and 21.

1. Round 20 drew every timing input and the sample of kept timed outputs from a stream the
   evaluation's seeds determine (`core.drawn_from`), on the premise that the seeds are secret.
   Seeds a caller fixes are not (`--seeds`, `EvalOptions(seeds=...)`, which the reward's cache
   serves passes on; the population's cheats probe "the public seeds 0-4"). On such seeds a
   kernel author knows, before any run, every timed call's inputs and which of them the judge
   keeps: a kernel that computes on those and on anything it does not recognise, and returns
   zeros for the other timed calls, passes (measured here with the real judge in-process).
   Before the fix those draws were the OS's on every evaluation.
2. Round 20 refused clocks read by inline PTX (`ptx_state`) only. A Mosaic GPU kernel reaches
   the same registers through NVVM ops (`plgpu.inline_mgpu` builds any op):
   `nvvm.read.ptx.sreg.clock` and its kind, `llvm.call_intrinsic` of the sreg intrinsics,
   `llvm.intr.readcyclecounter`. The cuda export of a real Pallas kernel that does so is read
   without a finding (tests/controls/adv_r22_mgpu_clock_relu.py).
3. `ptx_state` matches the register's name as one token of the asm string; an operand that
   prints a digit completes it (`%clock6$1` with an immediate 4 is `%clock64` once LLVM has
   substituted operands; the PTX is reasoned, the regex measured).
5. (GPU, reasoned; the rule measured) round 20 retires a GPU judge after a kernel that ran and
   did not pass, since memcheck watched one call of it. A kernel that passes ran more calls
   unwatched: memcheck runs before the timing stage (core.py:474), which then runs it about 53
   times (3 warm-up, 50 timed) and no checker watches. One that writes past its buffers only on
   some inputs (x[0, 0] > 2, say: 2% of draws, rarely the one memcheck watches) passes, and its
   judge, with whatever it reached (the cached shipped and reference executables' buffers),
   judges the next item.
6. (a false positive) round 20 accepts UTF-8 under any of its names; a file that declares ASCII
   (or Latin-1) and holds only ASCII is still refused, though every one of its bytes reads as
   the same character in UTF-8: Python, the judge's UTF-8 reading and the published text agree
   (measured: `read_source` refuses `ascii`, `us-ascii`, `latin-1`, `cp1252`).

Each test states what should hold; written as strict xfails, they pass since the fixes
(round22.md, "Since"), but for finding 5's, kept open by choice (its reason says why).
"""

from __future__ import annotations

import dataclasses
import functools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir import ir

from pallasbench_dataset.evaluation.judge import core as judge
from pallasbench_dataset.evaluation.judge import kernel_state, module_analysis
from pallasbench_dataset.evaluation.pipeline import driver
from pallasbench_dataset import kernels
from pallasbench_dataset.kernels import load_module
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.schema import Status
from pallasbench_dataset.tasks import get_task

from tests import runfixtures as rf
from tests.judge import test_building_blocks as bb
from tests.judge import test_kernel_state as ks
# The module-analysis stand-in of the building blocks' in-process judge.
from tests.judge.test_building_blocks import analysis  # noqa: F401  pylint: disable=unused-import
from tests.paths import CONTROLS

RELU = get_task("relu")
SMALL = RELU.dims("small")
PUBLIC = (0, 1, 2, 3, 4)  # fixed seeds a caller chose, known to whoever writes the kernel
ITERATIONS, ROUNDS, WARMUP = 50, 2, 3  # EvalOptions' defaults


# -- 1. public seeds tell a kernel which timed outputs are checked ------------------------------

def _unchecked_first_elements(seeds, checked: int) -> np.ndarray:
  """What the kernel's author computes offline from `seeds` alone, had the judge's draws been a
  function of them (as in round 20's fix, `drawn_from(seeds, use)`): the first element of every
  warm-up and timed call's input, but for the calls whose outputs the judge would keep."""
  def stream(use):
    return random.Random(f"{use} {tuple(seeds)}")
  keep = stream("kept outputs").sample(range(ITERATIONS), checked)
  sets = judge.TimingSets(RELU, SMALL, warmup=WARMUP, draw=stream("timing "))
  firsts = []
  for call in range(-WARMUP, ITERATIONS):
    (x,) = sets.args(call)
    if call not in keep:
      firsts.append(float(x[0, 0]))
    sets.after(call)
  return np.asarray(firsts, np.float32)


def _skipping(skip: np.ndarray):
  """A relu that returns zeros, not computing, on any input whose first element is in `skip`,
  and computes on anything else: a pure function of its input."""
  table = jnp.asarray(skip)

  def kernel(x):
    return jnp.where(jnp.any(x[0, 0] == table), jnp.zeros_like(x), jnp.maximum(x, 0.0))
  return kernel


def test_a_kernel_that_knows_the_seeds_cannot_know_its_timed_inputs(
    analysis, monkeypatch):  # pylint: disable=redefined-outer-name
  """On public seeds, the timed inputs and the kept sample come from the judge's secret: the
  offline table of a seeds-only derivation meets none of the inputs the kernel is given, and
  two evaluations on the same seeds draw different ones."""
  checked = judge.timed_outputs_checked(RELU.output_bytes(SMALL), ITERATIONS, comparable=False)
  skip = _unchecked_first_elements(PUBLIC, checked)
  assert len(skip) == WARMUP + ITERATIONS - checked == 50
  given: list[float] = []
  original = judge.TimingSets.args

  def args(self, call):
    out = original(self, call)
    if not self.whose:  # the candidate's sets
      given.append(float(out[0][0, 0]))
    return out
  monkeypatch.setattr(judge.TimingSets, "args", args)
  report = bb._report(bb._entry(artifacts=bb._artifacts(_skipping(skip))))  # pylint: disable=protected-access
  options = dict(seeds=PUBLIC, timing_iterations=ITERATIONS, timing_rounds=ROUNDS, warmup=WARMUP)
  first, _ = bb._evaluate(report, **options)  # pylint: disable=protected-access
  firsts, given[:] = list(given), []
  again, _ = bb._evaluate(report, **options)  # pylint: disable=protected-access
  assert first.status is again.status is Status.PASS and first.seeds == again.seeds == PUBLIC
  assert firsts and not set(np.asarray(firsts, np.float32)) & set(skip), (
      "the kernel's offline table, computed from the public seeds, met its timed inputs")
  assert firsts != given  # drawn from the judge's own secret each time


# -- 2. a clock read by an NVVM op, not by inline PTX --------------------------------------------

def test_a_mosaic_gpu_kernel_that_reads_the_clock_by_an_nvvm_op_is_stateful():
  module = load_module((CONTROLS / "adv_r22_mgpu_clock_relu.py").read_text(),
                       "adv_r22_mgpu_clock_relu.py")
  text = export_for("cuda", functools.partial(module.kernel, interpret=False),
                    *RELU.input_structs("small")).mlir_module()
  names: set[str] = set()

  def collect(parsed: ir.Module) -> None:
    parsed.operation.walk(lambda op: names.add(op.operation.name) or ir.WalkResult.ADVANCE)
  ks._edit_mosaic(text, collect)  # pylint: disable=protected-access
  assert ks.PREFIX + "nvvm.read.ptx.sreg.clock" in names
  report = module_analysis.analyze_module(text)
  reasons = module_analysis.module_reasons(report, task_flops=RELU.flops(SMALL),
                                           output_elements=512 * 512,
                                           task_bytes=RELU.io_bytes(SMALL))
  assert [k.backend for k in report.kernels] == ["mosaic_gpu"]
  assert report.stateful_ops and reasons, (
      f"a Mosaic GPU kernel reading %clock by nvvm.read.ptx.sreg.clock: stateful ops "
      f"{report.stateful_ops}, reasons {reasons}")


def _device_op(name: str, result: str, **attributes):
  def edit(module: ir.Module) -> None:
    ir.InsertionPoint.at_block_begin(ks._launch_block(module)).insert(  # pylint: disable=protected-access
        ks._op(name, results=[result], **attributes))  # pylint: disable=protected-access
  return edit


@pytest.mark.parametrize("edit", [
    _device_op("nvvm.read.ptx.sreg.clock64", "i64"),
    _device_op("nvvm.read.ptx.sreg.globaltimer", "i64"),
    _device_op("nvvm.read.ptx.sreg.smid", "i32"),
    _device_op("llvm.call_intrinsic", "i64", intrin='"llvm.nvvm.read.ptx.sreg.globaltimer"'),
    _device_op("llvm.intr.readcyclecounter", "i64"),
], ids=["clock64", "globaltimer", "smid", "call_intrinsic_globaltimer", "readcyclecounter"])
def test_device_code_that_reads_a_clock_by_any_op_is_stateful(edit):
  # The same read by inline PTX is refused (round 20): the control of this test.
  assert ks._stateful(ks._edit_mosaic(ks._matmul_medium(), ks._asm("mov.u32 $0, %clock;")))[0]  # pylint: disable=protected-access
  found, reasons = ks._stateful(ks._edit_mosaic(ks._matmul_medium(), edit))  # pylint: disable=protected-access
  assert found and reasons, f"device code reading a clock or its placement: {found}, {reasons}"


# -- 3. a register's name completed by an operand --------------------------------------------------

@pytest.mark.parametrize("asm", ["mov.u64 $0, %clock6$1;", "mov.u32 $0, %pm$1;",
                                 "mov.u32 $0, %envreg$1;", "mov.u64 $0, %clock6${1};"])
def test_a_special_register_spelled_with_an_operand_is_found(asm):
  # With an immediate operand ("n" constraint, an llvm.mlir.constant 4 or 0), LLVM prints the
  # digit into the template: %clock64, %pm0, %envreg0.
  assert kernel_state.ptx_state(asm) is not None, f"{asm!r}: ptx_state passes it"


# -- 5. a passing kernel's unwatched timed calls ---------------------------------------------------

@pytest.mark.xfail(strict=True, reason="round 22, 5, open by choice: a pass keeps its judge after "
                   "53 unwatched calls; a fresh GPU judge per passing candidate would cost seconds "
                   "of start-up each (a reward's every paid completion), and the writes a kernel "
                   "keeps from memcheck's one watched call must also be correct on every checked "
                   "output")
def test_a_judge_whose_gpu_ran_unwatched_timed_calls_of_a_kernel_is_replaced():
  record = rf.record(None, "relu", "candidate", "large", kernel_sha256="0" * 64,
                     status=Status.PASS, correct=True, device="gpu", rel_l2_error=0.0)
  assert record.robust and record.timing_iterations and record.compile.compile_s is not None
  # The same kernel, incorrect on one seed, retires its judge (round 20).
  assert driver.device_suspect(dataclasses.replace(
      record, status=Status.INCORRECT, correct=False, reasons=("seed 3: not allclose",)))
  assert driver.device_suspect(record), (
      f"a pass on the GPU: memcheck watched one call, then {record.timing_iterations} timed "
      "calls (and the warm-up) ran unwatched; the judge is kept for the next item")


# -- 6. ASCII declared, ASCII written -------------------------------------------------------------

@pytest.mark.parametrize("name", ["ascii", "latin-1"])
def test_an_ascii_file_declared_ascii_is_read(tmp_path, name):
  text = (f"# -*- coding: {name} -*-\nimport jax.numpy as jnp\n\n\n"
          "def kernel(x, *, interpret=False):\n  return jnp.maximum(x, 0.0)\n")
  path = tmp_path / "declared_relu.py"
  path.write_bytes(text.encode("ascii"))
  assert path.read_bytes().decode(name) == path.read_bytes().decode("utf-8") == text
  try:
    got = kernels.read_source(path)[0]
  except kernels.KernelLoadError as e:
    got = f"refused: {e}"
  assert got == text, f"Python and UTF-8 read the same text; read_source: {got[:110]}"
