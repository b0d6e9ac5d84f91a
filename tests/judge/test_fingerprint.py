"""Fingerprints of lowered kernels (judge/fingerprint.py): a renamed copy of a shipped kernel
is found, a kernel that computes differently is not, and the shipped side comes from the
trees themselves.

The control tests/controls/adv_copied_relu.py (the adversarial suite) is the same attack
through the whole pipeline, with `reject_copies` on and off.
"""

import base64
import binascii
import functools
import json
import re
import tracemalloc
import types

import pytest
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir

from pallasbench_dataset.evaluation.judge import fingerprint, mlir_context, module_analysis
from pallasbench_dataset.kernels import kernel_path, load_kernel, load_module
from pallasbench_dataset.lowering import export_for
from pallasbench_dataset.reward import KernelReward
from pallasbench_dataset.tasks import get_task
from tests.judge.custom_calls import calls_to


class _InProcessAnalyser:
  """The helper's analysis, run here: only the project's own kernels are analysed in this
  file, so nothing hostile is parsed unwalled."""

  def analyse(self, serialized: bytes):
    text = mlir_context.module_text(serialized)
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


def _digest(text: str) -> str:
  with mlir.make_ir_context() as context:
    return fingerprint.structural_digest(ir.Module.parse(text, context=context))


_KERNEL = """func.func @relu(%x: f32, %y: f32) -> f32 {
  %zero = arith.constant 0.0 : f32
  %s = arith.mulf %x, %x : f32
  %m = arith.maximumf %s, %zero : f32
  %d = arith.subf %m, %y : f32
  %p = arith.mulf %d, %y : f32
  func.return %p : f32
}
func.func private @helper() -> ()
"""


@pytest.mark.parametrize("edit, same", [
    (lambda t: t.replace("@relu", '@"my own"').replace("@helper", "@mine"), True),
    (lambda t: t.replace("%s, %zero", "%zero, %s"), True),   # max commutes (adv_near_copy)
    (lambda t: t.replace("%d, %y : f32\n  func", "%y, %d : f32\n  func"), True),  # so does mul
    (lambda t: t.replace("  %zero = arith.constant 0.0 : f32\n", "").replace(
        "  %m = arith", "  %zero = arith.constant 0.0 : f32\n  %m = arith"), True),  # moved
    (lambda t: t.replace("%x, %x", "%x, %y"), False),         # another operand
    (lambda t: t.replace("%m, %y", "%y, %m"), False),         # subtraction does not commute
    (lambda t: t.replace("0.0 : f32", "1.0 : f32"), False),   # another constant
    (lambda t: t.replace("maximumf", "minimumf"), False),     # another op
    (lambda t: t.replace("(%x: f32, %y: f32)", "(%y: f32, %x: f32)"), False),  # arguments swapped
])
def test_the_structural_digest_sees_dataflow_not_names_or_order(edit, same):
  edited = edit(_KERNEL)
  assert edited != _KERNEL, "the edit changed nothing"
  assert (_digest(edited) == _digest(_KERNEL)) == same


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


def test_shipped_copies_are_found_at_the_candidate_s_precision():
  """A bfloat16 paste is compared with the shipped kernel exported at bfloat16 (its float32
  export is another module), and named a copy there."""
  relu = _renamed(kernel_path("gpu", "relu").read_text())
  structs = get_task("relu").at_precision("bfloat16").input_structs("small")
  kernel = load_module(relu, "candidate.py").kernel
  exported = export_for("cuda", functools.partial(kernel, interpret=False), *structs)
  copied = module_analysis.analyze_module(exported.mlir_module()).kernels
  assert {k.fingerprint for k in copied}.isdisjoint(k.fingerprint for k in _kernels(relu, "relu"))
  assert fingerprint.shipped_copies(copied, "relu", "small", "bfloat16", _InProcessAnalyser()) == (
      "kernels_gpu/relu.py",)


