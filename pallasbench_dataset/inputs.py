"""Input specs and their distributions: what each task's arrays look like and how to draw them.

A shape is a tuple of dimension names or literal ints (`("M", "K")`, `("L", 4)`); a size
binds the names to ints. A distribution draws one array from a PRNG key, a concrete shape
and the bound dimensions (for bounds such as "ids in [0, V)").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Final, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np

Dim: TypeAlias = str | int
Dims: TypeAlias = Mapping[str, int]

FLOAT32: Final = "float32"
INT32: Final = "int32"


def resolve_shape(shape: tuple[Dim, ...], dims: Dims) -> tuple[int, ...]:
  """Binds a symbolic shape to ints; a clear error for a dimension the size does not define."""
  out = []
  for d in shape:
    if isinstance(d, int):
      out.append(d)
    elif d in dims:
      out.append(int(dims[d]))
    else:
      raise KeyError(f"dimension {d!r} of shape {shape} is not defined by {dict(dims)}")
  return tuple(out)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Normal:
  """Standard normal times `scale`."""
  scale: float = 1.0

  def sample(self, key, shape, dtype, dims: Dims):
    return (self.scale * jax.random.normal(key, shape, jnp.float32)).astype(dtype)

  def describe(self) -> str:
    return "normal" if self.scale == 1.0 else f"normal * {self.scale:g}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Uniform:
  """Uniform in [low, high)."""
  low: float
  high: float

  def sample(self, key, shape, dtype, dims: Dims):
    return jax.random.uniform(key, shape, jnp.float32, self.low, self.high).astype(dtype)

  def describe(self) -> str:
    return f"uniform [{self.low:g}, {self.high:g})"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FanInNormal:
  """Weights: standard normal / sqrt(fan_in), fan_in = product of the contracted axes."""
  contracted_axes: tuple[int, ...] = (0,)

  def sample(self, key, shape, dtype, dims: Dims):
    fan_in = math.prod(shape[a] for a in self.contracted_axes)
    return (jax.random.normal(key, shape, jnp.float32) / math.sqrt(fan_in)).astype(dtype)

  def describe(self) -> str:
    return f"normal / sqrt(fan_in), fan_in = axes {self.contracted_axes}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Integers:
  """Integers uniform in [0, high); `out_of_range` of them replaced by -1 or values >= high."""
  high: Dim
  out_of_range: float = 0.0

  def sample(self, key, shape, dtype, dims: Dims):
    high = self.high if isinstance(self.high, int) else int(dims[self.high])
    k_val, k_oob, k_side, k_far = jax.random.split(key, 4)
    vals = jax.random.randint(k_val, shape, 0, high, jnp.int32)
    if self.out_of_range:
      oob = jax.random.uniform(k_oob, shape) < self.out_of_range
      negative = jax.random.bernoulli(k_side, 0.5, shape)
      far = jax.random.randint(k_far, shape, 1, high + 1, jnp.int32)
      vals = jnp.where(oob, jnp.where(negative, -far, high - 1 + far), vals)
    return vals.astype(dtype)

  def describe(self) -> str:
    text = f"integers uniform in [0, {self.high})"
    if self.out_of_range:
      text += f", {self.out_of_range:.0%} out of range (negative or >= {self.high})"
    return text


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SoftmaxRows:
  """A probability distribution per row: softmax of standard normal draws over the last axis."""

  def sample(self, key, shape, dtype, dims: Dims):
    return jax.nn.softmax(jax.random.normal(key, shape, jnp.float32), axis=-1).astype(dtype)

  def describe(self) -> str:
    return "rows are probability distributions (softmax of normal draws)"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OneHotDNA:
  """A real one-hot encoding (L, 4) of uniformly random A/C/G/T."""

  def sample(self, key, shape, dtype, dims: Dims):
    codes = jax.random.randint(key, shape[:-1], 0, shape[-1])
    return jax.nn.one_hot(codes, shape[-1], dtype=dtype)

  def describe(self) -> str:
    return "one-hot encoding of random A/C/G/T"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DNACodes:
  """Codes 0..3 (A, C, G, T), with `unknown` of them code 4 (N)."""
  unknown: float = 0.02

  def sample(self, key, shape, dtype, dims: Dims):
    k_code, k_n = jax.random.split(key)
    codes = jax.random.randint(k_code, shape, 0, 4, jnp.int32)
    return jnp.where(jax.random.uniform(k_n, shape) < self.unknown, 4, codes).astype(dtype)

  def describe(self) -> str:
    return f"codes 0..3 (A,C,G,T), {self.unknown:.0%} code 4 (N)"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BinaryMask:
  """Floats in {0, 1}, each 0 with probability `zeros`."""
  zeros: float = 0.1

  def sample(self, key, shape, dtype, dims: Dims):
    return (jax.random.uniform(key, shape) >= self.zeros).astype(dtype)

  def describe(self) -> str:
    return f"mask in {{0, 1}}, about {self.zeros:.0%} zeros"


Distribution: TypeAlias = (
    Normal | Uniform | FanInNormal | Integers | SoftmaxRows | OneHotDNA | DNACodes | BinaryMask
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class InputSpec:
  """One input array of a task."""
  name: str
  shape: tuple[Dim, ...]
  dtype: str = FLOAT32
  dist: Distribution = Normal()

  def concrete_shape(self, dims: Dims) -> tuple[int, ...]:
    return resolve_shape(self.shape, dims)

  def sample(self, key, dims: Dims) -> jax.Array:
    return self.dist.sample(key, self.concrete_shape(dims), jnp.dtype(self.dtype), dims)

  def nbytes(self, dims: Dims) -> int:
    return math.prod(self.concrete_shape(dims)) * np.dtype(self.dtype).itemsize
