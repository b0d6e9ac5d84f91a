"""The task registry: the PallasBench tasks as frozen specs (docs/tasks.md is its page).

`list_tasks()` gives them in task-id order, `get_task(name)` one by name. A spec knows its
inputs (names, dtypes, distributions, symbolic shapes), its input families beyond the nominal
draw (the regions where its formula can break: `families`), its registered sizes, its output
shape, tolerance class, analytic FLOP and byte counts, the corrections made to the public
suite (`notes`), and its reference (`references/<name>.py`, the JAX baseline). `info.py`
renders the registry for a reader, `python -m pallasbench_dataset.tasks` (`__main__.py`)
prints it.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import importlib
import importlib.resources
import math
import types
from collections.abc import Callable, Mapping
from typing import Final

import jax
import jax.numpy as jnp
import numpy as np

from pallasbench_dataset.families import (
    Affine, EndIds, InputFamily, MatchedRows, OutOfRangeIds, Rounded, ScaledCopy, SetTo, Spikes,
    Transform, ZeroRows)
from pallasbench_dataset.precision import DEFAULT_PRECISION, FLOAT32, get_precision, tolerance_for
from pallasbench_dataset.inputs import (
    INT32, BinaryMask, Dims, DNACodes, FanInNormal, InputSpec, Integers, Normal, OneHotDNA,
    SoftmaxRows, Uniform)
from pallasbench_dataset.tolerance import Tolerance, ToleranceClass


class Size(enum.StrEnum):
  SMALL = "small"    # CI, interpret mode
  MEDIUM = "medium"  # the headline size of the dataset
  LARGE = "large"    # scaling
  EDGE = "edge"      # dimensions that are not multiples of any block: tests generality


HEADLINE_SIZE: Final = Size.MEDIUM
SIZE_TAGS: Final[Mapping[str, tuple[Size, ...]]] = types.MappingProxyType({
    "ci": (Size.SMALL, Size.EDGE),
    "full": (Size.MEDIUM, Size.LARGE),
})
LEVEL_SPLITS: Final[Mapping[int, str]] = types.MappingProxyType(
    {1: "level_1", 2: "level_2", 3: "level_3"})
# make_input folds an input's index (0 to 7) into the seed's key; a family's draws fold this.
FAMILY_KEY_STREAM: Final = 1 << 16
# How TaskSpec.expected compiles the correctness reference (see there).
REFERENCE_COMPILER_OPTIONS: Final[Mapping[str, int]] = types.MappingProxyType(
    {"xla_gpu_autotune_level": 0})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
  """One task: what the kernel takes, what it must return, and how it is judged."""
  task_id: int
  name: str
  level: int
  category: str
  inputs: tuple[InputSpec, ...]
  output: Callable[[Dims], tuple[int, ...]]
  tolerance_class: ToleranceClass
  sizes: Mapping[Size, Dims]
  flops_per_call: Callable[[Dims], int]
  notes: str
  # For gathers: the bytes a kernel must move, from the dims and the bytes of one floating
  # element (4 at float32, 2 at bfloat16).
  touched_bytes: Callable[[Dims, int], int] | None = None
  output_dtype: str = "float32"
  # Whether a floating output takes the precision's dtype where the inputs do (what the
  # reference returns: pwm_scan accumulates and returns float32). Declared, so that a spec at a
  # precision is made without running the reference (the exporter cannot read the references).
  output_follows_precision: bool = True
  families: tuple[InputFamily, ...] = ()  # inputs beyond the nominal draw, checked like it
  precision: str = DEFAULT_PRECISION      # the dtype of the floating inputs (precision.py)

  @property
  def tolerance(self) -> Tolerance:
    """The task's class at the output's dtype: an output that stays float32 at bfloat16
    (one_hot's, pwm_scan's) is judged as at float32."""
    return tolerance_for(self.tolerance_class, self.output_dtype)

  def at_precision(self, precision: str) -> TaskSpec:
    """This task at `precision` (precision.PRECISIONS), made from its float32 spec (the
    registry's): its floating inputs in that dtype,
    drawn from the same distributions and keys, then rounded (integer inputs unchanged), and
    the output dtype the task declares there; the input families that are well
    conditioned there (InputFamily.precisions). At the task's own precision, the spec itself
    (float32: today's spec, the same inputs bit for bit). The output dtype is the declared one
    (`output_follows_precision`); tests/tasks/test_precisions.py holds it to what the reference
    returns."""
    wanted = get_precision(precision)
    if wanted.name == self.precision:
      return self
    base = self if self.precision == DEFAULT_PRECISION else TASKS[self.name]
    if wanted.seed:
      return base
    inputs = tuple(dataclasses.replace(i, dtype=wanted.dtype) if _floating(i.dtype) else i
                   for i in base.inputs)
    follows = (base.output_follows_precision and _floating(base.output_dtype)
               and any(_floating(i.dtype) for i in base.inputs))
    output_dtype = wanted.dtype if follows else base.output_dtype
    families = tuple(f for f in base.families if precision in f.precisions)
    return dataclasses.replace(base, inputs=inputs, output_dtype=output_dtype,
                               families=families, precision=precision)

  @property
  def split(self) -> str:
    return LEVEL_SPLITS[self.level]

  @property
  def reference(self) -> Callable[..., jax.Array]:
    """The JAX baseline (plain jax.numpy); call it under jax.jit."""
    return importlib.import_module(f"pallasbench_dataset.references.{self.name}").reference

  @property
  def reference_source(self) -> str:
    """The reference's source text: the dataset's JAX_Baseline_Code, runnable on its own."""
    files = importlib.resources.files("pallasbench_dataset.references")
    return files.joinpath(f"{self.name}.py").read_text()

  def dims(self, size: Size | str | Dims) -> Dims:
    """Dimensions of a registered size, or a caller's own mapping (any shape of the family)."""
    if isinstance(size, Mapping):
      return types.MappingProxyType(dict(size))
    try:
      return self.sizes[Size(size)]
    except ValueError:
      raise ValueError(f"unknown size {size!r}; registered sizes: {[s.value for s in Size]}") from None

  def input_shapes(self, size: Size | str | Dims) -> tuple[tuple[int, ...], ...]:
    dims = self.dims(size)
    return tuple(spec.concrete_shape(dims) for spec in self.inputs)

  def input_structs(self, size: Size | str | Dims) -> tuple[jax.ShapeDtypeStruct, ...]:
    """The inputs' shapes and dtypes, for tracing and exporting without arrays."""
    dims = self.dims(size)
    return tuple(jax.ShapeDtypeStruct(i.concrete_shape(dims), i.dtype) for i in self.inputs)

  def output_shape(self, size: Size | str | Dims) -> tuple[int, ...]:
    return self.output(self.dims(size))

  def make_inputs(self, size: Size | str | Dims, seed: int) -> tuple[jax.Array, ...]:
    """Deterministic inputs for (task, size, seed): the same on every backend (threefry)."""
    return tuple(self.make_input(size, seed, i) for i in range(len(self.inputs)))

  def make_input(self, size: Size | str | Dims, seed: int, index: int) -> jax.Array:
    """Input `index` of make_inputs(size, seed), drawn alone."""
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), self.task_id), index)
    return self.inputs[index].sample(key, self.dims(size))

  def family(self, name: str) -> InputFamily:
    """One of `families` by name; a clear error that lists them for an unknown one."""
    for family in self.families:
      if family.name == name:
        return family
    raise KeyError(f"task {self.name} has no input family {name!r}; its families: "
                   f"{[f.name for f in self.families]}")

  def family_inputs(self, family: InputFamily, size: Size | str | Dims,
                    seed: int) -> tuple[jax.Array, ...]:
    """The inputs of `family` for (size, seed): derived from make_inputs(size, seed), with
    the positions a transform picks drawn from a key of the seed's own (FAMILY_KEY_STREAM)."""
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), self.task_id),
                             FAMILY_KEY_STREAM)
    return family.derive(self.make_inputs(size, seed), self.inputs, key, self.dims(size))

  def expected(self, *inputs: jax.Array) -> jax.Array:
    """The correctness reference: the baseline in float64 (floating inputs widened, integer
    inputs as they are), at the highest matmul precision, rounded to the output dtype.

    float64, so that the reference's own rounding takes no share of the tolerance: on a
    shifted family (layernorm of x + 35) a float32 reference errs by half the tolerance.
    Compiled without XLA's GPU autotuner, which only chooses among equally exact algorithms
    and costs 6-14 s per contraction reference on an H200 (benchmarks/check_costs.py). The
    timed baseline is compiled as XLA compiles it by default, autotuned, in float32.
    """
    with jax.enable_x64(True), jax.default_matmul_precision("highest"):
      return _float64_reference(*inputs, reference=self.reference, output_dtype=self.output_dtype)

  def flops(self, size: Size | str | Dims) -> int:
    """Analytic FLOPs: add, multiply, compare and each transcendental count as one."""
    return int(self.flops_per_call(self.dims(size)))

  def output_bytes(self, size: Size | str | Dims) -> int:
    return math.prod(self.output_shape(size)) * np.dtype(self.output_dtype).itemsize

  def io_bytes(self, size: Size | str | Dims) -> int:
    """Bytes of all inputs plus the output."""
    dims = self.dims(size)
    return sum(spec.nbytes(dims) for spec in self.inputs) + self.output_bytes(dims)

  def min_bytes(self, size: Size | str | Dims) -> int:
    """The fewest bytes a kernel must move: `io_bytes`, except for gathers (rows touched)."""
    if self.touched_bytes is not None:
      return int(self.touched_bytes(self.dims(size), get_precision(self.precision).itemsize))
    return self.io_bytes(size)


