"""Fingerprints of lowered Pallas kernels: what a copy of a shipped kernel cannot rename away.

Every kernel backend the judge reads a structure from has one, computed from the kernel module
its custom call carries: `triton_fingerprint` (the MLIR bytecode in the cuda export's
`__gpu$xla.gpu.triton` backend_config), `mosaic_gpu_fingerprint` (the `module` of a
`mosaic_gpu_v2` call: the core of the shipped contraction kernels on Hopper) and
`mosaic_tpu_fingerprint` (the body of a `tpu_custom_call`: what a CPU judge reads for a kernel
that does not lower to Triton). Each hashes the module's generic text printed without
locations, every symbol name (and Mosaic GPU's dump name) blanked: renaming the kernel, its
functions or its variables, moving lines or rewriting comments leaves it unchanged; a change
to what the kernel computes, to its block shapes or to its constants changes it. A backend
without one would make every paste of a shipped kernel on it "no copy". The bytes are the
candidate's, so they are read where the module analysis runs, in the walled helper
(analysis_process.py), each in an MLIR context of its own.

`shipped_copies(kernels, task, size, precision, analyser, platform=)` names the shipped
kernels (kernels_gpu/<task>.py, kernels_tpu/<task>.py) whose own kernel calls, exported for the
same platform (cuda, or tpu where the judge read the candidate's TPU export), have one of these
fingerprints at the same task, size and precision. The shipped side is computed by the judge
from the trees themselves (exported here, analysed by the same helper), never taken from a
table, so it is always the shipped code of this checkout.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import re
from collections.abc import Iterable
from typing import Any, Final, Protocol

logger = logging.getLogger(__name__)

SHIPPED_TREES: Final = ("gpu", "tpu")
# Symbol definitions and references in the generic form: `sym_name = "matmul"`, `@matmul`.
_SYMBOL_NAME: Final = re.compile(r'sym_name = "(?:[^"\\]|\\.)*"')
# Mosaic GPU names a kernel's dumps after the kernel and a per-process counter (`matmul_3`).
_DUMP_NAME: Final = re.compile(r'mosaic_gpu\.dump_basename = "(?:[^"\\]|\\.)*"')
# A dialect attribute Mosaic GPU's stable form stores in its older printed form, `#gpu<dim x>`,
# which this MLIR's parser reads only as `#gpu.dim<x>` (the same length: bytecode offsets hold).
_OLD_DIALECT_ATTR: Final = re.compile(rb"#(\w+)<(\w+) (\w+)>")
_SYMBOL_REF: Final = re.compile(r'@(?:"(?:[^"\\]|\\.)*"|[\w$.\-]+)')


class Analyser(Protocol):
  """What reads a serialized module (analysis_process.ModuleAnalyser): its report and text."""

  def analyse(self, serialized: bytes) -> tuple[Any, str]: ...


def triton_fingerprint(ir_bytecode: bytes) -> str:
  """The fingerprint of one Triton kernel module (module docstring). Parses the bytecode with
  the Triton dialect: call it only inside the walled helper."""
  return module_fingerprint(parse_triton(ir_bytecode), "triton")


def parse_triton(ir_bytecode: bytes):
  """A Triton kernel module, parsed with the Triton dialect (an ir.Module whose context is its
  own). Call it only inside the walled helper."""
  from jax._src.interpreters import mlir  # pylint: disable=import-outside-toplevel
  from jax._src.lib.mlir import ir  # pylint: disable=import-outside-toplevel
  from jax._src.lib.triton import dialect as tt_dialect  # pylint: disable=import-outside-toplevel
  context = mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  context.load_all_available_dialects()
  return ir.Module.parse(ir_bytecode, context=context)


def _fresh_context():
  """An MLIR context of its own with JAX's dialects (never the thread's shared one: a kernel
  module's unregistered stable-form ops are allowed here only)."""
  from jax._src.interpreters import mlir  # pylint: disable=import-outside-toplevel
  from jax._src.lib.mlir import ir  # pylint: disable=import-outside-toplevel
  context = ir.Context()
  context.append_dialect_registry(mlir.upstream_dialects)
  context.load_all_available_dialects()
  return context


def mosaic_gpu_fingerprint(module_bytecode: bytes) -> str:
  """The fingerprint of one Mosaic GPU kernel module (its stable serialized form, whose ops
  are read as unregistered ones). Call it only inside the walled helper."""
  return module_fingerprint(parse_mosaic_gpu(module_bytecode), "mosaic_gpu")