def test_the_copy_reason_names_the_copies():
  assert fingerprint.copy_reason(["kernels_gpu/relu.py", "kernels_tpu/relu.py"]) == (
      "the compiled kernel is a shipped kernel's (kernels_gpu/relu.py, kernels_tpu/relu.py), "
      "renamed at most: only the candidate's own work is rewarded")


def _payloads(text: str, target: str) -> list[bytes]:
  """The kernel modules of the `target` custom calls in an exported module's text, as the
  judge reads them (a Triton or Mosaic GPU backend_config field, a TPU call's whole config)."""
  field = {"__gpu$xla.gpu.triton": "ir", "mosaic_gpu_v2": "module"}.get(target)
  found = []
  with mlir.make_ir_context():
    for op in calls_to(ir.Module.parse(text), target):
      if field is None:
        found.append(ir.StringAttr(op.attributes["backend_config"]).value.encode())
      else:
        config = {n.name: n.attr for n in ir.DictAttr(op.attributes["mhlo.backend_config"])}
        found.append(ir.StringAttr(config[field]).value_bytes)
  return found


@pytest.mark.parametrize("task, size, platform, target, backend", [
    ("relu", "small", "cuda", "__gpu$xla.gpu.triton", "triton"),
    ("matmul", "medium", "cuda", "mosaic_gpu_v2", "mosaic_gpu"),
    ("batched_matmul", "small", "tpu", "tpu_custom_call", "mosaic_tpu"),
])
def test_each_backend_s_fingerprint_is_the_one_the_judge_computes(task, size, platform, target,
                                                                   backend):
  """triton_fingerprint, mosaic_gpu_fingerprint and mosaic_tpu_fingerprint (the module's API)
  give each kernel call the fingerprint the module analysis records for it."""
  tree = "tpu" if platform == "tpu" else "gpu"
  source = kernel_path(tree, task).read_text()
  structs = get_task(task).input_structs(size)
  kernel = load_module(source, "candidate.py").kernel
  text = export_for(platform, functools.partial(kernel, interpret=False), *structs).mlir_module()
  analysed = [k.fingerprint for k in module_analysis.analyze_module(text).kernels
              if k.backend == backend]
  payloads = _payloads(text, target)
  assert payloads and len(payloads) == len(analysed)
  of = {"triton": fingerprint.triton_fingerprint,
        "mosaic_gpu": fingerprint.mosaic_gpu_fingerprint,
        "mosaic_tpu": lambda p: fingerprint.mosaic_tpu_fingerprint(p.decode())}[backend]
  assert [of(p) for p in payloads] == analysed


_MOSAIC_GPU = ('module attributes {mosaic_gpu.dump_basename = "NAME"} {\n'
               '  %0 = "stable_mosaic_gpu.arith.constant"() {value = 4 : i32} : () -> i32\n}\n')


def test_a_mosaic_gpu_kernel_s_dump_name_is_no_part_of_its_fingerprint():
  """Mosaic GPU names a kernel's dumps after the kernel and a counter: a renamed copy, or the
  same kernel lowered later in the process, has another dump name and the same fingerprint."""
  first, renamed = (fingerprint.mosaic_gpu_fingerprint(_MOSAIC_GPU.replace("NAME", n).encode())
                    for n in ("matmul_3", "my_own_work_12"))
  changed = _MOSAIC_GPU.replace("NAME", "matmul_3").replace("value = 4", "value = 8")
  assert first == renamed != fingerprint.mosaic_gpu_fingerprint(changed.encode())


def _tpu_config(module_text: str, *, body: str | None = None) -> str:
  encoded = base64.b64encode(module_text.encode()).decode()
  return json.dumps({"custom_call_config": {"body": encoded if body is None else body}})


