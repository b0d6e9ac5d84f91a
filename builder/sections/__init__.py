"""The card's sections, in the card's order. Each is a module here whose
`context(card: CardInputs) -> Mapping` gives the values its partial,
`templates/sections/<module>.md.j2`, shows; the top template, `templates/README.md.j2`, only
includes the partials in this order. A new section is one module, one partial and its place
in SECTIONS.

A partial may also name values another section gives (the opening's repo id, headline and
configs; whether the release is partial, has candidates or repeats); no two sections give the
same name, and every name a partial reads is given by some section."""

from __future__ import annotations

import types
from typing import Final

from builder.sections import (
    artifacts, candidates, citation, compile_time, contact, contents, corrections, fine_tuning,
    fix, gaps, hardware, intro, license, limitations, loading, protocol, provenance, rebuild,
    regenerate, reproducibility, results, source)

SECTIONS: Final[tuple[types.ModuleType, ...]] = (
    intro, contents, hardware, protocol, results, gaps, artifacts, reproducibility, compile_time,
    candidates, fine_tuning, corrections, loading, fix, source, rebuild, regenerate, limitations,
    provenance, contact, citation, license)


def partial(section: types.ModuleType) -> str:
  """The section's partial, as the top template includes it (relative to templates/)."""
  return f"sections/{section.__name__.rpartition('.')[2]}.md.j2"