def _floating(dtype: str) -> bool:
  return bool(jnp.issubdtype(jnp.dtype(dtype), jnp.floating))


# One program: widening each input and rounding the output were eager casts, each an XLA
# program of its own per shape (about a quarter of a cold check's compiles). The casts are
# exact (widening) or the output's one rounding, so the reference's bits are as they were.
@functools.partial(jax.jit, static_argnames=("reference", "output_dtype"),
                   compiler_options=REFERENCE_COMPILER_OPTIONS)
def _float64_reference(*inputs: jax.Array, reference: Callable[..., jax.Array],
                       output_dtype: str) -> jax.Array:
  """TaskSpec.expected's program; call it with float64 on."""
  wide = tuple(x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x
               for x in inputs)
  return reference(*wide).astype(output_dtype)


# ---------------------------------------------------------------------------------------------
# Shapes shared by several tasks.

def _sizes(small: Dims, medium: Dims, large: Dims, edge: Dims) -> Mapping[Size, Dims]:
  return types.MappingProxyType({
      Size.SMALL: types.MappingProxyType(dict(small)),
      Size.MEDIUM: types.MappingProxyType(dict(medium)),
      Size.LARGE: types.MappingProxyType(dict(large)),
      Size.EDGE: types.MappingProxyType(dict(edge)),
  })


_UNARY = _sizes(dict(N=512, M=512), dict(N=4096, M=4096), dict(N=16384, M=16384),
                dict(N=1000, M=300))
_NORM = _sizes(dict(N=256, D=256), dict(N=2048, D=1024), dict(N=8192, D=4096),
               dict(N=333, D=300))
_MATMUL = _sizes(dict(M=256, K=256, N=256), dict(M=1024, K=1024, N=1024),
                 dict(M=4096, K=4096, N=4096), dict(M=200, K=300, N=100))
_REDUCE = _sizes(dict(N=512, M=256), dict(N=4096, M=2048), dict(N=16384, M=8192),
                 dict(N=300, M=1000))
_SOFTMAX = _sizes(dict(N=256, M=256), dict(N=2048, M=2048), dict(N=8192, M=8192),
                  dict(N=100, M=1000))
_ROWLOSS = _sizes(dict(N=256, M=128), dict(N=2048, M=1024), dict(N=8192, M=4096),
                  dict(N=100, M=300))
