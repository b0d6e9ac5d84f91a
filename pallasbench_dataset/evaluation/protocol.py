"""What crosses the wall between the exporter (untrusted) and the judge (trusted).

The exporter is told a task, a kernel source and the sizes to export; it answers with one
JSON document on the sandbox's result pipe. Everything in it is the candidate's word: this
module parses it strictly (types, sizes, known keys), and the judge uses only the artifact
bytes as evidence. The exporter's own reports (trace and lower times, the jaxpr, Triton
IR, a TPU lowering check) are kept as information and may only add rejections, never
remove one.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from pallasbench_dataset.precision import DEFAULT_PRECISION
from pallasbench_dataset.schema import textual

MAX_RESULT_BYTES: Final = 256 << 20
MAX_ARTIFACT_BYTES: Final = 64 << 20
MAX_TEXT_CHARS: Final = 4 << 20
MAX_CONFIG_KEYS: Final = 32
MAX_CONFIG_CHARS: Final = 64
# The answer's structure, bounded before json builds it: an honest answer nests five deep
# (answer, exports, an export, its artifacts, an artifact) and holds a few hundred values.
MAX_DEPTH: Final = 16
MAX_VALUES: Final = 1 << 16
PLATFORMS: Final = ("cuda", "cpu", "tpu")


InputStruct = tuple[tuple[int, ...], str]  # an input's shape and dtype name


class ProtocolError(ValueError):
  """The exporter's answer is malformed: the candidate is rejected, nothing in it is used."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExportRequest:
  """The driver's request: which kernel, which task, and for each size the platforms and the
  task's inputs there. The driver reads the inputs from the registry: the exporter cannot (a
  precision's dtypes come from the references, which it may not read)."""
  task: str
  source: str
  filename: str
  exports: tuple[tuple[str, tuple[str, ...]], ...]  # (size, platforms); the first is evaluated
  reports: bool = True              # also jaxpr, Triton IR and the TPU lowering check
  precision: str = DEFAULT_PRECISION  # the task's precision: the dtypes traced
  inputs: tuple[tuple[str, tuple[InputStruct, ...]], ...] = ()  # (size, the inputs there)

  def platforms(self, size: str) -> tuple[str, ...]:
    return dict(self.exports).get(size, ())

  def input_structs(self, size: str) -> tuple[InputStruct, ...]:
    """The task's inputs at `size`, (shape, dtype) each; KeyError for a size not requested."""
    return dict(self.inputs)[size]

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self))

  @classmethod
  def from_json(cls, text: str) -> ExportRequest:
    data = json.loads(text)
    return cls(task=data["task"], source=data["source"], filename=data["filename"],
               exports=tuple((s, tuple(p)) for s, p in data["exports"]),
               reports=bool(data["reports"]),
               precision=data.get("precision", DEFAULT_PRECISION),
               inputs=tuple((s, tuple((tuple(shape), dtype) for shape, dtype in structs))
                            for s, structs in data.get("inputs", ())))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SizeExport:
  """One size's exports: serialized `jax.export` artifacts by platform, or the failure."""
  size: str
  artifacts: Mapping[str, bytes]    # platform -> serialized Exported
  errors: Mapping[str, str]         # platform -> why that export failed
  stage: str | None                 # of the first failure: trace, lowering, export
  trace_s: float | None             # reported by the exporter
  lower_s: float | None
  config: Mapping[str, Any] | None = None  # what a tunable kernel says it runs with (config_for)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExportReport:
  """The exporter's answer, parsed."""
  load_error: str | None
  exports: tuple[SizeExport, ...]
  jaxpr: str | None
  pallas_calls: tuple[dict, ...]    # PallasCallInfo fields, as the exporter read its jaxpr
  input_writes: tuple[str, ...]     # kernels writing input refs, as the exporter read them
  triton_ir: tuple[str, ...]
  lowers_tpu: bool | None
  tpu_error: str | None

  def size(self, size: str) -> SizeExport | None:
    return next((e for e in self.exports if e.size == size), None)


def _get(data: Mapping, key: str, kind: type | tuple[type, ...], *, optional: bool = False):
  value = data.get(key)
  if value is None and optional:
    return None
  if not isinstance(value, kind) or isinstance(value, bool) and kind in (int, float, (int, float)):
    raise ProtocolError(f"field {key!r}: expected {kind}, got {type(value).__name__}")
  if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
    raise ProtocolError(f"field {key!r}: {len(value)} characters (limit {MAX_TEXT_CHARS})")
  return value


def _seconds(data: Mapping, key: str) -> float | None:
  """A duration the exporter reports: a finite number of seconds, not negative (JSON's NaN
  and Infinity parse as floats), or None."""
  value = _get(data, key, (int, float), optional=True)
  if value is not None and not (math.isfinite(value) and value >= 0):
    raise ProtocolError(f"field {key!r}: {value!r} is not a duration in seconds")
  return None if value is None else float(value)


def _strings(values: Any, key: str) -> tuple[str, ...]:
  if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
    raise ProtocolError(f"field {key!r}: expected a list of strings")
  if sum(map(len, values)) > MAX_TEXT_CHARS:
    raise ProtocolError(f"field {key!r}: more than {MAX_TEXT_CHARS} characters")
  return tuple(values)


def _artifact(text: Any, where: str) -> bytes:
  if not isinstance(text, str) or len(text) > MAX_ARTIFACT_BYTES * 4 // 3 + 4:
    raise ProtocolError(f"{where}: not a base64 string within {MAX_ARTIFACT_BYTES} bytes")
  try:
    return base64.b64decode(text.encode("ascii"), validate=True)
  except (binascii.Error, UnicodeEncodeError) as e:
    raise ProtocolError(f"{where}: invalid base64 ({e})") from None


