"""One call per candidate under compute-sanitizer's memcheck: what the judge records for each
outcome, with stand-ins for the sanitizer on this CPU host (tests/judge/test_gpu.py runs the real
one on the H200)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import stat
import types

import jax
import pytest

from pallasbench_dataset.evaluation.judge import budgets, core, memcheck
from pallasbench_dataset.tasks import get_task

ARGS = dict(task="relu", size="small", precision="float32", seed=3)


def _fake_sanitizer(tmp_path: pathlib.Path, monkeypatch, script: str) -> pathlib.Path:
  """A `compute-sanitizer` on the PATH that runs `script` (sh) instead of checking anything;
  it writes its arguments and standard input beside itself."""
  tool = tmp_path / "compute-sanitizer"
  tool.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\ncat > {tmp_path}/stdin\n{script}\n')
  tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
  monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
  return tool


def test_memcheck_errors_are_reported_with_memchecks_own_lines(tmp_path, monkeypatch):
  _fake_sanitizer(tmp_path, monkeypatch, f"""echo "========= COMPUTE-SANITIZER"
echo "========= Invalid __global__ read of size 4 bytes"
echo "=========     at reduce_sum+0x1f0"
echo "========= ERROR SUMMARY: 1 error"
exit {memcheck.ERROR_EXIT}""")
  found = memcheck.check(b"artifact bytes", **ARGS, padding_bytes=1 << 30,
                         cache_dir="/nonexistent/cache")
  assert found.outcome is memcheck.Outcome.ERRORS
  assert found.detail == "Invalid __global__ read of size 4 bytes; ERROR SUMMARY: 1 error"
  args = (tmp_path / "args").read_text().split()
  assert args[:10] == ["--tool", "memcheck", "--error-exitcode", str(memcheck.ERROR_EXIT),
                       "--print-limit", str(memcheck.PRINT_LIMIT), "--report-api-errors", "no",
                       "--padding", str(1 << 30)]
  assert args[-8:] == ["--task", "relu", "--size", "small", "--precision", "float32",
                       "--seed", "3"]
  assert (tmp_path / "stdin").read_bytes() == b"artifact bytes"


@pytest.mark.parametrize(("script", "outcome", "detail"), [
    ('echo "========= ERROR SUMMARY: 0 errors"', memcheck.Outcome.CLEAN, "ERROR SUMMARY: 0 errors"),
    ("echo boom >&2; exit 3", memcheck.Outcome.INCONCLUSIVE, "the checked call exited with 3: boom"),
    ("sleep 5", memcheck.Outcome.INCONCLUSIVE, "memcheck ran past its budget of 0.5 s"),
])
def test_memcheck_outcomes_of_a_call_with_no_error_found(tmp_path, monkeypatch, script, outcome, detail):
  _fake_sanitizer(tmp_path, monkeypatch, script)
  found = memcheck.check(b"", **ARGS, timeout_s=0.5)
  assert (found.outcome, found.detail) == (outcome, detail)


def test_a_host_without_compute_sanitizer_says_so(monkeypatch):
  monkeypatch.setattr(memcheck.shutil, "which", lambda _: None)
  monkeypatch.setattr(memcheck, "_TOOLKITS", pathlib.Path("/nonexistent"))
  monkeypatch.setattr(memcheck.importlib.util, "find_spec", lambda _: None)
  assert memcheck.sanitizer() is None
  assert memcheck.check(b"", **ARGS).outcome is memcheck.Outcome.UNAVAILABLE


def _gpu_state(monkeypatch, outcome, precision="float32", stage=lambda _: None,
               reference=memcheck.Outcome.CLEAN):
  """The judge's memcheck step on a GPU context (told each stage by `stage`), memcheck.check
  answering `outcome` for the kernel and `reference` for the task's reference (its calls are
  in `seen` too, as ("reference", figures))."""
  seen = []

  def check(blob, **kwargs):
    seen.append((blob, kwargs))
    return memcheck.Result(outcome=outcome, detail="Invalid __global__ read of size 4 bytes")

  def control(**figures):
    seen.append(("reference", figures))
    return memcheck.Result(outcome=reference, detail="reference detail")
  monkeypatch.setattr(memcheck, "check", check)
  monkeypatch.setattr(memcheck, "control", control)
  ctx = types.SimpleNamespace(on_gpu=True, stage=stage)
  item = types.SimpleNamespace(options=core.EvalOptions(), size="medium")
  state = core._State(fields={"filters": ()}, run_blob=b"cuda artifact")  # pylint: disable=protected-access
  spec = get_task("reduce_sum").at_precision(precision)
  reasons = core._memcheck(item, spec, 7, ctx, state)  # pylint: disable=protected-access
  return reasons, state.fields["filters"], seen


def test_the_judge_rejects_what_memcheck_finds_and_records_every_outcome(monkeypatch):
  reasons, filters, seen = _gpu_state(monkeypatch, memcheck.Outcome.ERRORS)
  assert reasons == ["the kernel accessed device memory outside its buffers (compute-sanitizer "
                     "memcheck: Invalid __global__ read of size 4 bytes)"]
  assert [(f.name, f.passed) for f in filters] == [("memcheck", False)]
  assert seen[0][0] == b"cuda artifact"
  assert {k: seen[0][1][k] for k in ("task", "size", "seed")} == dict(
      task="reduce_sum", size="medium", seed=7)
  assert len(seen) == 1  # errors need no reference
  reasons, filters, seen = _gpu_state(monkeypatch, memcheck.Outcome.CLEAN)
  assert reasons == [] and filters[0].passed and filters[0].detail.startswith("clean: ")
  assert len(seen) == 1
  reasons, filters, seen = _gpu_state(monkeypatch, memcheck.Outcome.INCONCLUSIVE,
                                      reference=memcheck.Outcome.INCONCLUSIVE)
  assert reasons == [] and filters[0].passed
  assert filters[0].detail == ("inconclusive: Invalid __global__ read of size 4 bytes; the "
                               "task's XLA reference under memcheck: inconclusive: reference "
                               "detail")


def test_a_call_that_fails_or_stalls_only_under_memcheck_is_rejected(monkeypatch):
  """A kernel that tells it is watched (its own clock slows under instrumentation) and then
  traps or spins leaves memcheck inconclusive: where the task's own reference runs clean under
  memcheck on this host (same task, size, precision and red zone), that rejects it; where the
  reference does not either, the host's memcheck failed and the kernel is not blamed."""
  reasons, filters, seen = _gpu_state(monkeypatch, memcheck.Outcome.INCONCLUSIVE)
  assert reasons == ["the kernel's call did not end cleanly under compute-sanitizer memcheck "
                     "(Invalid __global__ read of size 4 bytes; the task's XLA reference runs "
                     "clean under memcheck on this host): a kernel that fails or stalls only "
                     "when watched is not trusted"]
  assert [(f.name, f.passed) for f in filters] == [("memcheck", False)]
  assert filters[0].detail.startswith("failed: ")
  kernel, reference = seen
  assert reference == ("reference", {k: v for k, v in kernel[1].items() if k != "seed"})