_GLU = _sizes(dict(M=128, K=256, N=512), dict(M=512, K=1024, N=2048),
              dict(M=2048, K=4096, N=8192), dict(M=100, K=300, N=200))
_ATTN = _sizes(dict(S=128, d=32), dict(S=512, d=64), dict(S=2048, d=128), dict(S=201, d=40))

_W: Final = FanInNormal()
_WEIGHT_NOTE: Final = ("The second operand is drawn normal / sqrt(K) like a weight, so the output "
                       "has unit scale at every size and TF32 rounding stays inside the matmul "
                       "tolerance (public: standard normal, output scale sqrt(K)).")


def _family(name: str, why: str, *transforms: Transform) -> InputFamily:
  return InputFamily(name=name, why=why, transforms=transforms)


def _scaled(name: str, why: str, scale: float, *inputs: str) -> InputFamily:
  return _family(name, why, *(Affine(input=i, scale=scale) for i in inputs or ("x",)))


def _shifted(name: str, why: str, shift: float, *inputs: str) -> InputFamily:
  return _family(name, why, *(Affine(input=i, shift=shift) for i in inputs or ("x",)))


def _zero_rows(why: str, *inputs: str) -> InputFamily:
  return _family("zero_rows", why, *(ZeroRows(input=i) for i in inputs or ("x",)))


def _float32_only(family: InputFamily, replaced_by: str) -> InputFamily:
  """A family that bfloat16 inputs make ill conditioned: the bfloat16 XLA baseline fails it
  (tests/tasks/test_precisions.py shows each), so a task at bfloat16 leaves it out, and checks
  `replaced_by` there, a family conditioned for bfloat16 that reaches the same region. Offsets
  of 35 to 100 standard deviations leave bfloat16 (8 significant bits) a resolution of 0.25
  to 0.5, about the spread: a layer norm's mean rounded to bfloat16 is off by up to 0.125
  standard deviations, a loss near 5 moves in steps of 0.25 (one bfloat16 ulp at 100), and
  the saturated BCE's max(z, 0) - z t cancels in bfloat16 where t is not 0 or 1."""
  return dataclasses.replace(family, precisions=(FLOAT32,), replaced_by=replaced_by)


# Input families (see InputFamily): for every task, the regions of its domain where its
# formula can break, each well conditioned in float64 and passed by the XLA baseline at the
# task's tolerance at every precision the family is kept at (tests/tasks/test_input_families.py).
# A layer norm of rows whose mean is r standard deviations from zero errs by about r float32
# ulps in any float32 algorithm (the mean itself rounds), and a one-pass variance
# E[x^2] - E[x]^2 by about r^2: r = 35 is where the first still passes (at about 60% of the
# tolerance) and the second fails (at twice it). Scores far above 88 make exp overflow
# float32 (and bfloat16, which has its exponent range); a row whose largest score stands far
# above the rest is one-hot, whatever rounding the scores carry, so a family of such rows
# stays well conditioned for TF32 and bfloat16 contractions alike.
_SATURATED: Final = (_scaled("saturated", "arguments out to about +-130, where exp overflows "
                                          "float32 and the function saturates", 30.0),)
_UNDERFLOW_WHY: Final = ("exp(x) underflows float32 everywhere without the row max subtracted "
                         "(0 / 0)")
_SPIKE_WHY: Final = ("one element of every row at 100: the row spans past exp's range (about "
                     "87), so exp(x - max) underflows to 0 beside the spike")


def _spiked(why: str, input_name: str) -> InputFamily:
  return _family("spiked", why, Spikes(input=input_name, value=100.0))


_SOFTMAX_FAMILIES: Final = (
    _shifted("shifted", "the result is shift-invariant; exp(x) without the row max subtracted "
                        "overflows", 100.0),
    _shifted("shifted_down", f"the result is shift-invariant; {_UNDERFLOW_WHY}", -100.0),
    _scaled("peaked", "peaked rows (logits out to about +-50)", 10.0),
    _spiked(f"{_SPIKE_WHY}: a log taken after normalising is -inf where the answer is near "
            "-100", "x"))
_LOGITS_FAMILIES: Final = (
    _shifted("shifted", "the loss is shift-invariant in the logits; exp(logits) without the "
                        "row max subtracted overflows", 100.0, "logits"),
    _shifted("shifted_down", "the loss is shift-invariant in the logits; exp(logits) "
                             "underflows to 0 without the row max subtracted", -100.0, "logits"),
    _scaled("peaked", "peaked rows (logits out to about +-50)", 10.0, "logits"),
    _spiked(f"{_SPIKE_WHY}, and exp(logits) overflows float32 and bfloat16 without the row max "
            "subtracted: the log of a normalised probability is -inf where the loss needs "
            "about -100 (the loss stays near 100 or 0, exact enough in bfloat16)", "logits"))
_REDUCE_FAMILIES: Final = (
    _shifted("shifted", "rows with a common offset 100 times their spread", 100.0),
    _scaled("scaled_down", "values near 1e-3: the tolerance follows the outputs' scale", 1e-3))
_MATMUL_FAMILIES: Final = (
    _scaled("scaled", "the contraction is linear in x; outputs near 1e5, past float16's "
                      "largest value (65504)", 1e5),
    _scaled("small", "the contraction is linear in x; outputs near 1e-6, below float16's "
                     "normal range (6e-5)", 1e-6))
_GLU_FAMILIES: Final = (
    _scaled("scaled", "pre-activations 10 times larger (saturated gates, outputs near 100)",
            10.0),)
_MATCHED_WHY: Final = ("each query points along one key: scores near 120, where exp overflows "
                       "without the row max subtracted; the rows are one-hot")
_ATTENTION_FAMILIES: Final = (
    _scaled("scaled", "values 100 times larger: attention is linear in v", 100.0, "v"),
    _family("matched", _MATCHED_WHY, MatchedRows(input="q", source="k", norm=120.0)))