def test_a_mosaic_tpu_fingerprint_reads_only_a_base64_body():
  text = ('module {\n  "func.func"() <{sym_name = "NAME", function_type = () -> ()}> ({\n'
          '    "func.return"() : () -> ()\n  }) : () -> ()\n}\n')
  first, renamed = (fingerprint.mosaic_tpu_fingerprint(_tpu_config(text.replace("NAME", n)))
                    for n in ("bmm", "mine"))
  assert first == renamed
  with pytest.raises(binascii.Error):  # not decoded by skipping what is not base64
    fingerprint.mosaic_tpu_fingerprint(_tpu_config(text, body="bW9k!dWxl"))


def test_the_reward_rejects_copies_unless_told_otherwise(tmp_path):
  with KernelReward(device="cpu", cache_dir=tmp_path) as reward:
    assert reward.options.reject_copies
  with KernelReward(device="cpu", cache_dir=tmp_path, reject_copies=False) as reward:
    assert not reward.options.reject_copies


def test_a_module_nested_thousands_deep_has_a_digest_and_its_depth_counts():
  """The digest walks without recursion (adv_deep_dead_loads nests 3000 scf.if), and what an op
  holds is part of it."""
  def nested(depth: int) -> str:
    return ("func.func @f(%c: i1) {\n" + "scf.if %c {\n" * depth + "}\n" * depth
            + "func.return\n}")
  assert _digest(nested(3000)) == _digest(nested(3000)) != _digest(nested(2999))


def test_which_computed_value_feeds_which_operand_is_part_of_the_digest():
  """a*b - (a+b) is not (a+b) - a*b, nor is the difference of a call's two results taken the
  other way round: an operand is the op (and the result of it) that computed it, not only
  that some op did."""
  kernel = """func.func @f(%x: f32, %y: f32) -> f32 {
  %s = arith.addf %x, %y : f32
  %p = arith.mulf %x, %y : f32
  %d = arith.subf %p, %s : f32
  %q:2 = func.call @pair(%x) : (f32) -> (f32, f32)
  %e = arith.subf %q#0, %q#1 : f32
  %r = arith.addf %d, %e : f32
  func.return %r : f32
}
func.func private @pair(f32) -> (f32, f32)
"""
  swapped = kernel.replace("%p, %s", "%s, %p")
  results_swapped = kernel.replace("%q#0, %q#1", "%q#1, %q#0")
  assert len({_digest(kernel), _digest(swapped), _digest(results_swapped)}) == 3


def test_an_intermediate_s_type_is_part_of_the_digest():
  """A kernel that widens to float64 in between computes at another precision than one that
  widens to float32, with the same arguments and answer."""
  kernel = """func.func @f(%x: f16) -> f16 {
  %w = arith.extf %x : f16 to f32
  %s = arith.mulf %w, %w : f32
  %n = arith.truncf %s : f32 to f16
  func.return %n : f16
}
"""
  assert _digest(kernel) != _digest(kernel.replace("f32", "f64"))


def test_a_nested_block_argument_s_type_is_part_of_the_digest():
  """A region's arguments (a comparator's, say) are their position and their type: the same
  ops comparing float16 or bfloat16 values are other kernels, even where nothing else in the
  module names that type."""
  module = ('module {\n  "test.sort"() ({\n  ^bb0(%a: f16, %b: f16):\n'
            '    %c = "stable_mosaic_gpu.arith.cmpf"(%a, %b) {predicate = 4 : i64} : '
            '(f16, f16) -> i1\n    "test.yield"(%c) : (i1) -> ()\n  }) : () -> ()\n}\n')
  assert (fingerprint.mosaic_gpu_fingerprint(module.encode())
          != fingerprint.mosaic_gpu_fingerprint(module.replace("f16", "bf16").encode()))


