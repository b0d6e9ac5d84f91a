"""The exporter: the one program that imports candidate code. Untrusted, sandboxed, CPU only.

    python -m pallasbench_dataset.evaluation.exporter.program < request.json

Started by the driver through the sandbox (whose walls are up before this module is even
imported), it reads an `ExportRequest` on stdin, starts jax, arms the sandbox's tripwire,
imports the candidate, traces it at the requested shapes and writes its answer to the
sandbox's result pipe (it can write no file): for each size, `jax.export` artifacts (bytes)
per platform, or why the export failed. Exports for "cuda" target an
abstract H200 from this CPU host, so candidate Python never runs where a GPU is visible.
The judge treats everything written here as the candidate's word (see protocol.py).
"""

from __future__ import annotations

import functools
import os
import pathlib
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

def _declared_config(module, structs) -> dict[str, Any] | None:
  """What a tunable kernel says it runs with on the abstract H200 (its `config_for`), or None.
  Informational only: the record shows it, the judge trusts only the exported module."""
  from pallasbench_dataset.lowering import abstract_gpu  # pylint: disable=import-outside-toplevel
  config_for = getattr(module, "config_for", None)
  if not callable(config_for):
    return None
  try:
    with abstract_gpu():
      config = dict(config_for(*structs))
  except Exception:  # pylint: disable=broad-except  (the candidate's function may do anything)
    return None
  return {str(k): v for k, v in config.items() if isinstance(v, (bool, int, float, str))}


def _export_size(kernel: Callable, structs: tuple, size: str, platforms: tuple[str, ...],
                 reports: dict[str, Any], origin: dict[str, str]) -> dict[str, Any]:
  """Artifacts of one size for each platform; the first size also fills `reports`. `origin`
  (the candidate's filename and source) lets an error name the candidate's own frame."""
  from pallasbench_dataset.evaluation.errors import short_error  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.jaxpr_analysis import analyze  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.lowering import (  # pylint: disable=import-outside-toplevel
      abstract_gpu, abstract_tpu, capture_triton_ir, export_for)
  import jax  # pylint: disable=import-outside-toplevel
  entry: dict[str, Any] = {"size": size, "artifacts": {}, "errors": {}, "stage": None,
                           "trace_s": None, "lower_s": None}
  device_platform = next((p for p in platforms if p != "cpu"), None)
  if device_platform is not None:
    stage = "trace"
    try:  # trace and lower once, to time the two stages the exporter sees
      with capture_triton_ir() as triton_ir, (
          abstract_gpu() if device_platform == "cuda" else abstract_tpu()):
        t0 = time.perf_counter()
        traced = jax.jit(functools.partial(kernel, interpret=False)).trace(*structs)
        entry["trace_s"], stage = time.perf_counter() - t0, "lowering"
        t0 = time.perf_counter()
        traced.lower(lowering_platforms=(device_platform,))
        entry["lower_s"] = time.perf_counter() - t0
    except Exception as e:  # the candidate may raise anything; the stage says where
      entry["stage"] = stage
      entry["errors"] = {device_platform: short_error(e, **origin)}
    else:
      if reports is not None and "jaxpr" not in reports:
        report = analyze(traced.jaxpr)
        reports.update(jaxpr=report.text, input_writes=list(report.input_writes),
                       pallas_calls=[_call_json(c) for c in report.pallas_calls],
                       triton_ir=list(triton_ir))
  for platform in platforms:
    if platform in entry["errors"]:
      continue
    fn = functools.partial(kernel, interpret=platform == "cpu")
    try:
      entry["artifacts"][platform] = export_for(platform, fn, *structs).serialize()
    except Exception as e:  # pylint: disable=broad-except
      entry["errors"][platform] = short_error(e, **origin)
      entry["stage"] = entry["stage"] or "export"
  if reports is not None and "tpu" in platforms and "lowers_tpu" not in reports:
    reports["lowers_tpu"] = "tpu" in entry["artifacts"]
    reports["tpu_error"] = entry["errors"].get("tpu")
  return entry


def _call_json(call) -> dict[str, Any]:
  import dataclasses  # pylint: disable=import-outside-toplevel
  return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(call).items()}


def run(request_text: str, scratch: pathlib.Path, report_fd: int) -> dict[str, Any]:
  """Everything the exporter does, in order: nothing of the candidate runs before arm()."""
  warnings.filterwarnings("ignore", message="The Pallas Triton backend is deprecated")
  import jax  # pylint: disable=import-outside-toplevel
  jax.devices()  # backends and plugins initialise now, before the tripwire is armed
  from pallasbench_dataset.evaluation import protocol  # pylint: disable=import-outside-toplevel
  from pallasbench_dataset.kernels import KernelLoadError, load_module  # pylint: disable=import-outside-toplevel
  import pallasbench_dataset.evaluation.errors  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import pallasbench_dataset.jaxpr_analysis  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import pallasbench_dataset.lowering  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  request = protocol.ExportRequest.from_json(request_text)
  from pallasbench_dataset.evaluation.sandbox import tripwire  # pylint: disable=import-outside-toplevel
  tripwire.arm(str(scratch), report_fd)
  reports: dict[str, Any] = {}
  exports: list[dict[str, Any]] = []
  load_error = None
  try:
    module = load_module(request.source, request.filename)
  except KernelLoadError as e:
    load_error = str(e)
  else:
    for size, platforms in request.exports:
      structs = tuple(jax.ShapeDtypeStruct(shape, dtype)
                      for shape, dtype in request.input_structs(size))
      entry = _export_size(module.kernel, structs, size, platforms,
                           reports if request.reports else None,
                           {"filename": request.filename, "source": request.source})
      if "cuda" in platforms:
        entry["config"] = _declared_config(module, structs)
      exports.append(entry)
  return {"load_error": load_error, "exports": exports, "jaxpr": reports.get("jaxpr"),
          "pallas_calls": reports.get("pallas_calls", []),
          "input_writes": reports.get("input_writes", []),
          "triton_ir": reports.get("triton_ir", []), "lowers_tpu": reports.get("lowers_tpu"),
          "tpu_error": reports.get("tpu_error")}


def encode(body: dict[str, Any]) -> bytes:
  """The answer as the result pipe carries it: JSON, the artifacts in base64."""
  import base64  # pylint: disable=import-outside-toplevel
  import json  # pylint: disable=import-outside-toplevel
  for entry in body["exports"]:
    entry["artifacts"] = {p: base64.b64encode(b).decode("ascii")
                          for p, b in entry["artifacts"].items()}
  return json.dumps(body).encode()


def main() -> None:
  """Run by the sandbox's boot (which passes the report and result pipes), never directly."""
  from pallasbench_dataset.evaluation.sandbox import REPORT_FD_ENV, RESULT_FD_ENV  # pylint: disable=import-outside-toplevel
  report_fd, result_fd = int(os.environ[REPORT_FD_ENV]), int(os.environ[RESULT_FD_ENV])
  view = memoryview(encode(run(sys.stdin.read(), pathlib.Path.cwd(), report_fd)))
  while view:
    view = view[os.write(result_fd, view):]
  os.close(result_fd)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)  # a thread the candidate left running must not hold the answer back


if __name__ == "__main__":
  main()