_OFFSET_WHY: Final = ("the shift of `shifted` as far as bfloat16 resolves it (at an offset of 2 "
                      "layernorm_residual's bfloat16 baseline fails); a one-pass variance in "
                      "bfloat16 cancels")
_NORM_ZERO_WHY: Final = "all-zero rows: the variance is 0 and only eps keeps the output 0, not NaN"


def _x(name: str = "x", shape=("N", "M"), dist=Normal()) -> InputSpec:
  return InputSpec(name=name, shape=shape, dist=dist)


def _rows(d: Dims) -> tuple[int, ...]:
  return (d["N"],)


def _like_x(d: Dims) -> tuple[int, ...]:
  return (d["N"], d["M"])


def _per_element(ops: int) -> Callable[[Dims], int]:
  return lambda d: ops * d["N"] * d["M"]


def _unary(task_id, name, category, tol, ops, families, notes="", dist=Normal()) -> TaskSpec:
  return TaskSpec(task_id=task_id, name=name, level=1, category=category, inputs=(_x(dist=dist),),
                  output=_like_x, tolerance_class=tol, sizes=_UNARY,
                  flops_per_call=_per_element(ops), notes=notes, families=families)


def _binary(task_id, name, ops, families) -> TaskSpec:
  return TaskSpec(task_id=task_id, name=name, level=1, category="elementwise",
                  inputs=(_x("x"), _x("y")), output=_like_x,
                  tolerance_class=ToleranceClass.EXACT, sizes=_UNARY,
                  flops_per_call=_per_element(ops), notes="", families=families)


def _norm(task_id, name, ops, families, inputs=("x",), level=1, category="normalization",
          notes=""):
  return TaskSpec(task_id=task_id, name=name, level=level, category=category,
                  inputs=tuple(_x(n, ("N", "D")) for n in inputs),
                  output=lambda d: (d["N"], d["D"]),
                  tolerance_class=ToleranceClass.TRANSCENDENTAL, sizes=_NORM,
                  flops_per_call=lambda d: ops * d["N"] * d["D"], notes=notes, families=families)


def _matmul_act(task_id, name, level, act_ops, notes="") -> TaskSpec:
  return TaskSpec(task_id=task_id, name=name, level=level,
                  category="matmul" if level == 1 else "matmul_activation",
                  inputs=(_x("x", ("M", "K")),
                          InputSpec(name="y" if level == 1 else "w", shape=("K", "N"), dist=_W)),
                  output=lambda d: (d["M"], d["N"]), tolerance_class=ToleranceClass.MATMUL,
                  sizes=_MATMUL,
                  flops_per_call=lambda d: 2 * d["M"] * d["N"] * d["K"] + act_ops * d["M"] * d["N"],
                  notes=notes, families=_MATMUL_FAMILIES)


def _reduce(task_id, name, tol, families=_REDUCE_FAMILIES) -> TaskSpec:
  return TaskSpec(task_id=task_id, name=name, level=1, category="reduce", inputs=(_x(),),
                  output=_rows, tolerance_class=tol, sizes=_REDUCE,
                  flops_per_call=_per_element(1), notes="", families=families)


def _glu(task_id, name, act_ops) -> TaskSpec:
  return TaskSpec(task_id=task_id, name=name, level=2, category="mlp_fusion",
                  inputs=(_x("x", ("M", "K")), InputSpec(name="w_gate", shape=("K", "N"), dist=_W),
                          InputSpec(name="w_up", shape=("K", "N"), dist=_W)),
                  output=lambda d: (d["M"], d["N"]), tolerance_class=ToleranceClass.MATMUL,
                  sizes=_GLU,
                  flops_per_call=lambda d: 4 * d["M"] * d["N"] * d["K"] + (act_ops + 1) * d["M"] * d["N"],
                  notes="Weights are normal / sqrt(K) so activations keep unit scale (public: "
                        "standard normal weights).", families=_GLU_FAMILIES)


def _attention_flops(d: Dims) -> int:
  return 4 * d["S"] * d["S"] * d["d"] + 5 * d["S"] * d["S"]


def _transformer_flops(d: Dims) -> int:
  s, dm, h, dh, f = d["S"], d["H"] * d["dh"], d["H"], d["dh"], d["F"]
  projections = 2 * s * dm * h * dh * 4            # q, k, v and the output projection
  attention = h * (4 * s * s * dh + 5 * s * s)
  feed_forward = 6 * s * dm * f + 5 * s * f
  return projections + attention + feed_forward + 2 * 3 * s * dm + 2 * s * dm


def _triangle_flops(d: Dims) -> int:
  n, c = d["N"], d["C"]
  return 4 * 2 * n * n * c * c + 2 * n * n * n * c + 2 * 6 * n * n * c + 8 * n * n * c


