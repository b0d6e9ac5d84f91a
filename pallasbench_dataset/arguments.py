"""Command-line argument types every command shares (argparse only: no heavy imports)."""

from __future__ import annotations

import argparse


class ListOption(argparse.Action):
  """A list option that takes its values separated by spaces, commas or both: `--tasks relu
  gelu`, `--tasks relu,gelu` and `--tasks relu, gelu` are the same. `choices` and `type` apply
  to each value."""

  def __init__(self, option_strings, dest, *, choices=None, type=str, **kwargs):  # pylint: disable=redefined-builtin
    self.allowed, self.convert = choices, type
    super().__init__(option_strings, dest, nargs="+", **kwargs)

  def __call__(self, parser, namespace, values, option_string=None):
    tokens = [t for value in values for t in value.replace(",", " ").split()]
    try:
      converted = [self.convert(t) for t in tokens]
    except ValueError:
      parser.error(f"argument {option_string}: {values} are not all {self.convert.__name__}s")
    bad = [t for t, v in zip(tokens, converted) if self.allowed is not None and v not in self.allowed]
    if not tokens:
      parser.error(f"argument {option_string}: expected at least one value")
    if bad:
      parser.error(f"argument {option_string}: invalid choice(s) {bad} (choose from "
                   f"{', '.join(map(str, self.allowed))}, separated by spaces or commas)")
    setattr(namespace, self.dest, converted)
