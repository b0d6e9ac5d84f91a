"""The records the evaluator writes and the dataset's row types, with their `datasets.Features`.

Frozen dataclasses are the single source of truth: JSON (de)serialisation and the
`datasets.Features` of every config are derived from their type hints, so a field added
here reaches the JSON Lines, the Parquet files and the card without a second list.
`FEATURES`, `SUMMARY_FEATURES`, `ARTIFACT_FEATURES` and `CANDIDATE_FEATURES` import
`datasets` lazily: the measuring side (the GPU machine has no `datasets`) never touches them.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, Final


# Marks the fields that only a population run sets (a candidate's identity). The `runs` and
# `artifacts` configs hold the suite's evaluations, so they leave these columns out: a suite
# build has the same columns whether or not the schema knows about populations.
POPULATION_ONLY: Final = types.MappingProxyType({"population_only": True})

# A run folder's files, as the suite writes them and the builder reads them.
MANIFEST_FILE: Final = "manifest.json"
RECORDS_FILE: Final = "records.jsonl"     # one EvalRecord a line
ARTIFACTS_FILE: Final = "artifacts.jsonl"  # one Artifacts a line


class Status(enum.StrEnum):
  PASS = "pass"            # correct and robust
  INCORRECT = "incorrect"  # ran, but the output is wrong
  REJECTED = "rejected"    # not a real Pallas kernel for this task (anti-gaming filters)
  ERROR = "error"          # failed to load, lower, compile or run
  TIMEOUT = "timeout"      # exceeded the wall-clock limit


class ErrorType(enum.StrEnum):
  LOAD = "load_error"              # syntax error, missing `kernel`, bad import
  TRACE = "trace_error"            # the kernel's Python raised while being traced (e.g. a shape check)
  LOWERING = "lowering_error"      # lowering to the backend (Triton, Mosaic) failed
  COMPILE = "compile_error"        # the backend compiler (Triton, ptxas) failed
  RUNTIME = "runtime_error"        # raised while running
  OUTPUT = "output_error"          # wrong output shape, dtype or structure
  OUT_OF_MEMORY = "out_of_memory"  # RESOURCE_EXHAUSTED or the memory limit
  CRASH = "crash"                  # the child process died (segfault, abort)
  TIMEOUT = "timeout"
  HARNESS = "harness_error"        # the evaluator itself failed: a bug to report


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FilterResult:
  """One robustness filter: passed, the measured value, its threshold and a readable detail."""
  name: str
  passed: bool
  value: float | None
  threshold: float | None
  detail: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PallasCallInfo:
  """One pallas_call of a kernel, read from its jaxpr."""
  name: str
  grid: tuple[int, ...]
  block_shapes: tuple[str, ...]  # one per operand, inputs then outputs, e.g. "(8, 1024)"
  num_warps: int | None
  num_stages: int | None
  max_tensor_elements: int       # largest value inside the body (Triton's limit is 2^20)
  interpret: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompileProfile:
  """Cold compile stages (fresh jit, no persistent cache) and IR sizes.

  Since judge version 2, trace_s and lower_s are reported by the untrusted exporter
  (`exporter_reported`), and compile_s is measured by the judge on the exported artifact.
  """
  trace_s: float | None
  lower_s: float | None
  compile_s: float | None
  jaxpr_bytes: int | None
  triton_ir_bytes: int | None
  ptx_bytes: int | None
  pallas_calls: tuple[PallasCallInfo, ...]
  lowers_triton: bool | None      # CPU check: lowers to Triton for an abstract H200
  lowers_triton_error: str | None
  lowers_tpu: bool | None         # CPU check: lowers to a Mosaic tpu_custom_call
  lowers_tpu_error: str | None
  exporter_reported: bool = False  # trace_s, lower_s, pallas_calls and IR came from the exporter
  artifact_bytes: int | None = None  # the serialized jax.export artifact the judge ran
  # Compiles the run's compile stage had running when this one ran, itself included (the
  # largest count seen at its start and end); None where the judge compiled it alone.
  concurrent_compiles: int | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Roofline:
  """Achieved rates from the task's analytic counts against ceilings measured in the same run."""
  flops: int
  bytes: int
  achieved_tflops: float | None
  achieved_gbps: float | None
  ceiling_tflops: float | None
  ceiling_gbps: float | None
  frac_compute: float | None
  frac_bandwidth: float | None
  # What the trusted baseline (the jitted reference) reached in the same evaluation, from the
  # same analytic counts: a ceiling is never below it (an honest kernel as fast as XLA passes).
  baseline_tflops: float | None = None
  baseline_gbps: float | None = None
  # Where each ceiling comes from: "measured" (the run's measurement on this GPU),
  # "remeasured" (measured again in this evaluation, the higher kept) or "baseline" (the
  # baseline's rate above both); ceiling_method: how the hardware ceilings were measured.
  ceiling_tflops_source: str | None = None
  ceiling_gbps_source: str | None = None
  ceiling_method: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GpuState:
  """What nvidia-smi said about the judge's GPU just after the ceilings were measured (under
  load): its identity, clocks, performance state and power. A field nvidia-smi did not
  answer is None."""
  uuid: str | None
  sm_clock_mhz: float | None
  max_sm_clock_mhz: float | None
  memory_clock_mhz: float | None
  pstate: str | None           # performance state, P0 (highest) .. P12
  power_draw_w: float | None
  power_limit_w: float | None
  throttle_reasons: str | None  # clocks_event_reasons.active, a bit mask as nvidia-smi prints it


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Environment:
  """Where a record was measured."""
  platform: str                # "gpu" or "cpu"
  device_kind: str             # e.g. "NVIDIA H200"
  hardware: str                # short slug, e.g. "h200", "a100", "cpu"
  compute_capability: str | None
  driver: str | None
  cuda: str | None
  jax: str
  jaxlib: str
  python: str
  git_commit: str | None
  l2_bytes: int | None = None  # the GPU's L2 size as CUDA reports it (else the datasheet's)
  l2_source: str | None = None  # "cuda" (cuDeviceGetAttribute) or "datasheet"
  gpu: GpuState | None = None   # clocks and power state, where nvidia-smi answered


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EvalRecord:
  """One evaluation of one kernel for one task at one size: a row of the `runs` config."""
  task: str
  task_id: int
  level: int
  category: str
  variant: str                 # "tpu" (original), "gpu" (fixed) or "candidate"
  size: str
  input_shapes: tuple[str, ...]
  device: str                  # "gpu" or "cpu"
  interpret: bool
  kernel_sha256: str
  status: Status
  error_type: ErrorType | None
  error: str | None
  reasons: tuple[str, ...]
  correct: bool
  robust: bool
  general_shapes: bool | None  # correct on the task's edge shape too, a Pallas kernel there
  seeds: tuple[int, ...]
  tolerance: str
  rtol: float
  atol: float
  max_rel_l2: float | None
  max_abs_error: float | None
  max_rel_error: float | None
  rel_l2_error: float | None
  filters: tuple[FilterResult, ...]
  compile: CompileProfile | None
  timing_method: str | None    # "cupti" or "wallclock"
  timing_comparable: bool
  timing_iterations: int | None
  timing_input_sets: int | None
  runtime_ms: float | None     # median device time per call, compile excluded
  runtime_iqr_ms: float | None
  runtime_samples_ms: tuple[float, ...]
  baseline_ms: float | None    # the jitted JAX reference, measured the same way
  baseline_iqr_ms: float | None
  baseline_samples_ms: tuple[float, ...]
  speedup: float | None        # baseline_ms / runtime_ms: above 1, the kernel is faster
  roofline: Roofline | None
  environment: Environment
  measured_at: str             # ISO 8601, UTC
  eval_wall_s: float
  judge_version: str = "1"     # 1: in-process evaluator (release 1); 2: exporter + sealed judge
  edge_error: str | None = None  # why the edge-shape check failed (general_shapes False)
  timed_outputs_checked: int | None = None  # timed calls whose outputs were compared
  sandbox: tuple[str, ...] = ()  # the exporter's sandbox layers in force
  exporter_output: str | None = None  # what the candidate printed while exported (truncated)
  # The reference run op by op, without jit (each jnp call dispatched on its own, like
  # PyTorch's eager mode), timed the same way; speedup_eager = eager_baseline_ms / runtime_ms.
  eager_baseline_ms: float | None = None
  eager_baseline_iqr_ms: float | None = None
  eager_baseline_samples_ms: tuple[float, ...] = ()
  speedup_eager: float | None = None
  # A candidate timed on a GPU: the task's shipped kernel (kernels_gpu/), timed interleaved
  # with it and the baseline on sets of its own; speedup_shipped = shipped_ms / runtime_ms.
  # The reward pays the speedup over the faster of the two references.
  shipped_ms: float | None = None
  shipped_iqr_ms: float | None = None
  shipped_samples_ms: tuple[float, ...] = ()
  speedup_shipped: float | None = None
  # Bytes XLA moves per call to fill buffers the program then updates in place (a constant or an
  # argument aliased to a kernel's result: module_analysis' prefilled_bytes), by device copies
  # and memsets that the CUPTI kernel timer never sees; on a GPU each runtime sample includes
  # untimed_copy_ms, those bytes at the run's measured copy rate.
  prefilled_bytes: int | None = None
  untimed_copy_ms: float | None = None
  run: RunInfo | None = None   # how the record was produced (release 2 on): command, GPU, ceilings
  # The Pallas backends of the kernel calls in the exported module the judge read ("triton",
  # "mosaic_gpu"), and the config a tunable kernel declared for this size (its config_for, as
  # JSON; the kernel's own word, not checked).
  backends: tuple[str, ...] = ()
  kernel_config: str | None = None
  stages: StageTimes | None = None  # where the evaluation's time went
  # The bytes the timing's input rotation cycles through (sets x the bytes a call reads), and
  # whether they fit in the L2 (environment.l2_bytes): then the inputs could stay in L2
  # between calls and the timing may be flattered. None in records that do not name them.
  timing_rotated_bytes: int | None = None
  timing_l2_resident: bool | None = None
  # The tolerance rule (tolerance.py): what `atol` is a fraction of ("reference_rms": the RMS
  # of the reference output; "absolute" in records that do not name it), and the absolute
  # tolerance the nominal comparisons applied (the largest over the seeds). `input_families`
  # names the task's families beyond the nominal draw that correctness was also checked on.
  atol_scale: str = "absolute"
  atol_used: float | None = None
  input_families: tuple[str, ...] = ()
  # The precision the task was posed at (precision.PRECISIONS): the dtype of its floating
  # inputs. Records that do not name it are float32.
  precision: str = "float32"
  # Population runs only (variant "candidate"): the candidate's id, and whether its verdict
  # was reused from the verdict cache (an earlier evaluation of the same source) instead of
  # measured in this run; `run` then names the run that measured it.
  candidate: str | None = dataclasses.field(default=None, metadata=POPULATION_ONLY)
  cached: bool = dataclasses.field(default=False, metadata=POPULATION_ONLY)
  # Candidates only: the shipped kernels ("kernels_gpu/relu.py") whose lowered kernels the
  # candidate's match, names and locations aside (judge/fingerprint.py): a copy, not its work.
  copy_of: tuple[str, ...] = dataclasses.field(default=(), metadata=POPULATION_ONLY)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunIdentity:
  """The run a judge's records belong to, as the driver names it: a judge adds the ceilings
  it measured and puts the whole on every record it builds (`Ceilings.run_info`)."""
  command: str                 # the command that produced the run
  run_id: str                  # the run folder's name
  gpu_index: int | None        # CUDA device index of the judge's GPU (None on CPU)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
  """The run a record belongs to, repeated on every record so that a row stands on its own."""
  command: str                 # the command that produced the run
  run_id: str                  # the run folder's name
  gpu_index: int | None        # CUDA device index of the judge that measured it (None on CPU)
  ceiling_copy_gbps: float | None  # the ceilings measured in this run, on this GPU
  ceiling_read_gbps: float | None
  ceiling_matmul_tflops: float | None  # float32 (TF32)
  ceiling_method: str | None = None  # how those ceilings were measured
  ceiling_matmul_bf16_tflops: float | None = None  # bfloat16 (runs from release 6 on)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StageTimes:
  """Wall seconds per pipeline stage of one evaluation (each in its own process)."""
  export_s: float | None       # the sandboxed exporter: import, trace, lower, serialize
  compile_s: float | None      # the compile stage: the artifacts compiled into the shared cache
  judge_s: float | None        # the judge on the device: load, correctness, timing
  compile_cache_hit: bool | None  # the judge found the compile stage's executable in the cache
  checks_s: float | None = None   # of judge_s: the candidate's runs, references, comparisons
  timing_s: float | None = None   # of judge_s: timing kernel and jitted baseline
  eager_s: float | None = None    # of judge_s: timing the eager baseline


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Artifacts:
  """The heavy IR of one evaluation: a row of the `artifacts` config."""
  task: str
  variant: str
  size: str
  jaxpr: str | None
  stablehlo: str | None
  triton_ir: str | None
  ptx: str | None
  # The precision of the evaluation whose IR this is (its record's); lines that do not name it
  # are float32.
  precision: str = "float32"
  candidate: str | None = dataclasses.field(default=None, metadata=POPULATION_ONLY)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunRow(EvalRecord):
  """A row of the `runs` config: a record of any run given to the build, with the run."""
  run_name: str   # the run folder the record was read from, published as results/<run_name>/
  primary: bool   # the record the default config and the card's tables use (the first run
                  # given to the build that measured its task, variant and size)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRow(Artifacts):
  """A row of the `artifacts` config: the IR of one record of `runs` (same run_name)."""
  run_name: str
  primary: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRow:
  """A row of the default config: one task at the headline size, a superset of the public schema.

  Two baselines, as the public archive has them (PyTorch eager / torch.compile there): the
  reference jitted (`JAX_Baseline_Runtime`, the public `JAX_XLA_Compiled_Runtime`) and run op
  by op without jit (`JAX_Native_Runtime`). Every speedup is baseline / kernel: above 1, the
  kernel is faster. Eager columns are null for records measured before the eager baseline.
  """
  Op_Name: str
  Level_ID: int
  Task_ID: int
  Kernel_Name: str                    # <task>_gpu_fixed, as in the public rows
  Category: str
  Pallas_Runtime: float | None        # ms, the GPU-fixed kernel, compile excluded
  JAX_Baseline_Runtime: float | None  # ms, the jitted reference
  JAX_Native_Runtime: float | None    # ms, the reference op by op (eager), no jit
  Pallas_Speedup: float | None        # = Pallas_Speedup_Compiled (the public column's name)
  Pallas_Speedup_Native: float | None    # JAX_Native_Runtime / Pallas_Runtime
  Pallas_Speedup_Compiled: float | None  # JAX_Baseline_Runtime / Pallas_Runtime
  Pallas_Code: str                    # kernels_gpu/<task>.py
  Pallas_Code_Original: str           # kernels_tpu/<task>.py
  JAX_Baseline_Code: str              # the reference module, as the registry holds it
  JAX_Code_Functional: str            # the reference plus get_inputs(): runs on its own
  Correct: bool
  Error: str | None
  Target_Hardware: str
  Framework: str
  Backend: str
  Fix_Applied: str
  Fix_Reason: str
  Status: str
  Robust: bool
  General_Shapes: bool | None
  Max_Abs_Error: float | None
  Rel_L2_Error: float | None
  Tolerance: str
  Compile_Time_s: float | None
  Roofline_Fraction: float | None
  Timing_Method: str | None
  Timing_L2_Resident: bool | None  # the timed inputs fit in the L2 (could stay there); None: not noted
  Original_Status: str
  Original_Error: str | None
  Original_Runtime: float | None
  Original_Speedup_Native: float | None    # the original kernel against the eager reference
  Original_Speedup_Compiled: float | None  # the original kernel against the jitted reference
  Size: str
  Input_Shapes: tuple[str, ...]
  Corrections: str
  JAX_Version: str
  Measured_At: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CandidateRow:
  """A row of the `candidates` config: one candidate kernel of a population run, its source
  and its verdict. `kind` and `parent` are what the population said about it (a generated
  population: `tuning`, `broken` or `cheat`, and the kernel it was made from); null if nothing."""
  candidate: str               # the candidate's id, unique within its run
  run: str                     # the population run's folder name
  task: str
  task_id: int
  level: int
  size: str
  parent: str | None
  kind: str | None
  source: str                  # the kernel as submitted
  kernel_sha256: str
  status: str
  correct: bool
  speedup: float | None        # baseline_ms / runtime_ms: above 1, the candidate is faster
  speedup_eager: float | None
  # The shipped kernel of the task timed beside the candidate (on a GPU): shipped_ms /
  # runtime_ms. KernelReward pays min(speedup, speedup_shipped).
  speedup_shipped: float | None
  runtime_ms: float | None     # median, compile excluded
  baseline_ms: float | None
  shipped_ms: float | None
  reasons: tuple[str, ...]
  error_type: str | None
  error: str | None
  cached: bool                 # the verdict came from an earlier evaluation of the same source
  device: str                  # "gpu" or "cpu" (interpret mode)
  hardware: str                # the device kind, e.g. "NVIDIA H200"
  timing_comparable: bool
  judge_version: str
  measured_at: str