_L1: Final = (
    _unary(1, "relu", "activation", ToleranceClass.EXACT, 1,
           (_scaled("scaled", "relu is positively homogeneous", 100.0),)),
    _unary(2, "gelu", "activation", ToleranceClass.TRANSCENDENTAL, 8, _SATURATED),
    _unary(3, "silu", "activation", ToleranceClass.TRANSCENDENTAL, 4, _SATURATED),
    _unary(4, "sigmoid", "activation", ToleranceClass.TRANSCENDENTAL, 3, _SATURATED),
    _unary(5, "tanh", "activation", ToleranceClass.TRANSCENDENTAL, 1, (
        *_SATURATED,
        _scaled("small", "arguments near 1e-4, where tanh(x) = x and a tanh through "
                         "(exp(2x) - 1) / (exp(2x) + 1) cancels", 1e-4))),
    _norm(6, "layernorm", 6, (
        _float32_only(_shifted("shifted", "layernorm is shift-invariant; rows whose mean is 35 "
                                          "standard deviations from zero, where a one-pass "
                                          "variance cancels", 35.0), "offset"),
        _shifted("offset", f"rows whose mean is 1.5 standard deviations from zero: {_OFFSET_WHY}",
                 1.5),
        _scaled("scaled_down", "rows of variance 1e-4, where eps = 1e-5 is not negligible",
                0.01),
        _zero_rows(_NORM_ZERO_WHY))),
    _norm(7, "rmsnorm", 4, (
        _scaled("scaled_up", "rmsnorm is scale-invariant (up to eps); x^2 near 1e4", 100.0),
        _scaled("scaled_down", "mean(x^2) near 1e-4, where eps = 1e-5 is not negligible",
                0.01),
        _zero_rows("all-zero rows: mean(x^2) is 0 and only eps keeps the output 0, not NaN"))),
    _matmul_act(8, "matmul", 1, 0, notes=_WEIGHT_NOTE),
    TaskSpec(task_id=9, name="batched_matmul", level=1, category="matmul",
             inputs=(_x("x", ("B", "M", "K")),
                     InputSpec(name="y", shape=("B", "K", "N"), dist=FanInNormal(contracted_axes=(1,)))),
             output=lambda d: (d["B"], d["M"], d["N"]), tolerance_class=ToleranceClass.MATMUL,
             sizes=_sizes(dict(B=4, M=64, K=64, N=64), dict(B=8, M=256, K=256, N=256),
                          dict(B=16, M=512, K=512, N=512), dict(B=3, M=50, K=70, N=40)),
             flops_per_call=lambda d: 2 * d["B"] * d["M"] * d["N"] * d["K"], notes=_WEIGHT_NOTE,
             families=_MATMUL_FAMILIES),
    TaskSpec(task_id=10, name="outer_product", level=1, category="matmul",
             inputs=(_x("x", ("M",)), _x("y", ("N",))), output=lambda d: (d["M"], d["N"]),
             tolerance_class=ToleranceClass.EXACT,
             sizes=_sizes(dict(M=256, N=256), dict(M=1024, N=1024), dict(M=4096, N=4096),
                          dict(M=300, N=500)),
             flops_per_call=lambda d: d["M"] * d["N"], notes="", families=_MATMUL_FAMILIES),
    _reduce(11, "reduce_sum", ToleranceClass.REDUCTION),
    _reduce(12, "reduce_max", ToleranceClass.EXACT, (
        _shifted("negative", "every value negative: a max that starts from 0 is wrong", -100.0),)),
    _reduce(13, "reduce_mean", ToleranceClass.REDUCTION),
    TaskSpec(task_id=14, name="softmax", level=1, category="softmax", inputs=(_x(),),
             output=_like_x, tolerance_class=ToleranceClass.REDUCTION, sizes=_SOFTMAX,
             flops_per_call=_per_element(5), notes="", families=_SOFTMAX_FAMILIES),
    TaskSpec(task_id=15, name="log_softmax", level=1, category="softmax", inputs=(_x(),),
             output=_like_x, tolerance_class=ToleranceClass.REDUCTION, sizes=_SOFTMAX,
             flops_per_call=_per_element(4), notes="", families=_SOFTMAX_FAMILIES),
    _unary(16, "exp", "elementwise", ToleranceClass.TRANSCENDENTAL, 1, (
        _shifted("shifted_down", "outputs near 1e-13: exp is relatively accurate everywhere",
                 -30.0),
        _family("underflow", "arguments about -85 +- 5 (out to -110): below -87.3 exp leaves "
                             "float32's normal range and below -103.3 it underflows to 0, where "
                             "a 2^n built from exponent bits wraps",
                Affine(input="x", scale=5.0, shift=-85.0)))),
    _unary(17, "log", "elementwise", ToleranceClass.TRANSCENDENTAL, 2, (
        _scaled("small", "arguments 1e-5 to 5e-4, where the + 1e-7 shows", 1e-4),
        _family("zeros", "arguments 0, where only the + 1e-7 keeps log finite (-16.1)",
                SetTo(input="x", value=0.0))),
           dist=Uniform(low=0.1, high=5.0),
           notes="Inputs uniform in [0.1, 5) (the public suite first drew normal inputs, so "
                 "log of negatives gave NaN on both sides)."),
    _binary(18, "add", 1, (_scaled("unbalanced", "an addend a thousand times smaller", 1e-3, "y"),)),
    _binary(19, "multiply", 1, (_scaled("scaled", "the product is linear in x", 1e3),)),
    _unary(20, "rsqrt", "elementwise", ToleranceClass.TRANSCENDENTAL, 2, (
        _scaled("small", "arguments 1e-5 to 5e-4, where the + 1e-5 is of their size", 1e-4),
        _family("zeros", "arguments 0, where only the + 1e-5 keeps rsqrt finite (316)",
                SetTo(input="x", value=0.0))),
           dist=Uniform(low=0.1, high=5.0),
           notes="Inputs uniform in [0.1, 5), as for log."),
    _unary(21, "clamp", "elementwise", ToleranceClass.EXACT, 2,
           (_scaled("inside", "most values inside [-1, 1]", 0.25),
            _scaled("large", "values near 1e30, far outside [-1, 1]", 1e30)),
           dist=Normal(scale=2.0),
           notes="Inputs are normal * 2 so that about 60% of them are clipped."),
    TaskSpec(task_id=22, name="cross_entropy", level=1, category="loss",
             inputs=(_x("logits", ("N", "C")), _x("labels", ("N", "C"), SoftmaxRows())),
             output=_rows, tolerance_class=ToleranceClass.REDUCTION,
             sizes=_sizes(dict(N=128, C=64), dict(N=1024, C=512), dict(N=4096, C=2048),
                          dict(N=100, C=300)),
             flops_per_call=lambda d: 6 * d["N"] * d["C"], families=_LOGITS_FAMILIES,
             notes="(corrected) labels are a probability distribution per row (softmax of "
                   "normal draws); the public suite fed standard-normal labels, which can be "
                   "negative, so its loss could be negative."),
    TaskSpec(task_id=23, name="mse_loss", level=1, category="loss",
             inputs=(_x("pred"), _x("target")), output=_rows,
             tolerance_class=ToleranceClass.REDUCTION, sizes=_ROWLOSS,
             flops_per_call=_per_element(3), notes="", families=(
                 _shifted("offset", "predictions far from their targets", 10.0, "target"),
                 _shifted("near", "predictions near large targets (both 100 above their "
                                  "spread): mean(p^2) + mean(t^2) - 2 mean(p t) cancels", 100.0,
                          "pred", "target"),
                 _scaled("scaled_down", "values near 1e-3, losses near 2e-6: the tolerance "
                                        "follows the outputs' scale", 1e-3, "pred", "target"))),
    TaskSpec(task_id=24, name="cosine_sim", level=1, category="loss",
             inputs=(_x("x"), _x("y")), output=_rows,
             tolerance_class=ToleranceClass.REDUCTION, sizes=_ROWLOSS,
             flops_per_call=_per_element(6), notes="", families=(
                 _scaled("scaled", "cosine similarity is scale-invariant", 1e3),
                 _shifted("correlated", "rows sharing an offset (similarities near 0.5)", 1.0,
                          "x", "y"),
                 _scaled("tiny", "norms near 1e-4, whose product is the size of the + 1e-8",
                         1e-5, "x", "y"),
                 _zero_rows("all-zero rows of x: the similarity is 0 / (0 + 1e-8) = 0, NaN "
                            "without the epsilon", "x"))),
    TaskSpec(task_id=25, name="embedding_lookup", level=1, category="index",
             inputs=(_x("table", ("V", "D")),
                     InputSpec(name="ids", shape=("S",), dtype=INT32, dist=Integers(high="V"))),
             output=lambda d: (d["S"], d["D"]), tolerance_class=ToleranceClass.EXACT,
             sizes=_sizes(dict(V=8000, D=256, S=128), dict(V=32000, D=768, S=512),
                          dict(V=128000, D=1024, S=2048), dict(V=1000, D=300, S=100)),
             flops_per_call=lambda d: 0,
             families=(_scaled("scaled", "a gather copies values whatever their scale", 1e3,
                               "table"),
                       _family("end_ids", "ids at the ends of the table (0 and V - 1), the "
                                          "rows at its masked edges",
                               EndIds(input="ids", high="V"))),
             touched_bytes=lambda d, f: f * 2 * d["S"] * d["D"] + 4 * d["S"],
             notes="(corrected) ids are uniform over all of [0, V); the public suite drew them "
                   "from [0, S), so only the first S rows of the table were ever read. The "
                   "roofline counts the rows touched, not the whole table."),
    TaskSpec(task_id=26, name="one_hot", level=1, category="index",
             inputs=(InputSpec(name="ids", shape=("S",), dtype=INT32,
                               dist=Integers(high=1024, out_of_range=0.01)),),
             output=lambda d: (d["S"], 1024), tolerance_class=ToleranceClass.EXACT,
             sizes=_sizes(dict(S=128), dict(S=512), dict(S=2048), dict(S=100)),
             flops_per_call=lambda d: d["S"] * 1024,
             families=(_family("out_of_range", "ids outside [0, 1024) from the whole int32 "
                                               "range, each a zero row: a range test exact "
                                               "only for the nominal band (-1024 to 2047), a "
                                               "mask of low bits, lights a column",
                               OutOfRangeIds(input="ids", high=1024)),),
             notes="(corrected) ids uniform in [0, 1024) with about 1% out of range (negative "
                   "or >= 1024), which give all-zero rows as jax.nn.one_hot does; the public "
                   "suite drew ids from [0, S), half out of range at the large size."),
    TaskSpec(task_id=27, name="nucleotide_onehot", level=1, category="genomics",
             inputs=(InputSpec(name="seq", shape=("L",), dtype=INT32, dist=DNACodes()),),
             output=lambda d: (d["L"], 4), tolerance_class=ToleranceClass.EXACT,
             sizes=_sizes(dict(L=1024), dict(L=4096), dict(L=16384), dict(L=1001)),
             flops_per_call=lambda d: 4 * d["L"],
             families=(_family("unknown", "half the codes N (4): all-zero rows next to one-hot "
                                          "ones at any position", SetTo(input="seq", value=4,
                                                                        fraction=0.5)),),
             notes="(corrected) codes 0..3 = A,C,G,T with about 2% code 4 (N), which gives an "
                   "all-zero row; the public suite drew codes from [0, L), so 99.9% of rows "
                   "were zero."),
)

