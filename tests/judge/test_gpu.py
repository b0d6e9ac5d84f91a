"""The judge on a real GPU: every control and every attack of the CPU suites, on the device.

    python -m pytest -m gpu tests/judge/test_gpu.py      (on a machine with an NVIDIA GPU)

Deselected by default (no GPU in CI). The expectations are those of judge/test_controls.py and
judge/test_attacks.py, except where a GPU judge sees more: unwritten elements keep the
allocator's sentinel (rejected, not just NaN), and the split-personality kernel is caught
because the one cuda artifact is both analysed and run. Work is spread over the GPUs.
"""

import os
import socket
import subprocess
import threading

import pytest

from tests.judge import test_attacks as adv
from tests.judge import test_controls as ev
from pallasbench_dataset.evaluate import evaluate
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, run_items
from pallasbench_dataset.evaluation.judge.process import JudgeConfig, Limits, make_dump_dir
from pallasbench_dataset.kernels import tree_dir
from pallasbench_dataset.reward import paid_speedup
from pallasbench_dataset.schema import ErrorType, Status

pytestmark = pytest.mark.gpu

GPU_OVERRIDES = {
    # Unwritten elements keep NaN (incorrect) or, if the allocator hands back the sentinel's
    # buffer, the sentinel (rejected): either way not a pass.
    "unwritten_relu": (None, None),
    "split_interpret": (Status.INCORRECT, "not allclose"),
    # The candidate's table of expected values was computed on the exporter's CPU; the GPU
    # draws the same seeds' inputs to within an ulp, so its exact lookup misses: incorrect.
    "public_seeds_public": (Status.INCORRECT, "not allclose"),
    # Reads past the end of its input: one call runs under compute-sanitizer's memcheck.
    "peek_past_end": (Status.REJECTED, "the kernel accessed device memory outside its buffers"),
    # TPU-style batched contractions do not lower to Triton: no cuda artifact to run (not
    # seen on a GPU yet; expected from the cuda export's failure on the CPU).
    "copied_tpu_rejected": (None, None),
    "pos_own_tpu": (None, None),
}
# trisolve_outside and decoy_branch hide a contraction beside a trivial kernel too large for the
# H200's shared memory: they were errors while a failed compile was reported first; since the
# compile stage admits what it compiles (1fbfc9e), the structure rejects them as on the CPU
# (decoy_branch on the H200, 2026-12-02).
LIMITS = Limits(timeout_s=300, memory_bytes=32 << 30)


def _gpu_count() -> int:
  """From nvidia-smi: this test process runs JAX on the CPU (conftest); the judges get the GPUs."""
  out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
  return sum(line.startswith("GPU ") for line in out.splitlines())


@pytest.fixture(scope="module")
def records(request):
  """Evaluates the controls this session selected (all by default; `-k` narrows it)."""
  selected = {item.callspec.params["name"] for item in request.session.items
              if hasattr(item, "callspec") and "name" in item.callspec.params}
  listener = socket.create_server(("127.0.0.1", 0))
  port = listener.getsockname()[1]
  items = {name: ev._item(name, task) for name, (task, _, _) in ev.EXPECTED.items()}
  for name, case in adv.CASES.items():
    items[name] = WorkItem(task=case.task, variant="candidate", size="small",
                           source=adv._source(case, port), filename=f"{case.file}.py",
                           options=case.options, precision=case.precision)
  items["split_interpret"] = WorkItem(
      task="relu", variant="candidate", size="small", filename="adv_split_interpret_relu.py",
      source=(adv.CONTROLS / "adv_split_interpret_relu.py").read_text(), options=adv.OPTIONS)
  names = sorted((n for n in items if n in selected or not selected), key=lambda n: items[n].task)
  gpus = max(1, min(_gpu_count(), 4))
  found = {}

  def worker(index: int) -> None:
    mine = names[index::gpus]
    config = JudgeConfig(device="gpu", git_commit=None, dump_dir=make_dump_dir("gpu"),
                         visible_device=str(index) if gpus > 1 else None)
    out = []
    run_items([items[n] for n in mine], config, LIMITS, on_result=lambda r, _: out.append(r))
    found.update(zip(mine, out))
  threads = [threading.Thread(target=worker, args=(i,)) for i in range(gpus)]
  path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), adv.PATH_MARK) if p)
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("PYTHONPATH", path)  # every process of the run carries the mark: survivors show
    for t in threads:
      t.start()
    for t in threads:
      t.join()
  listener.close()
  assert set(found) == set(names)
  return found


def _expectation(name):
  if name in GPU_OVERRIDES:
    return GPU_OVERRIDES[name]
  if name in ev.EXPECTED:
    _, status, detail = ev.EXPECTED[name]
    return status, detail
  case = adv.CASES[name]
  return case.status, case.detail[0] if case.detail else None


