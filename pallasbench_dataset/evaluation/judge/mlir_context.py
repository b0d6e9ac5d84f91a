"""The MLIR context the module analysis reads exported modules in, without importing jax.

The analysis runs in a helper process started afresh for every evaluated item
(`analysis_process`), and importing jax was most of its start: about 2 s of CPU on two busy
cores, against 0.4 s for jaxlib's MLIR bindings alone. A module's text is what the analysis and
the copy check read, so the context loads exactly the dialects jax's own `make_ir_context`
loads, and `module_text` prints a module as `Exported.mlir_module()` does (the tests compare
the two on shipped kernels).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import sys
import types

import jaxlib.mlir._mlir_libs._jax_mlir_ext as jax_mlir_ext
from jaxlib import _jax
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo, mhlo, mpmd, sdy, stablehlo


class _Context(ir.Context):
  """A context without every dialect linked into the binary, as jax's `JaxIrContext`."""

  def __init__(self):  # pylint: disable=super-init-not-called
    super(ir.Context, self).__init__()  # pylint: disable=bad-super-call


# The module a Mosaic GPU kernel's ops (parsed unregistered: `fingerprint.parse_mosaic_gpu`)
# would have their Python op classes in. jaxlib ships none.
_NO_OP_CLASSES = "jaxlib.mlir.dialects.stable_mosaic_gpu"


@functools.cache
def remember_dialects_without_op_classes() -> None:
  """Makes MLIR's lookup of the op classes of a Mosaic GPU kernel's dialect find nothing once.

  MLIR's Python bindings, wrapping an op, look for a Python module of its dialect under each
  of their search prefixes and never remember a failed search: every op of a Mosaic GPU kernel
  module cost three failed imports, each a search of sys.path, 85-90% of analysing such a
  module (matmul_relu at `large`: 2.0 s, 0.16 s with this; docs/ci-time-session33.md). An
  empty module under the first prefix is found once and remembered; it registers no op class,
  so each op is the generic OpView it was before and every reading is the same. Should jaxlib
  ever ship such a module, it is left to be found."""
  if _NO_OP_CLASSES not in sys.modules and importlib.util.find_spec(_NO_OP_CLASSES) is None:
    sys.modules[_NO_OP_CLASSES] = types.ModuleType(_NO_OP_CLASSES, "no op classes")


@functools.cache
def _registry() -> ir.DialectRegistry:
  registry = ir.DialectRegistry()
  jax_mlir_ext.register_dialects(registry)
  return registry


@functools.cache
def _thread_pool() -> ir.ThreadPool:
  return ir.ThreadPool()


def make_context() -> ir.Context:
  """A fresh context with jax's dialects (`jax._src.interpreters.mlir.make_ir_context`)."""
  context = _Context()
  context.append_dialect_registry(_registry())
  context.load_all_available_dialects()
  context.set_thread_pool(_thread_pool())
  sdy.register_dialect(context)
  mpmd.register_dialect(context)
  mhlo.register_mhlo_dialect(context)
  chlo.register_dialect(context)
  stablehlo.register_dialect(context)
  return context


def upstream_context() -> ir.Context:
  """A context of its own with the upstream dialects jax registers (all linked dialects
  loaded), for a kernel's module read beside them."""
  context = ir.Context()
  context.append_dialect_registry(_registry())
  context.load_all_available_dialects()
  return context


def module_text(serialized: bytes) -> str:
  """The text of a serialized module (`Exported.mlir_module_serialized`), debug locations
  included, as `Exported.mlir_module()` prints it."""
  with make_context():
    module = _jax.mlir.deserialize_portable_artifact(serialized)
    out = io.StringIO()
    module.operation.print(file=out, enable_debug_info=True)
  return out.getvalue()