_L2: Final = (
    _matmul_act(28, "matmul_relu", 2, 1, notes=_WEIGHT_NOTE),
    _matmul_act(29, "matmul_gelu", 2, 8, notes=_WEIGHT_NOTE),
    _matmul_act(30, "matmul_silu", 2, 4, notes=_WEIGHT_NOTE),
    _norm(31, "rmsnorm_residual", 5, (
        _scaled("large_residual", "a residual stream 100 times larger than the branch", 100.0,
                "residual"),
        _zero_rows("rows where x and the residual are zero: only eps keeps the output 0",
                   "x", "residual")), ("x", "residual"), 2, "norm_residual",
          notes="(corrected) rmsnorm(x + residual): add, then normalise, the fused pattern "
                "real models use; the public suite normalised x and added the residual after."),
    _norm(32, "layernorm_residual", 7, (
        _float32_only(_shifted("shifted", "layernorm is shift-invariant; sums whose mean is 35 "
                                          "standard deviations from zero, where a one-pass "
                                          "variance cancels", 50.0, "residual"), "offset"),
        _shifted("offset", f"sums whose mean is 1 standard deviation from zero: {_OFFSET_WHY}",
                 1.5, "residual"),
        _scaled("large_residual", "a residual stream 100 times larger than the branch", 100.0,
                "residual"),
        _zero_rows("rows where x and the residual are zero: only eps keeps the output 0",
                   "x", "residual")), ("x", "residual"), 2, "norm_residual",
          notes="(corrected) layernorm(x + residual), as for rmsnorm_residual."),
    _glu(33, "swiglu", 4),
    _glu(34, "geglu", 8),
    TaskSpec(task_id=35, name="linear_bias_relu", level=2, category="matmul_activation",
             inputs=(_x("x", ("M", "K")), InputSpec(name="w", shape=("K", "N"), dist=_W),
                     _x("b", ("N",))),
             output=lambda d: (d["M"], d["N"]), tolerance_class=ToleranceClass.MATMUL,
             sizes=_sizes(dict(M=256, K=256, N=512), dict(M=1024, K=1024, N=2048),
                          dict(M=4096, K=4096, N=8192), dict(M=100, K=300, N=200)),
             flops_per_call=lambda d: 2 * d["M"] * d["N"] * d["K"] + 2 * d["M"] * d["N"],
             notes="", families=_MATMUL_FAMILIES),
    TaskSpec(task_id=36, name="qk_softmax", level=2, category="attention_component",
             inputs=(_x("q", ("S", "d")), _x("k", ("S", "d"))), output=lambda d: (d["S"], d["S"]),
             tolerance_class=ToleranceClass.MATMUL,
             sizes=_sizes(dict(S=64, d=32), dict(S=256, d=64), dict(S=1024, d=128),
                          dict(S=100, d=40)),
             flops_per_call=lambda d: 2 * d["S"] * d["S"] * d["d"] + 5 * d["S"] * d["S"],
             notes="", families=(
                 _scaled("flat", "nearly uniform rows (outputs near 1/S): rtol governs", 0.1,
                         "q"),
                 _family("matched", _MATCHED_WHY, MatchedRows(input="q", source="k",
                                                              norm=120.0)))),
    TaskSpec(task_id=37, name="fused_softmax_cross_entropy", level=2, category="loss_fusion",
             inputs=(_x("logits", ("N", "V")),
                     InputSpec(name="labels", shape=("N",), dtype=INT32, dist=Integers(high="V"))),
             output=_rows, tolerance_class=ToleranceClass.REDUCTION,
             sizes=_sizes(dict(N=128, V=512), dict(N=1024, V=4096), dict(N=4096, V=32000),
                          dict(N=100, V=1000)),
             flops_per_call=lambda d: 4 * d["N"] * d["V"],
             families=(*(_float32_only(f, "spiked") for f in _LOGITS_FAMILIES[:2]),
                       *_LOGITS_FAMILIES[2:]),
             notes="(corrected) the hard-label LLM loss logsumexp(logits) - logits[label] with "
                   "int labels and a vocabulary that is not a power of two at the large size; "
                   "the public suite duplicated L1 cross_entropy here."),
    TaskSpec(task_id=38, name="sigmoid_bce", level=2, category="loss_fusion",
             inputs=(_x("logits"), _x("targets", dist=Uniform(low=0.0, high=1.0))),
             output=_like_x, tolerance_class=ToleranceClass.TRANSCENDENTAL, sizes=_ROWLOSS,
             flops_per_call=_per_element(7), families=(
                 _float32_only(_scaled("saturated", "logits out to about +-130, where exp(-z) "
                                                    "overflows float32", 30.0, "logits"),
                               "saturated_hard"),
                 _family("saturated_hard", "logits out to about +-130 with hard labels (0 or "
                                           "1): 1 - sigmoid(z) rounds to 0 above 17 and exp(-z) "
                                           "overflows below -88; no cancellation in bfloat16",
                         Affine(input="logits", scale=30.0), Rounded(input="targets"))),
             notes="(corrected) elementwise BCE with logits in the stable form max(z,0) - z t + "
                   "log1p(exp(-|z|)) with targets uniform in [0, 1]; the public formula "
                   "returned softplus(-z) - t z + t softplus(-z), and its targets were normal."),
    TaskSpec(task_id=39, name="pwm_scan", level=2, category="genomics",
             inputs=(InputSpec(name="seq_onehot", shape=("L", 4), dist=OneHotDNA()),
                     InputSpec(name="pwm", shape=(4, "W"))),
             output=lambda d: (d["L"] - d["W"] + 1,), tolerance_class=ToleranceClass.REDUCTION,
             sizes=_sizes(dict(L=256, W=8), dict(L=1024, W=12), dict(L=4096, W=16),
                          dict(L=1000, W=7)),
             flops_per_call=lambda d: 8 * (d["L"] - d["W"] + 1) * d["W"],
             output_follows_precision=False,
             families=(_scaled("scaled", "the scan is linear in the weights", 100.0, "pwm"),
                       _family("unknown_bases", "positions of unknown base (N), encoded as "
                                                "all-zero rows (as nucleotide_onehot emits "
                                                "them): they add no weight, where a lookup by "
                                                "base code adds A's",
                               ZeroRows(input="seq_onehot", fraction=0.05))),
             notes="(corrected) seq_onehot is a real one-hot encoding of random A/C/G/T; the "
                   "public suite fed standard-normal data."),
    TaskSpec(task_id=40, name="pairwise_distance", level=2, category="genomics",
             inputs=(_x("x", ("N", "D")),), output=lambda d: (d["N"], d["N"]),
             tolerance_class=ToleranceClass.MATMUL,
             sizes=_sizes(dict(N=64, D=16), dict(N=256, D=32), dict(N=1024, D=64),
                          dict(N=100, D=20)),
             flops_per_call=lambda d: 3 * d["N"] * d["N"] * d["D"] + 2 * d["N"] * d["N"],
             families=(_shifted("shifted", "distances are shift-invariant; norms through "
                                           "|x|^2 cancel: at 100 above the spread the "
                                           "diagonal's 1e-4 comes out near 0.25", 100.0),
                       _scaled("tiny", "distances near 1e-4, where the + 1e-8 under the root "
                                       "is of their square's size", 1e-5)),
             notes="The distance through norms and a dot product cancels; kernels need full "
                   "float32 precision there (the diagonal is sqrt(1e-8) = 1e-4)."),
)