@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Message:
  """One chat message, as TRL's conversational dataset formats hold them."""
  role: str     # "user" or "assistant"
  content: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SftRow:
  """A row of the `sft` config (TRL's conversational prompt-completion type): the task as a
  user states it, and a fixed kernel that passed the judge as the assistant's answer."""
  prompt: tuple[Message, ...]      # one user message
  completion: tuple[Message, ...]  # one assistant message: the kernel in a fenced python block
  task: str
  task_id: int
  level: int
  category: str
  prompt_kind: str                 # "write" (the registry) or "fix" (the original and its fate)
  kernel: str                      # the completion's file, e.g. "kernels_gpu/relu.py"
  kernel_sha256: str
  status: str                      # the completion's verdict at `size` on `hardware`: always pass
  speedup: float | None
  size: str
  hardware: str
  timing_comparable: bool
  original_status: str | None      # the original TPU kernel's verdict there (the "fix" context)
  original_speedup: float | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PreferenceRow:
  """A row of the `preference` config (TRL's conversational preference type): two judged
  kernels for one task, size and machine; `chosen` passed, `rejected` did not, or passed and
  was slower by the build's margin."""
  prompt: tuple[Message, ...]
  chosen: tuple[Message, ...]
  rejected: tuple[Message, ...]
  task: str
  task_id: int
  level: int
  pair_kind: str                   # "release" (fixed vs original kernel) or "population"
  size: str
  hardware: str
  timing_comparable: bool
  chosen_kernel: str               # "kernels_gpu/relu.py", or "<run>/<candidate id>"
  rejected_kernel: str
  chosen_sha256: str
  rejected_sha256: str
  chosen_status: str
  rejected_status: str
  chosen_speedup: float | None
  rejected_speedup: float | None

