"""Fingerprints of lowered Pallas kernels: what a copy of a shipped kernel cannot rename away.

`triton_fingerprint(ir)` reads the Triton module a kernel call carries (the MLIR bytecode in
the cuda export's `__gpu$xla.gpu.triton` backend_config) and hashes its generic text printed
without locations, every symbol name blanked: renaming the kernel, its functions or its
variables, moving lines or rewriting comments leaves it unchanged; a change to what the kernel
computes, to its block shapes or to its constants changes it. The bytes are the candidate's,
so it runs where the module analysis runs, in the walled helper (analysis_process.py).

`shipped_copies(kernels, task, size, precision, analyser)` names the shipped kernels
(kernels_gpu/<task>.py, kernels_tpu/<task>.py) whose own kernel calls have one of these
fingerprints at the same task, size and precision. The shipped side is computed by the judge
from the trees themselves (exported here, analysed by the same helper), never taken from a
table, so it is always the shipped code of this checkout.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Iterable
from typing import Any, Final, Protocol

logger = logging.getLogger(__name__)

SHIPPED_TREES: Final = ("gpu", "tpu")
# Symbol definitions and references in the generic form: `sym_name = "matmul"`, `@matmul`.
_SYMBOL_NAME: Final = re.compile(r'sym_name = "(?:[^"\\]|\\.)*"')
_SYMBOL_REF: Final = re.compile(r'@(?:"(?:[^"\\]|\\.)*"|[\w$.\-]+)')


class Analyser(Protocol):
  """What reads a serialized module (analysis_process.ModuleAnalyser): its report and text."""

  def analyse(self, serialized: bytes) -> tuple[Any, str]: ...


def triton_fingerprint(ir_bytecode: bytes) -> str:
  """The fingerprint of one Triton kernel module (module docstring). Parses the bytecode with
  the Triton dialect: call it only inside the walled helper."""
  from jax._src.interpreters import mlir  # pylint: disable=import-outside-toplevel
  from jax._src.lib.mlir import ir  # pylint: disable=import-outside-toplevel
  from jax._src.lib.triton import dialect as tt_dialect  # pylint: disable=import-outside-toplevel
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  module = ir.Module.parse(ir_bytecode, context=context)
  text = module.operation.get_asm(enable_debug_info=False, print_generic_op_form=True)
  return normalized_digest(text)


def normalized_digest(generic_text: str) -> str:
  """sha256 of a module's generic text with every symbol name blanked."""
  text = _SYMBOL_NAME.sub('sym_name = "_"', generic_text)
  return hashlib.sha256(_SYMBOL_REF.sub("@_", text).encode()).hexdigest()


def copy_reason(copies: Iterable[str]) -> str:
  return (f"the compiled kernel is a shipped kernel's ({', '.join(copies)}), renamed at most: "
          "only the candidate's own work is rewarded")


def shipped_copies(kernels: Iterable[Any], task: str, size: str, precision: str,
                   analyser: Analyser) -> tuple[str, ...]:
  """The shipped kernels (paths relative to the checkout) that share a kernel fingerprint with
  `kernels`, a candidate's kernel calls (module_analysis.KernelCall) at `size` and `precision`
  of `task`."""
  found = {k.fingerprint for k in kernels if k.fingerprint}
  if not found:
    return ()
  return tuple(path for path, prints in _shipped(task, size, precision, analyser).items()
               if found & prints)


@functools.lru_cache(maxsize=32)
def _shipped(task: str, size: str, precision: str, analyser: Analyser
             ) -> dict[str, frozenset[str]]:
  """Each shipped tree's kernel fingerprints for `task` at `size` and `precision`: its kernel
  exported for cuda here (trusted code) and analysed by `analyser`. A tree whose kernel does
  not export for cuda at this size (an original TPU kernel) has none."""
  from pallasbench_dataset.kernels import kernel_path, load_kernel  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.lowering import export_for  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.tasks import get_task  # pylint: disable=import-outside-toplevel
  structs = get_task(task).at_precision(precision).input_structs(size)
  prints = {}
  for tree in SHIPPED_TREES:
    path = kernel_path(tree, task)
    name = f"{path.parent.name}/{path.name}"
    try:
      kernel = load_kernel(tree, task).kernel
      exported = export_for("cuda", functools.partial(kernel, interpret=False), *structs)
      report, _ = analyser.analyse(exported.mlir_module_serialized)
    except Exception as e:  # pylint: disable=broad-except  (it does not lower, or is refused)
      logger.debug("no fingerprint of %s at %s %s: %s", name, size, precision, e)
      prints[name] = frozenset()
      continue
    prints[name] = frozenset(k.fingerprint for k in report.kernels if k.fingerprint)
  return prints