def test_settle_asks_the_reference_only_for_an_inconclusive_check():
  asked = []

  def reference():
    asked.append(1)
    return memcheck.Result(outcome=memcheck.Outcome.CLEAN, detail="no error")
  for outcome in (memcheck.Outcome.CLEAN, memcheck.Outcome.ERRORS, memcheck.Outcome.UNAVAILABLE):
    found = memcheck.Result(outcome=outcome, detail="d")
    assert memcheck.settle(found, reference) is found
  assert not asked
  settled = memcheck.settle(memcheck.Result(outcome=memcheck.Outcome.INCONCLUSIVE, detail="d"),
                            reference)
  assert settled.outcome is memcheck.Outcome.FAILED and asked == [1]


def test_an_inconclusive_check_says_both_details_within_two_details_length():
  """Where the reference does not run clean either, the kernel's detail and the reference's
  are both recorded, the two cut together to twice a detail's length (a record's filter
  detail is bounded whatever memcheck printed)."""
  kernel = memcheck.Result(outcome=memcheck.Outcome.INCONCLUSIVE,
                           detail="k" * memcheck.DETAIL_CHARS)
  reference = memcheck.Result(outcome=memcheck.Outcome.INCONCLUSIVE,
                              detail="r" * memcheck.DETAIL_CHARS)
  settled = memcheck.settle(kernel, lambda: reference)
  assert settled.outcome is memcheck.Outcome.INCONCLUSIVE
  head = "k" * memcheck.DETAIL_CHARS + "; the task's XLA reference under memcheck: inconclusive: "
  assert settled.detail == (head + "r" * memcheck.DETAIL_CHARS)[:2 * memcheck.DETAIL_CHARS]
  short = memcheck.settle(dataclasses.replace(kernel, detail="k"),
                          lambda: dataclasses.replace(reference, detail="r"))
  assert short.detail == "k; the task's XLA reference under memcheck: inconclusive: r"