def parse_mosaic_gpu(module_bytecode: bytes):
  """A Mosaic GPU kernel module in its stable serialized form, parsed (its ops unregistered,
  named `stable_mosaic_gpu.<op>`). Call it only inside the walled helper."""
  from jax._src.lib import mosaic_gpu_dialect  # pylint: disable=import-outside-toplevel
  from jax._src.lib.mlir import ir  # pylint: disable=import-outside-toplevel
  readable = _OLD_DIALECT_ATTR.sub(lambda m: b"#%s.%s<%s>" % m.groups(), module_bytecode)
  context = _fresh_context()
  mosaic_gpu_dialect.register_dialect(context)
  context.allow_unregistered_dialects = True
  return ir.Module.parse(readable, context=context)


def mosaic_tpu_fingerprint(backend_config: str) -> str:
  """The fingerprint of one Mosaic TPU kernel (the module in a `tpu_custom_call`'s
  backend_config, in its stable serialized form). Call it only inside the walled helper."""
  return module_fingerprint(parse_mosaic_tpu(backend_config), "mosaic_tpu")


def parse_mosaic_tpu(backend_config: str):
  """The Mosaic TPU kernel module in a `tpu_custom_call`'s backend_config, parsed. Call it
  only inside the walled helper."""
  from jax._src.lib import tpu  # pylint: disable=import-outside-toplevel
  from jax._src.lib.mlir import ir  # pylint: disable=import-outside-toplevel
  body = base64.b64decode(json.loads(backend_config)["custom_call_config"]["body"],
                          validate=True)
  context = _fresh_context()
  tpu.register_dialect(context)
  context.allow_unregistered_dialects = True
  return ir.Module.parse(body, context=context)


def module_fingerprint(module, backend: str) -> str:
  """The fingerprint of a parsed kernel module of `backend` (triton, mosaic_gpu, mosaic_tpu)."""
  text = module.operation.get_asm(enable_debug_info=False, print_generic_op_form=True)
  if backend == "mosaic_gpu":
    text = _DUMP_NAME.sub('mosaic_gpu.dump_basename = "_"', text)
  return normalized_digest(text)


def normalized_digest(generic_text: str) -> str:
  """sha256 of a module's generic text with every symbol name blanked."""
  text = _SYMBOL_NAME.sub('sym_name = "_"', generic_text)
  return hashlib.sha256(_SYMBOL_REF.sub("@_", text).encode()).hexdigest()


def copy_reason(copies: Iterable[str]) -> str:
  return (f"the compiled kernel is a shipped kernel's ({', '.join(copies)}), renamed at most: "
          "only the candidate's own work is rewarded")


def shipped_copies(kernels: Iterable[Any], task: str, size: str, precision: str,
                   analyser: Analyser, *, platform: str = "cuda") -> tuple[str, ...]:
  """The shipped kernels (paths relative to the checkout) that share a kernel fingerprint with
  `kernels`, a candidate's kernel calls (module_analysis.KernelCall) at `size` and `precision`
  of `task` in its export for `platform` (cuda or tpu)."""
  found = {k.fingerprint for k in kernels if k.fingerprint}
  if not found:
    return ()
  return tuple(path for path, prints in _shipped(task, size, precision, analyser,
                                                 platform).items()
               if found & prints)


@functools.lru_cache(maxsize=32)
def _shipped(task: str, size: str, precision: str, analyser: Analyser, platform: str = "cuda"
             ) -> dict[str, frozenset[str]]:
  """Each shipped tree's kernel fingerprints for `task` at `size` and `precision`: its kernel
  exported for `platform` here (trusted code) and analysed by `analyser`. A tree whose kernel
  does not export for that platform at this size has none."""
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
      exported = export_for(platform, functools.partial(kernel, interpret=False), *structs)
      report, _ = analyser.analyse(exported.mlir_module_serialized)
    except Exception as e:  # pylint: disable=broad-except  (it does not lower, or is refused)
      logger.debug("no fingerprint of %s at %s %s: %s", name, size, precision, e)
      prints[name] = frozenset()
      continue
    prints[name] = frozenset(k.fingerprint for k in report.kernels if k.fingerprint)
  return prints