# ---------------------------------------------------------------------------------------------
# JSON round trip, strict in both directions.

def text(value: str) -> str:
  """`value` as text every UTF-8 writer accepts: a character UTF-8 cannot encode (a lone
  surrogate, which a JSON escape such as `\\ud800` carries from a candidate's exception) as its
  escape, readable and never an error (red team round 15: one such character in one record's
  error stopped the whole build at pyarrow)."""
  try:
    value.encode("utf-8")
  except UnicodeEncodeError:
    return value.encode("utf-8", "backslashreplace").decode("utf-8")
  return value


def textual(value: Any) -> Any:
  """A JSON value (objects, lists, strings, scalars) with every string and key made `text`: what
  a walled process answered, read at the trust boundary."""
  if isinstance(value, str):
    return text(value)
  if isinstance(value, dict):
    return {textual(k): textual(v) for k, v in value.items()}
  if isinstance(value, list):
    return [textual(v) for v in value]
  return value


def to_json_dict(obj: Any) -> Any:
  """A record as plain JSON values (enums to strings, tuples to lists, strings `text`)."""
  if dataclasses.is_dataclass(obj):
    return {f.name: to_json_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
  if isinstance(obj, enum.Enum):
    return obj.value
  if isinstance(obj, (tuple, list)):
    return [to_json_dict(v) for v in obj]
  if isinstance(obj, str):
    return text(obj)
  return obj


def from_json_dict(cls: type, data: dict[str, Any]) -> Any:
  """Rebuilds a record; unknown keys, missing keys without a default (fields added later have
  one, so older records still load) and wrong types raise ValueError."""
  hints = _hints(cls)
  fields = dataclasses.fields(cls)
  names = {f.name for f in fields}
  required = {f.name for f in fields
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
  if not required <= set(data) <= names:
    extra, missing = sorted(set(data) - names), sorted(required - set(data))
    raise ValueError(f"{cls.__name__}: unknown keys {extra}, missing keys {missing}")
  return cls(**{k: _convert(hints[k], v, f"{cls.__name__}.{k}") for k, v in data.items()})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
  return typing.get_type_hints(cls)


def _convert(tp: Any, value: Any, where: str) -> Any:
  origin, args = typing.get_origin(tp), typing.get_args(tp)
  if origin in (types.UnionType, typing.Union):
    if value is None:
      if type(None) in args:
        return None
      raise ValueError(f"{where}: None is not allowed")
    (inner,) = [a for a in args if a is not type(None)]
    return _convert(inner, value, where)
  if value is None:
    raise ValueError(f"{where}: None is not allowed")
  if origin is tuple:
    if not isinstance(value, (list, tuple)):
      raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
    return tuple(_convert(args[0], v, f"{where}[]") for v in value)
  if dataclasses.is_dataclass(tp):
    if not isinstance(value, dict):
      raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    return from_json_dict(tp, value)
  if isinstance(tp, type) and issubclass(tp, enum.Enum):
    return tp(value)
  if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
    return float(value)
  if tp in (int, str, bool) and type(value) is tp:
    return value
  raise ValueError(f"{where}: expected {getattr(tp, '__name__', tp)}, got {value!r}")


# ---------------------------------------------------------------------------------------------
# datasets.Features, derived from the dataclasses (imports `datasets` on first use).

def _config_fields(cls: type) -> list[dataclasses.Field]:
  return [f for f in dataclasses.fields(cls)
          if not f.metadata.get("population_only")]


def features_of(cls: type):
  """The `datasets.Features` of a row dataclass (str -> string, int -> int64, and so on),
  without the population-only fields."""
  import datasets  # pylint: disable=import-outside-toplevel
  return datasets.Features({f.name: _feature(_hints(cls)[f.name]) for f in _config_fields(cls)})


def config_row(obj: Any) -> dict[str, Any]:
  """A record as a row of its config: its JSON values less the population-only fields."""
  row = to_json_dict(obj)
  return {f.name: row[f.name] for f in _config_fields(type(obj))}


def _feature(tp: Any):
  import datasets  # pylint: disable=import-outside-toplevel
  origin, args = typing.get_origin(tp), typing.get_args(tp)
  if origin in (types.UnionType, typing.Union):
    (inner,) = [a for a in args if a is not type(None)]
    return _feature(inner)
  if origin is tuple:
    return datasets.List(_feature(args[0]))
  if dataclasses.is_dataclass(tp):
    return {f.name: _feature(_hints(tp)[f.name]) for f in dataclasses.fields(tp)}
  if isinstance(tp, type) and issubclass(tp, enum.Enum):
    return datasets.Value("string")
  scalar = {str: "string", int: "int64", float: "float64", bool: "bool"}
  return datasets.Value(scalar[tp])


_LAZY_FEATURES: Final = {
    "FEATURES": EvalRecord, "SUMMARY_FEATURES": SummaryRow, "ARTIFACT_FEATURES": Artifacts,
    "CANDIDATE_FEATURES": CandidateRow, "SFT_FEATURES": SftRow,
    "PREFERENCE_FEATURES": PreferenceRow}


def __getattr__(name: str):
  if name in _LAZY_FEATURES:
    return features_of(_LAZY_FEATURES[name])
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