def test_a_mosaic_gpu_kernel_s_commutative_ops_commute_in_their_stable_form():
  """Mosaic GPU's stable form names its ops `stable_mosaic_gpu.arith.maximumf`: still max,
  whose operands commute (adv_near_copy_relu on Hopper), while a subtraction's do not."""
  module = ('module {\n'
            '  %0 = "stable_mosaic_gpu.arith.constant"() {value = 4.0 : f32} : () -> f32\n'
            '  %1 = "stable_mosaic_gpu.arith.constant"() {value = 0.0 : f32} : () -> f32\n'
            '  %2 = "stable_mosaic_gpu.arith.OP"(%0, %1) : (f32, f32) -> f32\n}\n')
  for op, commutes in (("maximumf", True), ("addf", True), ("subf", False)):
    first, swapped = (fingerprint.mosaic_gpu_fingerprint(m.replace("OP", op).encode())
                      for m in (module, module.replace("(%0, %1)", "(%1, %0)")))
    assert (first == swapped) == commutes, op


def test_blocks_listed_out_of_dominance_order_have_a_digest():
  """A block may use a value defined in a block listed after it (one that dominates it): the
  digest is still computed, and still sees what that later block computes."""
  kernel = """func.func @f(%x: f32) -> f32 {
  cf.br ^bb2
^bb1:
  %r = arith.mulf %v, %v : f32
  func.return %r : f32
^bb2:
  %v = arith.addf %x, %x : f32
  cf.br ^bb1
}
"""
  assert len(_digest(kernel)) == 64
  assert _digest(kernel) != _digest(kernel.replace("addf", "subf"))


def test_a_shipped_kernel_is_fingerprinted_at_its_own_config_and_each_of_its_tables():
  """Its own choice first, then every config any GPU's table holds, each once (round 12's
  adv_retuned_copy_relu pasted relu at a block its bfloat16 table holds)."""
  tables = {"GPU A": {"4096x4096": {"block": 1024, "num_warps": 8},
                      "4096x4096:bfloat16": {"num_warps": 8, "block": 2048}},
            "GPU B": {"1024x1024": {"num_warps": 8, "block": 1024}}}
  module = types.SimpleNamespace(TUNED_CONFIGS=tables)
  assert fingerprint._shipped_configs(module) == [  # pylint: disable=protected-access
      None, {"block": 1024, "num_warps": 8}, {"num_warps": 8, "block": 2048}]
  assert fingerprint._shipped_configs(types.SimpleNamespace()) == [None]  # pylint: disable=protected-access
  relu = load_kernel("gpu", "relu")
  assert {"block": 2048, "num_warps": 8} in fingerprint._shipped_configs(relu)  # pylint: disable=protected-access


_CALLER = """func.func @relu(%x: f32) -> f32 {
  %s = func.call @helper(%x) : (f32) -> f32
  func.return %s : f32
}
func.func private @helper(%x: f32) -> f32 {
  %s = arith.mulf %x, %x : f32
  func.return %s : f32
}
"""


@pytest.mark.parametrize("name", [
    '@"my \\"own\\" \\\\ helper"',  # printed back as @"my \22own\22 \\ helper"
    "@my.helper$2",
    '@"plain name"',
])
def test_a_called_function_s_name_is_no_part_of_the_digest_however_it_is_spelt(name):
  """A call's callee is a symbol reference in an attribute: a renamed copy names its helper as
  it likes (bare with `.` and `$`, or quoted with escapes), and the digest is the same."""
  renamed = _CALLER.replace("@helper", name)
  assert renamed != _CALLER
  assert _digest(renamed) == _digest(_CALLER)


def test_a_long_quoted_symbol_name_is_blanked_in_memory_of_its_own_size():
  """A candidate's kernel can name a symbol with megabytes of text: it is blanked whole, escapes
  included, without the pattern keeping state per character (as the nesting scan's strings)."""
  attr = '@"' + "0123456789ABCDEF" * (1 << 19) + '\\22{"'
  named = types.SimpleNamespace(name="callee", attr=attr)
  tracemalloc.start()
  try:
    text = fingerprint._attribute_text(named)  # pylint: disable=protected-access
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert text == fingerprint._attribute_text(  # pylint: disable=protected-access
      types.SimpleNamespace(name="callee", attr="@f"))  # blanked as a short name is
  assert peak < 3 * len(attr), peak
