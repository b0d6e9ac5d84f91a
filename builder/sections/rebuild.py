"""The command that rebuilds this folder byte for byte from its own records."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from builder import release
from builder.sections.inputs import CardInputs

def rebuild_command(run_names: Sequence[str], population_names: Sequence[str], *,
                    repo_id: str, hardware: str, headline: str | None,
                    allow_partial: bool, source: str | None = None) -> str:
  """The command that rebuilds this folder where it sits in a checkout (release.FOLDER), from
  its own results, kernel trees and shipped source (`source`, its path in the folder): the
  runs in the order the build took them (a glob where that order is the folder names'), the
  repo id where it is not the default, the headline size where it is not the one the builder
  picks."""
  folder = release.FOLDER
  in_order = list(run_names) == sorted(run_names) and not population_names
  results = ([f"{folder}/results/*"] if in_order
             else [f"{folder}/results/{n}" for n in run_names])
  args = ["--from-results", *results]
  if population_names:
    args += ["--candidates", *(f"{folder}/results/{n}" for n in population_names)]
  args += ["--kernel-trees", folder, "--out", folder]
  if source is not None:
    args += ["--source", f"{folder}/{source}"]
  if repo_id != release.default_repo_id(hardware):
    args += ["--repo-id", repo_id]
  if headline is not None:
    args += ["--headline-size", headline]
  if allow_partial:
    args.append("--allow-partial")
  quoted = [a if a.endswith("/*") else shlex.quote(a) for a in args]
  return "python -m builder.regenerate " + " ".join(quoted)


def context(card: CardInputs) -> Mapping[str, Any]:
  """The build's `rebuild_command`."""
  return {"rebuild": card.rebuild}
