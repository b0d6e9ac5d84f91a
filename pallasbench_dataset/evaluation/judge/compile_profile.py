"""Compiling an exported artifact, timed, with the PTX XLA produced and whether the persistent
compilation cache served it.

The judge and the compile stage set XLA_FLAGS to dump the GPU compilation of modules named
`jit_pallasbench_candidate*` (see `xla_dump_flags`): its LLVM IR and PTX (the Pallas Triton
kernels are linked into the module's PTX, under their `pallas_call` names), and Mosaic GPU
prints its kernels' PTX, which a compile collects from the process' stdout. Nothing else is
dumped. Both use the same flags: the dump
folder is left out of JAX's cache key, the other dump flags are not, and a judge with other
flags would never find what the compile stage put in the cache.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import pathlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Final

import jax
from jax._src import config as jax_config  # the cache switch as a context (no public one)
from jax.experimental.compilation_cache.compilation_cache import reset_cache

ENTRY_NAME: Final = "pallasbench_candidate"
EMITTERS: Final = "^(ptx|llvm)$"  # the emitters whose dumps are LLVM IR and PTX, and no other
_CACHE_HIT_EVENT: Final = "/jax/compilation_cache/cache_hits"
_cache_hits = [0]


def _count_cache_hits(event: str, **_) -> None:
  if event == _CACHE_HIT_EVENT:
    _cache_hits[0] += 1


jax.monitoring.register_event_listener(_count_cache_hits)


def xla_dump_flags(dump_dir: pathlib.Path) -> str:
  """XLA flags that dump PTX and LLVM IR of the candidate's modules only.

  XLA (jaxlib 0.11.2) writes a module's LLVM IR and PTX only for the emitters that
  `--xla_dump_emitter_re` names, "llvm" and "ptx" (scripts/ptx_dump_probe.py on the H200,
  2026-12-02: without it no `.ptx` at all). The value is anchored: XLA matches it anywhere in a
  name, and "triton-to-llvm" is the emitter that snapshots the Triton kernel's MLIR after
  every pass; a compile that hangs in those passes wrote 3 GB of them in a minute on the H200
  (15 such compiles at once filled its 64 GB disk mid-run), and nothing reads them."""
  return (f"--xla_dump_to={dump_dir} --xla_gpu_dump_llvmir --xla_dump_emitter_re={EMITTERS} "
          f"--xla_dump_hlo_module_re=.*{ENTRY_NAME}.*")


def dump_environment(dump_dir: pathlib.Path, xla_flags: str = "") -> dict[str, str]:
  """The environment a judge or compile-stage process sets before importing jax so that each
  compile leaves its PTX: XLA's in `dump_dir` (the Triton kernels and XLA's own glue), and
  Mosaic GPU's. A Mosaic GPU kernel is compiled by its custom call, not by XLA's pipeline, so
  XLA's dump lacks it (release 4's 18 Mosaic GPU records held only XLA's transpose PTX);
  MOSAIC_GPU_DUMP_PTX makes Mosaic GPU print each kernel's PTX on the process' stdout, which
  `_compile_once` sends into the dump folder while it compiles (MOSAIC_PTX).

  Never MOSAIC_GPU_DUMP_TO: in jaxlib 0.11.2 it turns on every Mosaic GPU dump (the whole
  module printed before and after each of its ~35 passes, the SASS through a /tmp folder no one
  removes) and names the files after the module's own attributes, which a candidate writes
  (red team round 9)."""
  dump_dir.mkdir(parents=True, exist_ok=True)
  return {"XLA_FLAGS": f"{xla_flags} {xla_dump_flags(dump_dir)}".strip(),
          "MOSAIC_GPU_DUMP_PTX": "1"}


MOSAIC_PTX: Final = "mosaic-gpu-stdout.txt"  # in the dump folder: what a compile printed
MAX_PRINTED_BYTES: Final = 64 << 20


@contextlib.contextmanager
def _stdout_into(path: pathlib.Path | None) -> Iterator[None]:
  """This process' file descriptor 1 sent to `path` while inside (None, or no descriptor 1 to
  send: left as it is), the C library's buffers flushed at both ends (Mosaic GPU prints
  through std::cout)."""
  try:
    saved = os.dup(1) if path is not None else None
  except OSError:  # a process started with descriptor 1 closed: nothing to capture
    saved = None
  if saved is None:
    yield
    return
  libc = ctypes.CDLL(None)
  sys.stdout.flush()
  libc.fflush(None)
  try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
      os.dup2(fd, 1)
    finally:
      os.close(fd)
    yield
  finally:
    sys.stdout.flush()
    libc.fflush(None)
    os.dup2(saved, 1)
    os.close(saved)


def _printed(path: pathlib.Path) -> tuple[str, ...]:
  """What a compile printed (Mosaic GPU's PTX), at most MAX_PRINTED_BYTES; () if nothing."""
  if not path.is_file():
    return ()
  with path.open("rb") as f:
    text = f.read(MAX_PRINTED_BYTES).decode(errors="replace").strip()
  return (text,) if text else ()


# What XLA's dump holds as a compile of the candidate's module goes on (file name endings,
# in the order XLA writes them), and the step that follows each.
_DUMP_STEPS: Final = (
    ("before_optimizations.txt", "the HLO before optimization", "in XLA's HLO passes"),
    ("after_optimizations.txt", "the optimized HLO",
     "generating code: XLA's emitters or the Triton kernel's MLIR passes"),
    ("ir-no-opt.ll", "the LLVM IR", "in LLVM's optimization passes"),
    ("ir-with-opt.ll", "the optimized LLVM IR", "in LLVM's PTX backend"),
    (".ptx", "the PTX", "in ptxas (PTX to GPU code) or after it"))


def compile_progress(dump_dir: pathlib.Path) -> str | None:
  """How far a killed compile had got, from the files its XLA dump folder holds: what XLA
  had written and so the step it was in; None when the folder is missing."""
  if not dump_dir.is_dir():
    return None
  names = [p.name for p in dump_dir.iterdir()]
  written = [(what, step) for end, what, step in _DUMP_STEPS
             if any(n.endswith(end) for n in names)]
  if not written:
    return "XLA had written nothing yet: it hung loading the module or in its first passes"
  return (f"XLA had written {', '.join(what for what, _ in written)}: it hung "
          f"{written[-1][1]}")


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
                     dump_dir: pathlib.Path | None, *, ptx_past_cache: bool = True
                     ) -> CompiledArtifact:
  """Lowers and compiles the artifact for this process's device; raises what XLA raises. The
  PTX is what this compile dumped (the folder is emptied before and after).

  A compile the persistent cache serves dumps nothing: one program judged twice (an integer
  task's kernel is the same program at float32 and bfloat16) then has PTX only where it was
  compiled first (release 6 run 1: 14 bfloat16 one_hot and nucleotide_onehot records without
  it). So with `ptx_past_cache`, where a dump folder is set, such a compile is done once more
  past the cache, for its PTX alone; the executable and the time are the cached compile's.
  A judge whose compile stage already brought the PTX passes False: its own compile is always
  a cache hit, and compiling again would double its compile work."""
  compiled = _compile_once(exported, structs, dump_dir)
  if compiled.cache_hit and not compiled.ptx and ptx_past_cache and dump_dir is not None:
    with _past_the_cache():
      compiled = dataclasses.replace(compiled,
                                     ptx=_compile_once(exported, structs, dump_dir).ptx)
  return compiled


