"""Class 12 (copied solutions) on every kernel backend: a pasted shipped kernel is named a copy
whichever backend its kernel lowers to.

The copy check (`fingerprint.shipped_copies`) compares the fingerprints of a candidate's
kernel calls with the shipped kernels' own. Only Triton kernels had one: a Mosaic GPU kernel
(the tuned core of ten shipped contraction kernels on Hopper, at `medium` and `large`) and a
Mosaic TPU kernel (what a CPU judge reads for a kernel that does not lower to Triton, such as
the original kernels_tpu/batched_matmul.py at `small`) had none, so a verbatim paste of either
was no copy, and KernelReward (reject_copies) paid it.

The modules are exported and analysed in this process (these kernels are not hostile to the
analysis); the judge does the same in its walled helper. The controls' whole evaluations on
the CPU are in test_attacks.py.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import types

import pytest

from pallasbench_dataset.evaluation.judge import (
    analysis_process, fingerprint, mlir_context, module_analysis)
from pallasbench_dataset.kernels import load_module
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.tasks import get_task, list_tasks

from tests.paths import CONTROLS, REPO


class InProcess:
  """fingerprint.Analyser in this process."""

  def analyse(self, serialized: bytes):
    text = mlir_context.module_text(serialized)
    return module_analysis.analyze_module(text), text


def _kernels(source: str, task: str, size: str, platform: str):
  module = load_module(source, "candidate.py")
  exported = export_for(platform, functools.partial(module.kernel, interpret=False),
                        *get_task(task).input_structs(size))
  report, _ = InProcess().analyse(exported.mlir_module_serialized)
  return report.kernels


def _control(name: str) -> str:
  return (CONTROLS / f"{name}.py").read_text()


def _shipped(tree: str, task: str) -> str:
  return (REPO / f"kernels_{tree}" / f"{task}.py").read_text()


def _renamed(source: str) -> str:
  """Every function of the module given another name."""
  for name in set(re.findall(r"^def (\w+)", source, re.MULTILINE)) - {"kernel"}:
    source = re.sub(rf"\b{name}\b", f"{name}_mine", source)
  return source


def _copies(source: str, task: str, size: str, platform: str) -> tuple[str, ...]:
  return fingerprint.shipped_copies(_kernels(source, task, size, platform), task, size,
                                    "float32", InProcess(), platform=platform)


@pytest.mark.parametrize("size", ["small", "medium"])
def test_a_pasted_shipped_matmul_is_a_copy_whichever_backend_it_lowers_to(size):
  """Triton at `small`, Mosaic GPU at `medium` (the H200's tuned config), renamed or not."""
  source = _shipped("gpu", "matmul")  # a verbatim paste is the shipped file's text
  backends = {k.backend for k in _kernels(source, "matmul", size, "cuda")}
  assert backends == {"triton" if size == "small" else "mosaic_gpu"}
  for candidate in (source, _renamed(source)):
    assert _copies(candidate, "matmul", size, "cuda") == ("kernels_gpu/matmul.py",)


def test_a_pasted_original_tpu_kernel_is_a_copy_where_its_tpu_export_is_read():
  source = _control("adv_copied_tpu_batched_matmul")
  assert {k.backend for k in _kernels(source, "batched_matmul", "small", "tpu")} == {
      "mosaic_tpu"}
  for candidate in (source, _renamed(source)):
    assert _copies(candidate, "batched_matmul", "small", "tpu") == (
        "kernels_tpu/batched_matmul.py",)


def test_the_candidate_s_own_kernels_are_no_copies():
  """The honest neighbours: a matmul of the candidate's own (Triton) at `medium`, a retuned
  shipped matmul (another Mosaic GPU kernel: the check names renamed copies only), and a
  TPU-style batched matmul of its own."""
  own = (CONTROLS / "pos_matmul_strips.py").read_text()
  assert fingerprint.shipped_copies(_kernels(own, "matmul", "medium", "cuda"), "matmul",
                                    "medium", "float32", InProcess()) == ()
  shipped = _shipped("gpu", "matmul")
  retuned = shipped.replace("stages=5", "stages=4")
  assert retuned != shipped  # medium's tuned config is the one retuned
  assert fingerprint.shipped_copies(_kernels(retuned, "matmul", "medium", "cuda"), "matmul",
                                    "medium", "float32", InProcess()) == ()
  tpu = _control("adv_pos_own_tpu_batched_matmul")
  assert {k.fingerprint for k in _kernels(tpu, "batched_matmul", "small", "tpu")}.isdisjoint(
      {k.fingerprint for k in _kernels(_shipped("tpu", "batched_matmul"),
                                       "batched_matmul", "small", "tpu")} - {None})


def test_every_shipped_kernel_call_has_a_fingerprint():
  """Each kernel call of every shipped kernel, as the copy check exports it (kernels_gpu for
  cuda at `small` and `medium`, Triton and Mosaic GPU; kernels_tpu for tpu at `small`), has a
  fingerprint: a backend (or a jax upgrade) whose kernels cannot be read would make every
  paste on it no copy again."""
  missing, calls = [], 0
  for spec in list_tasks():
    for tree, platform, sizes in (("gpu", "cuda", ("small", "medium")), ("tpu", "tpu", ("small",))):
      for size in sizes:
        try:
          kernels = _kernels(_shipped(tree, spec.name), spec.name, size, platform)
        except Exception:  # pylint: disable=broad-except  (does not lower there: nothing to copy)
          continue
        calls += len(kernels)
        missing += [(spec.name, tree, size, k.backend) for k in kernels if k.fingerprint is None]
  assert calls >= 150 and missing == []


def _serialized(tree: str, task: str, size: str, platform: str):
  module = load_module(_shipped(tree, task), "shipped.py")
  return export_for(platform, functools.partial(module.kernel, interpret=False),
                    *get_task(task).input_structs(size))


# A Triton kernel, a Mosaic GPU kernel (the H200's tuned config at `medium`) and a Mosaic TPU one.
BACKENDS = (("gpu", "matmul", "small", "cuda"), ("gpu", "matmul", "medium", "cuda"),
            ("tpu", "batched_matmul", "small", "tpu"))


@pytest.mark.parametrize("tree,task,size,platform", BACKENDS)
def test_the_judge_reads_a_module_as_jax_prints_it(tree, task, size, platform):
  """The helper's text (jaxlib's MLIR bindings alone) is `Exported.mlir_module()`'s: the
  analysis and the fingerprints read what jax wrote."""
  exported = _serialized(tree, task, size, platform)
  assert mlir_context.module_text(exported.mlir_module_serialized) == exported.mlir_module()



def test_the_analysis_helper_answers_with_the_text_as_jax_prints_it():
  """The text the helper sends back with its report (what the copy check reads) is
  `Exported.mlir_module()`'s, not only the text it analysed."""
  exported = _serialized(*BACKENDS[0])
  answer = json.loads(analysis_process._answer(  # pylint: disable=protected-access
      b"{}\n" + exported.mlir_module_serialized))
  assert answer["text"] == exported.mlir_module()


# One op of each dialect jax's context loads, then of dialects linked into jaxlib that it leaves
# out (a Mosaic TPU or Triton kernel's own, read apart by `fingerprint`).
JAX_OPS = ("stablehlo.add", "chlo.erf", "mhlo.add", "sdy.sharding_constraint", "mpmd.fragment",
           "func.func", "arith.addi", "scf.for", "vector.broadcast", "memref.load", "math.exp",
           "gpu.launch", "nvgpu.mma.sync", "llvm.add", "cf.br", "tensor.empty")
OTHER_OPS = ("tpu.matmul", "tt.load", "linalg.generic", "nvvm.barrier0")


def test_the_judges_context_loads_the_dialects_jax_loads_as_jax_prints_them():
  """`make_context` knows exactly the ops of jax's own `make_ir_context`: an op of a dialect it
  missed (chlo's, mhlo's, mpmd's, an upstream one's) would not parse in the analysis (an honest
  module refused), one of a dialect jax leaves out would be read as jax never reads it."""
  from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=import-outside-toplevel
  ours = mlir_context.make_context()
  jax_s = jax_mlir._create_ir_context()  # pylint: disable=protected-access  (a fresh one: the
  # thread's shared context holds whatever dialects earlier parses in this process registered)
  known = {op: ours.is_registered_operation(op) for op in JAX_OPS + OTHER_OPS}
  assert known == {op: jax_s.is_registered_operation(op) for op in JAX_OPS + OTHER_OPS}
  assert known == {**dict.fromkeys(JAX_OPS, True), **dict.fromkeys(OTHER_OPS, False)}


def test_the_analysis_helper_reads_gpu_kernels_without_importing_jax(tmp_path):
  """A helper starts for every evaluated item, and importing jax was most of its start; its
  whole work on a GPU module (each kernel's fingerprint included) needs jaxlib only. (A Mosaic
  TPU kernel's ops are looked up under jax.jaxlib.mosaic.python too, which jaxlib's tpu.py adds
  to MLIR's dialect search: reading one imports jax, as before.)"""
  for i, args in enumerate(BACKENDS[:2]):
    (tmp_path / f"{i}.bin").write_bytes(_serialized(*args).mlir_module_serialized)
  script = f"""
import json, pathlib, sys
from pallasbench_dataset.evaluation.judge import analysis_process
for path in sorted(pathlib.Path({str(tmp_path)!r}).glob("*.bin")):
  answer = json.loads(analysis_process._answer(b"{{}}\\n" + path.read_bytes()))
  print(sorted({{k["backend"] for k in answer["report"]["kernels"] if k["fingerprint"]}}))
print(sorted(m for m in sys.modules if m == "jax" or m.startswith("jax.")))
"""
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                       check=True).stdout.splitlines()
  assert out == ["['triton']", "['mosaic_gpu']", "[]"]


def test_mosaic_gpu_ops_are_read_as_generic_ops_with_their_lookup_remembered(monkeypatch):
  """`parse_mosaic_gpu` puts an empty module where MLIR's bindings look for the op classes of
  a Mosaic GPU kernel's dialect, so the failed search is made once, not per op; it holds no op
  class (the fingerprint tests read the same digests through it), and a module jaxlib ships
  there is left alone."""
  name = "jaxlib.mlir.dialects.stable_mosaic_gpu"
  monkeypatch.delitem(sys.modules, name, raising=False)
  mlir_context.remember_dialects_without_op_classes.cache_clear()
  mlir_context.remember_dialects_without_op_classes()
  stand_in = sys.modules[name]
  assert [k for k in vars(stand_in) if not k.startswith("__")] == []
  shipped = types.ModuleType(name)
  monkeypatch.setitem(sys.modules, name, shipped)
  mlir_context.remember_dialects_without_op_classes.cache_clear()
  mlir_context.remember_dialects_without_op_classes()
  assert sys.modules[name] is shipped
