"""Input families: a task's inputs beyond its nominal draw, derived from that draw as data.

A family maps some of the nominal inputs affinely (`x + 100`, `x * 0.01`): the judge checks a
kernel on every family of its task as on the nominal draw (see judge/checks.py). Kept apart
from inputs.py, whose source the dataset's JAX_Code_Functional cells carry.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from pallasbench_dataset.inputs import InputSpec
from pallasbench_dataset.precision import PRECISIONS


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Affine:
  """Input `input` of the nominal draw mapped to `scale * input + shift`, in its own dtype."""
  input: str
  scale: float = 1.0
  shift: float = 0.0

  def apply(self, x: jax.Array) -> jax.Array:
    return (x * jnp.asarray(self.scale, x.dtype) + jnp.asarray(self.shift, x.dtype)).astype(x.dtype)

  def describe(self) -> str:
    text = self.input if self.scale == 1.0 else f"{self.input} * {self.scale:g}"
    if self.shift:
      text += f" {'+' if self.shift > 0 else '-'} {abs(self.shift):g}"
    return text


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class InputFamily:
  """Inputs beyond the nominal draw: the nominal inputs with some of them mapped affinely.

  The judge checks a kernel on every family of its task (a fresh seed each) as on the
  nominal draw, with the same tolerance; a family is chosen where the float64 reference is
  well conditioned, so that the float32 XLA baseline passes it (tests/test_input_families.py).
  """
  name: str                       # short, unique within the task: "shifted"
  why: str                        # what the family tests, in the task's terms
  transforms: tuple[Affine, ...]
  # The precisions at which the family is well conditioned (the XLA baseline at that
  # precision passes it); a task at another precision leaves it out.
  precisions: tuple[str, ...] = PRECISIONS

  @property
  def formula(self) -> str:
    """How the inputs are derived, for the reasons: 'x + 100'."""
    return ", ".join(t.describe() for t in self.transforms)

  @property
  def description(self) -> str:
    """One line for the card: 'x + 100: softmax is shift-invariant'."""
    return f"{self.formula}: {self.why}"

  def derive(self, inputs: tuple[jax.Array, ...], specs: tuple[InputSpec, ...]) -> tuple[jax.Array, ...]:
    """The family's inputs from the nominal ones (inputs without a transform are kept)."""
    by_name = {t.input: t for t in self.transforms}
    unknown = set(by_name) - {s.name for s in specs}
    if unknown:
      raise KeyError(f"family {self.name!r} transforms {sorted(unknown)}, not inputs of the task "
                     f"({[s.name for s in specs]})")
    return tuple(by_name[s.name].apply(x) if s.name in by_name else x
                 for x, s in zip(inputs, specs, strict=True))
