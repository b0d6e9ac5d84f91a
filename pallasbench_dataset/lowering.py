"""Lowering and export on a CPU host: Triton for an abstract NVIDIA GPU, Mosaic for TPU.

Interpret mode ignores the Triton rules (power-of-two tensors, no batched dots, no value
slices, ...); lowering for the real target catches them without a GPU. It does not catch
what is decided after the Triton IR: the 2^20-element tensor limit, shared-memory overflow,
ptxas errors, races and missing masks.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator
from typing import Final

import jax

TRITON_CUSTOM_CALL: Final = "__gpu$xla.gpu.triton"
MOSAIC_GPU_CUSTOM_CALL: Final = "mosaic_gpu_v2"
TPU_CUSTOM_CALL: Final = "tpu_custom_call"
DEFAULT_GPU: Final = ("NVIDIA H200", 132)
DEFAULT_TPU: Final = "TPU v5 lite"


def _mesh(device: jax.sharding.AbstractDevice) -> jax.sharding.AbstractMesh:
  """A one-device mesh with an Auto axis: with the default Explicit axis, values made under it
  (a kernel's output, `x + 1`) carry shardings that plain inputs lack, and ops mixing both
  (a dynamic_update_slice of a kernel's output into the input) refuse to trace."""
  return jax.sharding.AbstractMesh((1,), ("_",), abstract_device=device,
                                   axis_types=(jax.sharding.AxisType.Auto,))


@contextlib.contextmanager
def abstract_gpu(device_kind: str = DEFAULT_GPU[0], num_cores: int = DEFAULT_GPU[1]) -> Iterator[None]:
  """Makes Pallas' Triton lowering target `device_kind` without a GPU present."""
  device = jax.sharding.AbstractDevice(device_kind=device_kind, num_cores=num_cores,
                                       platform="cuda")
  mesh = _mesh(device)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    with jax.sharding.use_abstract_mesh(mesh):
      yield


@contextlib.contextmanager
def abstract_tpu(device_kind: str = DEFAULT_TPU) -> Iterator[None]:
  """An abstract TPU device for the hardware info some block checks read (1-D blocks fail
  with 'Unsupported TPU device kind: cpu' without one)."""
  device = jax.sharding.AbstractDevice(device_kind=device_kind, num_cores=1, platform="tpu")
  with jax.sharding.use_abstract_mesh(_mesh(device)):
    yield


def export_for(platform: str, fn: Callable, *args: jax.ShapeDtypeStruct) -> jax.export.Exported:
  """`jax.export` of `fn` for one platform ("cuda", "tpu" or "cpu"), on any host.

  For "cuda" the Pallas GPU custom calls (Triton, Mosaic GPU) are allowed: they are the
  kernel. `fn` must already carry its `interpret` flag (False for cuda/tpu, True for cpu).
  """
  if platform == "cuda":
    checks = [jax.export.DisabledSafetyCheck.custom_call(t)
              for t in (TRITON_CUSTOM_CALL, MOSAIC_GPU_CUSTOM_CALL)]
    with abstract_gpu():
      return jax.export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=checks)(*args)
  if platform == "tpu":
    with abstract_tpu():
      return jax.export.export(jax.jit(fn), platforms=["tpu"])(*args)
  if platform == "cpu":
    return jax.export.export(jax.jit(fn), platforms=["cpu"])(*args)
  raise ValueError(f"unknown platform {platform!r}: cuda, tpu or cpu")


def lower_for_tpu(fn: Callable, *args: jax.ShapeDtypeStruct) -> str:
  """StableHLO text of `fn` exported for TPU (Mosaic); raises if a pallas_call fails to lower."""
  return export_for("tpu", fn, *args).mlir_module()


@contextlib.contextmanager
def capture_triton_ir() -> Iterator[list[str]]:
  """Collects the Triton IR text of every pallas_call lowered inside the block.

  Wraps jax 0.11's private `lower_jaxpr_to_triton_module`; with another JAX the list stays
  empty rather than failing, and the caller records the IR as unavailable.
  """
  texts: list[str] = []
  try:
    from jax._src.pallas.triton import lowering as triton_lowering  # pylint: disable=import-outside-toplevel
    original = triton_lowering.lower_jaxpr_to_triton_module
  except (ImportError, AttributeError):
    yield texts
    return

  @functools.wraps(original)
  def recording(*args, **kwargs):
    result = original(*args, **kwargs)
    texts.append(result.module.operation.get_asm(enable_debug_info=False))
    return result

  triton_lowering.lower_jaxpr_to_triton_module = recording
  try:
    yield texts
  finally:
    triton_lowering.lower_jaxpr_to_triton_module = original