def test_the_reference_control_checks_the_tasks_own_reference_once(tmp_path, monkeypatch):
  """The control is the task's jitted reference exported by the judge at the evaluation's
  shapes and precision (its inputs, seed 0), checked alike, and run once a process."""
  _fake_sanitizer(tmp_path, monkeypatch, 'echo "$JAX_COMPILATION_CACHE_DIR" > '
                  f'{tmp_path}/cache_dir; echo "========= ERROR SUMMARY: 0 errors"')
  memcheck.control.cache_clear()
  figures = dict(task="relu", size="medium", precision="bfloat16", padding_bytes=1 << 30,
                 cache_dir=str(tmp_path / "cache"))
  assert memcheck.control(**figures).outcome is memcheck.Outcome.CLEAN
  # the kernel's red zone and compilation cache, as the kernel's check had them
  assert (tmp_path / "cache_dir").read_text().strip() == str(tmp_path / "cache")
  exported = jax.export.deserialize(bytearray((tmp_path / "stdin").read_bytes()))
  assert exported.platforms == ("cuda",)  # as a candidate's artifact, whatever the host
  spec = get_task("relu").at_precision("bfloat16")
  assert tuple(exported.in_avals) == tuple(
      jax.core.ShapedArray(s.shape, s.dtype) for s in spec.input_structs("medium"))
  args = (tmp_path / "args").read_text().split()
  assert args[args.index("--padding") + 1] == str(1 << 30)
  assert args[-8:] == ["--task", "relu", "--size", "medium", "--precision", "bfloat16",
                       "--seed", "0"]
  (tmp_path / "args").unlink()
  assert memcheck.control(**figures).outcome is memcheck.Outcome.CLEAN
  assert not (tmp_path / "args").exists()  # served from the process's cache
  memcheck.control.cache_clear()


def test_the_judge_checks_its_run_artifact_at_the_evaluations_figures(monkeypatch):
  """memcheck runs as a stage of its own (its budget), on the evaluation's task, size,
  precision and seed, with a whole task's bytes at that precision as the red zone past every
  buffer, compiled from the judge's persistent compilation cache."""
  stages = []
  _, _, seen = _gpu_state(monkeypatch, memcheck.Outcome.CLEAN, precision="bfloat16",
                          stage=stages.append)
  padding = get_task("reduce_sum").at_precision("bfloat16").io_bytes("medium")
  assert padding < get_task("reduce_sum").io_bytes("medium")
  assert stages == [budgets.MEMCHECK]
  assert jax.config.jax_compilation_cache_dir  # the tests' shared cache (tests/conftest.py)
  assert seen == [(b"cuda artifact", dict(
      task="reduce_sum", size="medium", precision="bfloat16", seed=7, padding_bytes=padding,
      cache_dir=jax.config.jax_compilation_cache_dir))]


def test_compute_sanitizer_is_found_in_a_versioned_toolkit(tmp_path, monkeypatch):
  tool = tmp_path / "cuda-13.0" / "bin" / "compute-sanitizer"
  tool.parent.mkdir(parents=True)
  tool.write_text("#!/bin/sh\n")
  tool.chmod(0o755)
  monkeypatch.setattr(memcheck.shutil, "which", lambda _: None)
  monkeypatch.setattr(memcheck, "_TOOLKITS", tmp_path)
  assert memcheck.sanitizer() == str(tool)


def test_every_allocation_gets_a_red_zone_of_at_least_the_floor(tmp_path, monkeypatch):
  """A read just past a buffer lands in the next one XLA placed there, a valid access to
  memcheck, unless a red zone follows every allocation."""
  _fake_sanitizer(tmp_path, monkeypatch, 'echo "========= ERROR SUMMARY: 0 errors"')
  memcheck.check(b"", **ARGS, padding_bytes=1)
  args = (tmp_path / "args").read_text().split()
  assert args[args.index("--padding") + 1] == str(memcheck.MIN_PADDING_BYTES)
