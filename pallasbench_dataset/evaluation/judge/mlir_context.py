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
import io

import jaxlib.mlir._mlir_libs._jax_mlir_ext as jax_mlir_ext
from jaxlib import _jax
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo, mhlo, mpmd, sdy, stablehlo


class _Context(ir.Context):
  """A context without every dialect linked into the binary, as jax's `JaxIrContext`."""

  def __init__(self):  # pylint: disable=super-init-not-called
    super(ir.Context, self).__init__()  # pylint: disable=bad-super-call


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