# Controls the GPU judge does not stop yet, each with what was seen on the H200.
KNOWN_OPEN = {
    "peek_past_end": "memcheck (platform allocator, red zones of 16 MiB and more) reports its "
                     "read past the input clean on the H200 at `small`, this suite's size "
                     "(b477529, docs/runs/h200-2026-12-03-session15/check-b477529; again at "
                     "d55f1da), and finds it at `medium`, the GPU judge's default (31552 "
                     "invalid reads, docs/runs/h200-2026-12-06-session25/memcheck-probe.jsonl); "
                     "the timing round's poisoned, freed outputs leave that read nothing to "
                     "replay",
}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_OPEN[n]))
    if n in KNOWN_OPEN else n for n in sorted({*ev.EXPECTED, *adv.CASES, "split_interpret"})])
def test_control_on_the_gpu(records, name):
  record = records[name]
  status, detail = _expectation(name)
  summary = (name, record.status, record.error_type, record.reasons, record.error)
  assert record.device == "gpu" and not record.interpret, summary
  if status is None:
    assert record.status is not Status.PASS, summary
  else:
    assert record.status is status, summary
  if isinstance(detail, ErrorType):
    assert record.error_type is detail, summary
  elif detail is not None:
    assert any(detail in t for t in (*record.reasons, record.error or "")), summary
  assert (record.status is Status.PASS) == (record.reasons == ()), summary
  if record.status is Status.PASS:
    assert record.timing_method == "cupti" and record.timing_comparable and record.speedup > 0
    # every candidate is timed beside the task's shipped kernel too (the reward's reference)
    assert record.speedup_shipped > 0 and len(record.shipped_samples_ms) > 0, summary


# Copies no fingerprint names (an identity op, an inverted select): paid their speedup over the
# kernel they copy, timed beside them. Two runs of one kernel: within this noise of parity.
PARITY_NOISE = 1.25


@pytest.mark.parametrize("name", ["copied_noop_paid_parity",
                                  "copied_near_flash_attention_paid_parity"])
def test_a_near_copy_is_paid_parity_at_most(records, name):
  record = records[name]
  assert record.status is Status.PASS and record.copy_of == (), (record.status, record.reasons)
  paid = paid_speedup(record)
  assert paid == min(record.speedup, record.speedup_shipped)
  assert 1 / PARITY_NOISE < record.speedup_shipped < PARITY_NOISE, record.speedup_shipped


# Red team round 13: the CUPTI timer (jax's _mosaic_gpu_ext) enables
# CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL only, so device work that is no kernel (the copy XLA
# makes of a constant aliased into a kernel's output, memsets) is never in a sample.
# adv_memcpy_init_one_hot has the output filled that way and stores only the ones. The judge
# charges those bytes (module_analysis' prefilled_bytes) at the run's copy rate to every
# sample, so it is paid no more than the shipped kernel that writes the whole output, and its
# honest twin, which writes every element itself, still passes.
@pytest.mark.parametrize("name", ["memcpy_init", "pos_full_tile_init"])
def test_untimed_copies_are_charged(records, name):
  record = records[name]
  assert record.status is Status.PASS, (record.status, record.reasons)
  assert record.prefilled_bytes and record.untimed_copy_ms > 0, record.untimed_copy_ms
  if name == "memcpy_init":
    assert paid_speedup(record) < PARITY_NOISE, (record.speedup, record.speedup_shipped)


def test_no_attack_left_a_trace_on_the_gpu_machine(records):
  assert [t for t in adv.TARGETS.values() if os.path.exists(t)] == []
  assert adv._marked_processes() == []


def test_a_mosaic_gpu_kernel_passes_the_judge():
  """The tuned matmul is a Mosaic GPU kernel on an H200. The judge imports no kernel, so it
  must load Mosaic GPU's runtime itself: the release runs at a740754 did not, and every Mosaic
  kernel was an error ("Symbols not found: mosaic_gpu_launch_kernel")."""
  record = evaluate("matmul", tree_dir("gpu") / "matmul.py", size="medium", device="gpu")
  assert record.status is Status.PASS, (record.error, record.reasons)
  assert "mosaic_gpu" in record.backends


def test_memcheck_finds_a_shipped_kernel_clean():
  """One call of every candidate runs under compute-sanitizer's memcheck: on the shipped
  reduce_sum it runs within its budget and finds nothing (a false alarm would reject honest
  kernels; peek_past_end above is what it must find)."""
  record = evaluate("reduce_sum", tree_dir("gpu") / "reduce_sum.py", size="medium", device="gpu")
  assert record.status is Status.PASS, (record.error, record.reasons)
  found = next(f for f in record.filters if f.name == "memcheck")
  assert found.passed and found.detail.startswith("clean: "), found.detail
