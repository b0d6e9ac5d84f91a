"""Cold compile profile: trace, lower and compile timed separately, with the IR they produce.

The evaluation child sets XLA_FLAGS to dump the GPU compilation of modules named
`jit_pallasbench_candidate*` (see `xla_dump_flags`), so the PTX of the kernel under test
can be read back after `compile()`; nothing else is dumped.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import time
from collections.abc import Callable, Sequence
from typing import Final

import jax

from pallasbench_dataset.jaxpr_analysis import JaxprReport, analyze
from pallasbench_dataset.lowering import capture_triton_ir, lower_for_tpu, lower_for_triton

ENTRY_NAME: Final = "pallasbench_candidate"


def xla_dump_flags(dump_dir: pathlib.Path) -> str:
  """XLA flags that dump PTX and LLVM IR of the candidate's modules only."""
  return (f"--xla_dump_to={dump_dir} --xla_gpu_dump_llvmir --xla_dump_emitter_re=.* "
          f"--xla_dump_hlo_module_re=.*{ENTRY_NAME}.*")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompiledKernel:
  """A kernel traced, lowered and compiled once, with what each stage showed."""
  executable: Callable
  report: JaxprReport
  trace_s: float
  lower_s: float
  compile_s: float
  stablehlo: str
  triton_ir: tuple[str, ...]
  ptx: tuple[str, ...]


class StageError(Exception):
  """A stage failed; `stage` is 'trace', 'lowering' or 'compile'."""

  def __init__(self, stage: str, cause: BaseException):
    super().__init__(f"{type(cause).__name__}: {cause}")
    self.stage = stage


def _named_entry(fn: Callable) -> Callable:
  """Wraps fn so its XLA module is named jit_pallasbench_candidate (for the dump filter)."""
  def pallasbench_candidate(*args):
    return fn(*args)
  return pallasbench_candidate


def _new_files(dump_dir: pathlib.Path | None, before: set[pathlib.Path], suffix: str) -> tuple[str, ...]:
  if dump_dir is None or not dump_dir.is_dir():
    return ()
  new = sorted(p for p in dump_dir.iterdir() if p.suffix == suffix and p not in before)
  return tuple(p.read_text(errors="replace") for p in new)


def compile_cold(fn: Callable, args: Sequence[jax.Array], dump_dir: pathlib.Path | None) -> CompiledKernel:
  """Traces, lowers and compiles `fn` for `args`, timing each stage and collecting the IR."""
  before = set(dump_dir.iterdir()) if dump_dir is not None and dump_dir.is_dir() else set()
  jitted = jax.jit(_named_entry(fn))
  t0 = time.perf_counter()
  try:
    traced = jitted.trace(*args)
  except Exception as e:  # a candidate may raise anything while tracing
    raise StageError("trace", e) from e
  t1 = time.perf_counter()
  try:
    with capture_triton_ir() as triton_ir:
      lowered = traced.lower()
  except Exception as e:
    raise StageError("lowering", e) from e
  t2 = time.perf_counter()
  try:
    compiled = lowered.compile()
    t3 = time.perf_counter()
  except Exception as e:
    raise StageError("compile", e) from e
  return CompiledKernel(
      executable=compiled, report=analyze(traced.jaxpr), trace_s=t1 - t0, lower_s=t2 - t1,
      compile_s=t3 - t2, stablehlo=lowered.as_text(), triton_ir=tuple(triton_ir),
      ptx=_new_files(dump_dir, before, ".ptx"))


def lowering_check(lower: Callable, fn: Callable, args: Sequence[jax.Array]) -> tuple[bool, str | None]:
  """(lowers, error) for a cross-platform lowering check that needs no device."""
  structs = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args)
  try:
    lower(fn, *structs)
  except Exception as e:  # any failure to lower is the answer
    return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]
  return True, None


check_triton = functools.partial(lowering_check, lower_for_triton)
check_tpu = functools.partial(lowering_check, lower_for_tpu)