def _config(data: Mapping) -> Mapping[str, Any] | None:
  """A declared config: at most MAX_CONFIG_KEYS names, each a number, a bool or a short string."""
  config = _get(data, "config", dict, optional=True)
  if config is None:
    return None
  if len(config) > MAX_CONFIG_KEYS or not all(
      isinstance(k, str) and len(k) <= MAX_CONFIG_CHARS and (
          isinstance(v, (bool, int)) or isinstance(v, float) and math.isfinite(v)
          or isinstance(v, str) and len(v) <= MAX_CONFIG_CHARS)
      for k, v in config.items()):
    raise ProtocolError(f"field 'config': expected at most {MAX_CONFIG_KEYS} names with finite "
                        f"number, bool or string values of at most {MAX_CONFIG_CHARS} characters")
  return dict(sorted(config.items()))


def _size_export(data: Any, request: ExportRequest) -> SizeExport:
  if not isinstance(data, dict):
    raise ProtocolError("an export entry is not an object")
  size = _get(data, "size", str)
  platforms = request.platforms(size)
  if not platforms:
    raise ProtocolError(f"export for size {size!r}, which was not requested")
  artifacts, errors = _get(data, "artifacts", dict), _get(data, "errors", dict)
  if not set(artifacts) | set(errors) <= set(platforms):
    raise ProtocolError(f"exports for platforms {sorted(set(artifacts) | set(errors))}, "
                        f"requested {list(platforms)}")
  stage = _get(data, "stage", str, optional=True)
  if stage not in (None, "trace", "lowering", "export"):
    raise ProtocolError(f"unknown stage {stage!r}")
  return SizeExport(
      size=size, stage=stage, trace_s=_seconds(data, "trace_s"), lower_s=_seconds(data, "lower_s"),
      artifacts={p: _artifact(b, f"artifact {size}/{p}") for p, b in sorted(artifacts.items())},
      errors={p: _get(errors, p, str) for p in sorted(errors)}, config=_config(data))


_JSON_STRING: Final = re.compile(r'"[^"]*"')
_BRACKETS: Final = re.compile(r"[\[\]{}]")


def _bound_structure(text: str) -> None:
  """Refuses an answer whose parse would cost more than its bytes: deeper than MAX_DEPTH (json's
  C scanner recurses per level) or of more than MAX_VALUES containers and elements (each a
  Python object, tens of bytes for the two or three characters of `{},`). Linear in time and a
  few copies of the text in memory, whatever it holds: the escaped backslashes are dropped,
  then the escaped quotes, so every `"` left opens or closes a string (json's own reading of
  them), the strings are blanked by a pattern that cannot backtrack (a class of one character,
  repeated), and commas and brackets are counted."""
  bare = _JSON_STRING.sub('""', text.replace("\\\\", "").replace('\\"', ""))
  values = bare.count(",") + bare.count("[") + bare.count("{")
  if values > MAX_VALUES:
    raise ProtocolError(f"the exporter's answer holds more than {MAX_VALUES} values")
  depth = 0
  for bracket in _BRACKETS.finditer(bare):
    depth += 1 if bracket.group() in "[{" else -1
    if depth > MAX_DEPTH:
      raise ProtocolError(f"the exporter's answer nests deeper than {MAX_DEPTH} levels")


def decode(raw: bytes, request: ExportRequest) -> ExportReport:
  """Parses the exporter's answer for `request`; raises ProtocolError for anything off."""
  if len(raw) > MAX_RESULT_BYTES:
    raise ProtocolError(f"the exporter's answer is {len(raw)} bytes (limit {MAX_RESULT_BYTES})")
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ProtocolError(f"the exporter's answer is not JSON (not UTF-8: {e})") from None
  _bound_structure(text)
  try:
    data = textual(json.loads(text))  # a JSON escape can hold what UTF-8 cannot: made text here
  except (ValueError, RecursionError) as e:  # JSONDecodeError; RecursionError past the bound
    raise ProtocolError(f"the exporter's answer is not JSON ({e})") from None
  if not isinstance(data, dict):
    raise ProtocolError("the exporter's answer is not a JSON object")
  exports = _get(data, "exports", list)
  parsed = tuple(_size_export(e, request) for e in exports)
  if len({e.size for e in parsed}) != len(parsed):
    raise ProtocolError("two exports for one size")
  calls = _get(data, "pallas_calls", list)
  if not all(isinstance(c, dict) for c in calls):
    raise ProtocolError("field 'pallas_calls': expected a list of objects")
  return ExportReport(
      load_error=_get(data, "load_error", str, optional=True), exports=parsed,
      jaxpr=_get(data, "jaxpr", str, optional=True), pallas_calls=tuple(calls),
      input_writes=_strings(data.get("input_writes", []), "input_writes"),
      triton_ir=_strings(data.get("triton_ir", []), "triton_ir"),
      lowers_tpu=data.get("lowers_tpu") if isinstance(data.get("lowers_tpu"), bool) else None,
      tpu_error=_get(data, "tpu_error", str, optional=True))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExportOutcome:
  """What the driver saw of one sandboxed export: the parsed answer, or why there is none."""
  report: ExportReport | None
  failure: str | None           # "over_budget", "timeout", "violation", "memory", "crash",
                                # "malformed" or "unavailable" (no sandbox here: nothing ran)
  message: str | None           # the failure's explanation
  output: str                   # what the exporter printed (stdout, then stderr), truncated
  layers: tuple[str, ...]       # the sandbox layers in force
  wall_s: float