@contextlib.contextmanager
def _past_the_cache() -> Iterator[None]:
  """The persistent cache off for the compiles inside. jax decides once per process whether
  it uses the cache (and keeps the answer), so the config switch alone changes nothing once a
  compile has used it: the cache is reset with the switch off, and reset again after, so the
  next compile opens it anew from `jax_compilation_cache_dir`."""
  with jax_config.enable_compilation_cache(False):
    reset_cache()
    try:
      yield
    finally:
      reset_cache()


def _compile_once(exported: jax.export.Exported, structs: Sequence[jax.ShapeDtypeStruct],
                  dump_dir: pathlib.Path | None) -> CompiledArtifact:
  """One compile: its executable, seconds, the PTX it dumped and whether the persistent cache
  served it."""
  _clear(dump_dir)
  hits = _cache_hits[0]
  dumped = dump_dir is not None and dump_dir.is_dir()
  t0 = time.perf_counter()
  try:
    with _stdout_into(dump_dir / MOSAIC_PTX if dumped else None):
      compiled = jax.jit(_named_entry(exported)).trace(*structs).lower().compile()
    compile_s = time.perf_counter() - t0
    ptx = (tuple(p.read_text(errors="replace") for p in sorted(dump_dir.glob("*.ptx")))
           + _printed(dump_dir / MOSAIC_PTX)) if dumped else ()
  finally:
    _clear(dump_dir)
  return CompiledArtifact(executable=compiled, compile_s=compile_s, ptx=ptx,
                          cache_hit=_cache_hits[0] > hits)