_L3: Final = (
    TaskSpec(task_id=41, name="flash_attention", level=3, category="attention",
             inputs=(_x("q", ("S", "d")), _x("k", ("S", "d")), _x("v", ("S", "d"))),
             output=lambda d: (d["S"], d["d"]), tolerance_class=ToleranceClass.MATMUL,
             sizes=_ATTN, flops_per_call=_attention_flops, families=_ATTENTION_FAMILIES,
             notes="(corrected) the GPU kernel is a real flash kernel (online softmax over key "
                   "blocks; the (S, S) scores never exist in memory); the public kernel was "
                   "plain attention over whole K and V."),
    TaskSpec(task_id=42, name="multi_head_attention", level=3, category="attention",
             inputs=tuple(_x(n, ("H", "S", "d")) for n in ("q", "k", "v")),
             output=lambda d: (d["H"], d["S"], d["d"]), tolerance_class=ToleranceClass.MATMUL,
             sizes=_sizes(dict(H=4, S=64, d=32), dict(H=8, S=256, d=64),
                          dict(H=16, S=512, d=128), dict(H=3, S=100, d=40)),
             flops_per_call=lambda d: d["H"] * _attention_flops(d), notes="",
             families=_ATTENTION_FAMILIES),
    TaskSpec(task_id=43, name="gated_mlp", level=3, category="mlp",
             inputs=(_x("x", ("M", "D")), InputSpec(name="w_gate", shape=("D", "F"), dist=_W),
                     InputSpec(name="w_up", shape=("D", "F"), dist=_W),
                     InputSpec(name="w_down", shape=("F", "D"), dist=_W)),
             output=lambda d: (d["M"], d["D"]), tolerance_class=ToleranceClass.MATMUL,
             sizes=_sizes(dict(M=64, D=128, F=256), dict(M=256, D=512, F=1024),
                          dict(M=1024, D=2048, F=4096), dict(M=100, D=96, F=200)),
             flops_per_call=lambda d: 6 * d["M"] * d["D"] * d["F"] + 5 * d["M"] * d["F"],
             notes="Weights are normal / sqrt(fan_in).", families=_GLU_FAMILIES),
    TaskSpec(task_id=44, name="transformer_block", level=3, category="full_model",
             inputs=(_x("x", ("S", "D")),
                     InputSpec(name="wq", shape=("D", "H", "dh"), dist=_W),
                     InputSpec(name="wk", shape=("D", "H", "dh"), dist=_W),
                     InputSpec(name="wv", shape=("D", "H", "dh"), dist=_W),
                     InputSpec(name="wo", shape=("H", "dh", "D"), dist=FanInNormal(contracted_axes=(0, 1))),
                     InputSpec(name="w_gate", shape=("D", "F"), dist=_W),
                     InputSpec(name="w_up", shape=("D", "F"), dist=_W),
                     InputSpec(name="w_down", shape=("F", "D"), dist=_W)),
             output=lambda d: (d["S"], d["D"]), tolerance_class=ToleranceClass.MATMUL,
             sizes=_sizes(dict(S=32, D=64, H=2, dh=32, F=128),
                          dict(S=128, D=256, H=4, dh=64, F=512),
                          dict(S=512, D=1024, H=8, dh=128, F=2048),
                          dict(S=100, D=96, H=3, dh=32, F=200)),
             flops_per_call=_transformer_flops, families=(
                 _scaled("scaled", "a residual stream 10 times larger (rmsnorm makes the "
                                   "branches scale-free)", 10.0),
                 _family("self_matched", "every query 20 times its own key (wq = 20 wk): "
                                         "diagonal scores of 60 to 230, where exp overflows "
                                         "without the row max subtracted; the rows are one-hot",
                         ScaledCopy(input="wq", source="wk", scale=20.0)),
                 _zero_rows("tokens whose x is all zero: only rmsnorm's eps keeps them 0")),
             notes="(corrected) a pre-norm block with multi-head attention (heads read from the "
                   "weight shapes) and a SwiGLU feed-forward; the public task was a single-head "
                   "toy with a relu feed-forward and no down-projection."),
    TaskSpec(task_id=45, name="triangle_update", level=3, category="genomics",
             inputs=(_x("z", ("N", "N", "C")),
                     InputSpec(name="mask", shape=("N", "N"), dist=BinaryMask()),
                     *(InputSpec(name=n, shape=("C", "C"), dist=_W)
                       for n in ("w_a", "w_b", "w_g", "w_o"))),
             output=lambda d: (d["N"], d["N"], d["C"]), tolerance_class=ToleranceClass.MATMUL,
             sizes=_sizes(dict(N=16, C=16), dict(N=64, C=32), dict(N=128, C=64),
                          dict(N=50, C=24)),
             flops_per_call=_triangle_flops, families=(
                 _scaled("scaled", "a pair tensor 10 times larger (layernorm makes the update "
                                   "scale-free)", 10.0, "z"),
                 _zero_rows("pairs whose features are all zero: only layernorm's eps keeps "
                            "them finite", "z")),
             notes="(corrected) the AlphaFold triangle multiplicative update (outgoing edges: "
                   "layernorm, masked projections, the triangle product, layernorm, output "
                   "projection and sigmoid gate); the public task was a bare masked einsum of "
                   "the pair tensor with itself, and its mask was normal data, not 0/1."),
)

TASKS: Final[Mapping[str, TaskSpec]] = types.MappingProxyType(
    {spec.name: spec for spec in (*_L1, *_L2, *_L3)})


def list_tasks(*, levels: tuple[int, ...] | None = None) -> tuple[TaskSpec, ...]:
  """All task specs in task-id order, optionally only those of some levels."""
  specs = sorted(TASKS.values(), key=lambda s: s.task_id)
  return tuple(s for s in specs if levels is None or s.level in levels)


def input_family_rows() -> tuple[dict[str, str], ...]:
  """The input families of every task, for the card's table (task, family, inputs)."""
  return tuple({"task": spec.name, "family": f.name, "inputs": f.description}
               for spec in list_tasks() for f in spec.families)


def get_task(name: str) -> TaskSpec:
  """The spec of one task by name; for an unknown one, a clear error that names the closest
  task and lists them all."""
  try:
    return TASKS[name]
  except KeyError:
    close = difflib.get_close_matches(str(name), TASKS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise KeyError(f"unknown task {name!r}{hint}; known tasks: {', '.join(TASKS)}") from None
