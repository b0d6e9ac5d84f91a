"""Compiling an exported artifact, timed, with the PTX XLA produced and whether the persistent
compilation cache served it.

The judge and the compile stage set XLA_FLAGS to dump the GPU compilation of modules named
`jit_pallasbench_candidate*` (see `xla_dump_flags`), so the PTX of the kernel under test
can be read back after `compile()`; nothing else is dumped. Both use the same flags: the
dump folder is left out of JAX's cache key, the other dump flags are not, and a judge with
other flags would never find what the compile stage put in the cache.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from collections.abc import Callable, Sequence
from typing import Final

import jax

ENTRY_NAME: Final = "pallasbench_candidate"
_CACHE_HIT_EVENT: Final = "/jax/compilation_cache/cache_hits"
_cache_hits = [0]


def _count_cache_hits(event: str, **_) -> None:
  if event == _CACHE_HIT_EVENT:
    _cache_hits[0] += 1


jax.monitoring.register_event_listener(_count_cache_hits)


def xla_dump_flags(dump_dir: pathlib.Path) -> str:
  """XLA flags that dump PTX and LLVM IR of the candidate's modules only."""
  return (f"--xla_dump_to={dump_dir} --xla_gpu_dump_llvmir --xla_dump_emitter_re=.* "
          f"--xla_dump_hlo_module_re=.*{ENTRY_NAME}.*")


def use_persistent_cache(cache_dir: pathlib.Path) -> None:
  """Every compile of this process reads and writes `cache_dir`, however short it took."""
  jax.config.update("jax_compilation_cache_dir", str(cache_dir))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompiledArtifact:
  """An exported kernel compiled in this process (or loaded from the persistent cache)."""
  executable: Callable
  compile_s: float
  ptx: tuple[str, ...]
  cache_hit: bool


def _named_entry(exported: jax.export.Exported) -> Callable:
  """Wraps the artifact so its XLA module is named jit_pallasbench_candidate (dump filter)."""
  def pallasbench_candidate(*args):
    return exported.call(*args)
  return pallasbench_candidate


def _clear(dump_dir: pathlib.Path | None) -> None:
  """Empties the dump folder: XLA writes files there for every module it compiles (the
  filter keeps only their PTX and LLVM IR out), and over a run they would fill the disk."""
  if dump_dir is not None and dump_dir.is_dir():
    for path in dump_dir.iterdir():
      if path.is_file():
        path.unlink(missing_ok=True)


def compile_exported(exported: jax.export.Exported, structs: Sequence[jax.ShapeDtypeStruct],
                     dump_dir: pathlib.Path | None) -> CompiledArtifact:
  """Lowers and compiles the artifact for this process's device; raises what XLA raises. The
  PTX is what this compile dumped: the folder is emptied before and after."""
  _clear(dump_dir)
  hits = _cache_hits[0]
  t0 = time.perf_counter()
  try:
    compiled = jax.jit(_named_entry(exported)).trace(*structs).lower().compile()
    compile_s = time.perf_counter() - t0
    ptx = tuple(p.read_text(errors="replace") for p in sorted(dump_dir.glob("*.ptx"))) if (
        dump_dir is not None and dump_dir.is_dir()) else ()
  finally:
    _clear(dump_dir)
  return CompiledArtifact(executable=compiled, compile_s=compile_s, ptx=ptx,
                          cache_hit=_cache_hits[0] > hits)
