"""Fingerprints of lowered kernels (judge/fingerprint.py): a renamed copy of a shipped kernel
is found, a kernel that computes differently is not, and the shipped side comes from the
trees themselves.

The control tests/controls/adv_copied_relu.py (the adversarial suite) is the same attack
through the whole pipeline, with `reject_copies` on and off.
"""

import functools
import re

import pytest

from pallasbench_dataset.evaluation.judge import analysis_process, fingerprint, module_analysis
from pallasbench_dataset.kernels import kernel_path, load_module
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.reward import KernelReward
from pallasbench_dataset.tasks import get_task


class _InProcessAnalyser:
  """The helper's analysis, run here: only the project's own kernels are analysed in this
  file, so nothing hostile is parsed unwalled."""

  def analyse(self, serialized: bytes):
    text = analysis_process._module_text(serialized)  # pylint: disable=protected-access
    return module_analysis.analyze_module(text), text


def _exported(source: str, task: str, size: str = "small"):
  structs = get_task(task).input_structs(size)
  kernel = load_module(source, "candidate.py").kernel
  return export_for("cuda", functools.partial(kernel, interpret=False), *structs)


def _kernels(source: str, task: str):
  return module_analysis.analyze_module(_exported(source, task).mlir_module()).kernels


def _renamed(source: str) -> str:
  """The copy a candidate pastes: names, the kernel's name and the layout changed."""
  names = sorted(set(re.findall(r"^def (_\w+)", source, re.MULTILINE)), key=len, reverse=True)
  for number, name in enumerate(names):
    source = re.sub(rf"\b{name}\b", f"_mine_{number}", source)
  source = re.sub(r'TASK_NAME: Final = "\w+"', 'TASK_NAME: Final = "my_own_work"', source)
  return "# written from scratch\n\n\n" + re.sub(r"^(\s*)#.*$", r"\1", source, flags=re.MULTILINE)


@pytest.fixture(scope="module")
def matmul():
  return kernel_path("gpu", "matmul").read_text()


def test_names_and_layout_do_not_change_the_fingerprint(matmul):
  shipped, copied = _kernels(matmul, "matmul"), _kernels(_renamed(matmul), "matmul")
  assert [k.name for k in copied] == ["my_own_work"] and [k.name for k in shipped] == ["matmul"]
  assert [k.fingerprint for k in copied] == [k.fingerprint for k in shipped]
  assert all(k.fingerprint and len(k.fingerprint) == 64 for k in shipped)


def test_a_kernel_that_computes_differently_has_another_fingerprint(matmul):
  """Another tile (what the kernel does, not what it is called) and another kernel for the
  task each give another fingerprint."""
  retiled = matmul.replace("block_m=128 if big else 64", "block_m=128 if big else 32")
  assert retiled != matmul, "the matmul kernel's block size moved: update this test"
  strips = (kernel_path("gpu", "matmul").parents[1] / "tests" / "controls"
            / "pos_matmul_strips.py").read_text()
  prints = {tuple(k.fingerprint for k in _kernels(s, "matmul")) for s in (matmul, retiled, strips)}
  assert len(prints) == 3


def test_normalized_digest_blanks_symbol_names_only():
  text = ('"tt.func"() <{sym_name = "matmul", function_type = () -> ()}> ({ "tt.call"() '
          '<{callee = @matmul_helper}> : () -> () %0 = "arith.constant"() <{value = 4 : i32}>')
  renamed = text.replace('"matmul"', '"mine"').replace("@matmul_helper", '@"other name"')
  changed = text.replace("value = 4", "value = 8")
  assert fingerprint.normalized_digest(text) == fingerprint.normalized_digest(renamed)
  assert fingerprint.normalized_digest(text) != fingerprint.normalized_digest(changed)


def test_shipped_copies_come_from_the_trees_at_the_same_size_and_precision():
  relu = kernel_path("gpu", "relu").read_text()
  analyser = _InProcessAnalyser()
  copied = _kernels(_renamed(relu), "relu")
  assert fingerprint.shipped_copies(copied, "relu", "small", "float32", analyser) == (
      "kernels_gpu/relu.py",)
  honest = _kernels((kernel_path("gpu", "relu").parents[1] / "tests" / "controls"
                     / "adv_pos_dataclass_relu.py").read_text(), "relu")
  assert fingerprint.shipped_copies(honest, "relu", "small", "float32", analyser) == ()
  assert fingerprint.shipped_copies((), "relu", "small", "float32", analyser) == ()


def test_the_reward_rejects_copies_unless_told_otherwise(tmp_path):
  with KernelReward(device="cpu", cache_dir=tmp_path) as reward:
    assert reward.options.reject_copies
  with KernelReward(device="cpu", cache_dir=tmp_path, reject_copies=False) as reward:
    assert not reward.options.reject_copies
