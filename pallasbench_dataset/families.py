"""Input families: a task's inputs beyond its nominal draw, derived from that draw as data.

A family maps some of the nominal inputs to reach a region of the task's domain where a
formula can break: large and small magnitudes (`x * 30`, `x * 1e-5`), shifts (`x + 100`),
zeros where an epsilon is all that keeps a division finite (zero rows planted), saturation,
underflow, ids out of range across the whole int32 range, queries that match one key. The
judge checks a kernel on every family of its task as on the nominal draw (judge/checks.py).
Where a transform draws (which rows, which ids), it draws from a key folded from the seed, so
the positions are as secret as the seed. Kept apart from inputs.py, whose source the
dataset's JAX_Code_Functional cells carry.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Final, TypeAlias

import jax
import jax.numpy as jnp

from pallasbench_dataset.inputs import Dim, Dims, InputSpec
from pallasbench_dataset.precision import PRECISIONS

INT32_MIN: Final = -(2 ** 31)
INT32_MAX: Final = 2 ** 31 - 1


def _bound(high: Dim, dims: Dims) -> int:
  return high if isinstance(high, int) else int(dims[high])


def _row_mask(key: jax.Array, shape: tuple[int, ...], fraction: float) -> jax.Array:
  """True on about `fraction` of the rows (slices along the last axis), broadcastable to
  `shape`; at least one row, so that a small draw still reaches the region."""
  rows = shape[:-1] or (1,)
  mask = jax.random.uniform(key, rows) < fraction
  first = jnp.zeros(rows, bool).reshape(-1).at[0].set(True).reshape(rows)
  return (mask | first).reshape(*shape[:-1], 1)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Affine:
  """Input `input` of the nominal draw mapped to `scale * input + shift`, in its own dtype."""
  input: str
  scale: float = 1.0
  shift: float = 0.0

  def apply(self, x: jax.Array) -> jax.Array:
    # Rounded after the product, then after the sum, as when each op was a program of its own:
    # in one compiled program (the family's, `_derived`) XLA contracts the two into an FMA
    # (exp's underflow family moved by an ulp on a CPU) and may keep a bfloat16 product in
    # float32.
    scaled = jax.lax.optimization_barrier(x * jnp.asarray(self.scale, x.dtype))
    return (scaled + jnp.asarray(self.shift, x.dtype)).astype(x.dtype)

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    return self.apply(inputs[self.input])

  def describe(self) -> str:
    text = self.input if self.scale == 1.0 else f"{self.input} * {self.scale:g}"
    if self.shift:
      text += f" {'+' if self.shift > 0 else '-'} {abs(self.shift):g}"
    return text


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ZeroRows:
  """About `fraction` of the rows of `input` (slices along its last axis) set to zero. Every
  ZeroRows of one family draws the same rows (one key per family): `x` and `residual` zero
  together leave their sum zero."""
  input: str
  fraction: float = 0.25

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    x = inputs[self.input]
    return jnp.where(_row_mask(key, x.shape, self.fraction), jnp.zeros((), x.dtype), x)

  def describe(self) -> str:
    return f"{self.input} with {self.fraction:.0%} of its rows zero"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Spikes:
  """One element of every row of `input` (at a column drawn per row) set to `value`."""
  input: str
  value: float

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    x = inputs[self.input]
    cols = jax.random.randint(key, (*x.shape[:-1], 1), 0, x.shape[-1])
    at = jnp.arange(x.shape[-1]) == cols
    return jnp.where(at, jnp.asarray(self.value, x.dtype), x)

  def describe(self) -> str:
    return f"{self.input} with one element per row set to {self.value:g}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Rounded:
  """`input` rounded to the nearest integer: targets in [0, 1] become hard labels 0 and 1."""
  input: str

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    return jnp.round(inputs[self.input])

  def describe(self) -> str:
    return f"round({self.input})"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MatchedRows:
  """Every row of `input` (last axis) replaced by a row of `source` drawn at random (from the
  same leading slice), rescaled to the norm `norm`: each query points along one key, so its
  score with that key is about `norm` (keys have norm about sqrt(d); the score divides by
  sqrt(d)) and every other score about norm / sqrt(d) times a standard normal."""
  input: str
  source: str
  norm: float

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    x, src = inputs[self.input], inputs[self.source].astype(jnp.float32)
    picks = jax.random.randint(key, (*x.shape[:-1], 1), 0, src.shape[-2])
    rows = jnp.take_along_axis(src, picks, axis=-2)
    # The norm as jnp.linalg.norm rounds it alone: compiled with the division, XLA turns
    # rows / sqrt(s) into rows * rsqrt(s) and moves the input by an ulp (see Affine.apply).
    norm = jax.lax.optimization_barrier(jnp.linalg.norm(rows, axis=-1, keepdims=True))
    unit = rows / norm
    return (self.norm * unit).astype(x.dtype)

  def describe(self) -> str:
    return f"{self.input} = {self.norm:g} * a row of {self.source} / its norm"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScaledCopy:
  """`input` replaced by `scale * source` (arrays of one shape)."""
  input: str
  source: str
  scale: float

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    x = inputs[self.input]
    return (inputs[self.source].astype(jnp.float32) * self.scale).astype(x.dtype)

  def describe(self) -> str:
    return f"{self.input} = {self.source} * {self.scale:g}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OutOfRangeIds:
  """About `fraction` of the integer `input` replaced by ids outside [0, high), drawn across
  the whole int32 range: a bit length uniform in 1..31 and a value of that length, either
  side of the range, so that a range test exact only for some band of ids (a mask of low
  bits, a narrower integer type) fails; the first four replaced are INT32_MIN, -1, high and
  INT32_MAX, the extremes and the ids next to the range."""
  input: str
  high: Dim
  fraction: float = 0.25

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    ids = inputs[self.input]
    high = _bound(self.high, dims)
    k_where, k_bits, k_low, k_side = jax.random.split(key, 4)
    n = ids.size
    extremes = jnp.asarray([INT32_MIN, -1, high, INT32_MAX], jnp.int32)[:n]
    where = (jax.random.uniform(k_where, (n,)) < self.fraction).at[:extremes.size].set(True)
    bits = jax.random.randint(k_bits, (n,), 1, 32)               # bit length 1..31
    low = jax.random.bits(k_low, (n,), jnp.uint32)
    top = jnp.left_shift(jnp.uint32(1), (bits - 1).astype(jnp.uint32))
    magnitude = (top | (low & (top - 1))).astype(jnp.int32)     # in [2^(bits-1), 2^bits)
    above = jnp.where(magnitude > INT32_MAX - high, INT32_MAX, magnitude + (high - 1))
    far = jnp.where(jax.random.bernoulli(k_side, 0.5, (n,)), -magnitude, above)
    far = far.at[:extremes.size].set(extremes)
    return jnp.where(where, far, ids.reshape(-1)).reshape(ids.shape).astype(ids.dtype)

  def describe(self) -> str:
    return (f"{self.input} with {self.fraction:.0%} out of range across int32 (INT32_MIN, -1, "
            f"{self.high}, INT32_MAX among them)")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EndIds:
  """About `fraction` of the integer `input` set to the ends of its range [0, high): 0 or
  high - 1 (the first and last rows of a table, where blocks are masked)."""
  input: str
  high: Dim
  fraction: float = 0.5

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    ids = inputs[self.input]
    k_where, k_end = jax.random.split(key)
    where = jax.random.uniform(k_where, ids.shape) < self.fraction
    end = jnp.where(jax.random.bernoulli(k_end, 0.5, ids.shape), _bound(self.high, dims) - 1, 0)
    return jnp.where(where, end, ids).astype(ids.dtype)

  def describe(self) -> str:
    return f"{self.input} with {self.fraction:.0%} at 0 or {self.high} - 1"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SetTo:
  """About `fraction` of the elements of `input` set to `value` (a code, a zero)."""
  input: str
  value: float
  fraction: float = 0.25

  def transform(self, inputs: Mapping[str, jax.Array], key: jax.Array, dims: Dims) -> jax.Array:
    x = inputs[self.input]
    where = jax.random.uniform(key, x.shape) < self.fraction
    return jnp.where(where, jnp.asarray(self.value, x.dtype), x)

  def describe(self) -> str:
    return f"{self.input} with {self.fraction:.0%} of its elements {self.value:g}"


Transform: TypeAlias = (Affine | ZeroRows | Spikes | Rounded | MatchedRows | ScaledCopy |
                        OutOfRangeIds | EndIds | SetTo)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class InputFamily:
  """Inputs beyond the nominal draw: the nominal inputs with some of them transformed.

  The judge checks a kernel on every family of its task (a fresh seed each) as on the
  nominal draw, with the same tolerance; a family is chosen where the float64 reference is
  well conditioned, so that the XLA baseline passes it at each precision the family is kept
  at (tests/tasks/test_input_families.py). Transforms read the nominal inputs (a source of
  MatchedRows or ScaledCopy is the nominal draw of that input) and apply in order.
  """
  name: str                       # short, unique within the task: "shifted"
  why: str                        # the region it reaches, in the task's terms
  transforms: tuple[Transform, ...]
  # The precisions at which the family is well conditioned (the XLA baseline at that
  # precision passes it); a task at another precision leaves it out and checks, in its
  # place, the family `replaced_by` names: one conditioned there that reaches the same region.
  precisions: tuple[str, ...] = tuple(PRECISIONS)
  replaced_by: str | None = None

  @property
  def formula(self) -> str:
    """How the inputs are derived, for the reasons: 'x + 100'."""
    return ", ".join(t.describe() for t in self.transforms)

  @property
  def description(self) -> str:
    """One line for the card: 'x + 100: softmax is shift-invariant'."""
    return f"{self.formula}: {self.why}"

  def derive(self, inputs: tuple[jax.Array, ...], specs: tuple[InputSpec, ...],
             key: jax.Array | None = None, dims: Dims | None = None) -> tuple[jax.Array, ...]:
    """The family's inputs from the nominal ones (inputs without a transform are kept);
    `key` draws the positions a transform picks, `dims` binds a named bound ("V")."""
    names = [s.name for s in specs]
    if len(inputs) != len(specs):
      raise ValueError(f"family {self.name!r} got {len(inputs)} inputs for the task's "
                       f"{len(specs)} ({names})")
    unknown = ({t.input for t in self.transforms}
               | {t.source for t in self.transforms if isinstance(t, (MatchedRows, ScaledCopy))}
               ) - set(names)
    if unknown:
      raise KeyError(f"family {self.name!r} transforms {sorted(unknown)}, not inputs of the task "
                     f"({names})")
    key = jax.random.key(0) if key is None else key
    return _derived(tuple(inputs), key, family=self, names=tuple(names),
                    dims=tuple(sorted((dims or {}).items())))


# The transforms of a family as one program: op by op, a family compiled up to a dozen XLA
# programs (a mask, a scatter, a where...) for each shape. The nominal inputs come in as
# arguments, so that the draw stays a program of its own and no arithmetic of the transforms
# is compiled together with the draw's.
@functools.partial(jax.jit, static_argnames=("family", "names", "dims"))
def _derived(inputs: tuple[jax.Array, ...], key: jax.Array, *, family: InputFamily,
             names: tuple[str, ...], dims: tuple[tuple[str, int], ...]) -> tuple[jax.Array, ...]:
  nominal = dict(zip(names, inputs, strict=True))
  out = dict(nominal)
  for i, t in enumerate(family.transforms):
    # ZeroRows share the family's key (the same rows); every other transform its own.
    k = key if isinstance(t, ZeroRows) else jax.random.fold_in(key, i + 1)
    out[t.input] = t.transform({**nominal, t.input: out[t.input]}, k, dict(dims))
  return tuple(out[n] for n in names)
