"""The release: its number, its name on the Hub and where it sits in the project, set once.

Everything published names the release through these: the card's load and push examples
(`revision=TAG`, `--tag TAG`), its citation, its rebuild command, and README.md's release
section (a test holds README to them). A new release changes NUMBER; a dataset repository
elsewhere is named with `--repo-id`.
"""

from __future__ import annotations

from typing import Final

NUMBER: Final = 7
TAG: Final = f"v{NUMBER}"            # the Hub tag of the release, e.g. v5
NAME: Final = f"Release {NUMBER}"    # how the card and README.md name it
NAMESPACE: Final = "pallasbench-robust"  # the Hub namespace of the default repo id
REPO_PREFIX: Final = "pallasbench-robust-gpu-"
FOLDER: Final = "data"               # where the release sits in a checkout of the project


def default_repo_id(hardware: str) -> str:
  """`NAMESPACE/pallasbench-robust-gpu-<hardware>`: the repo id a card names without --repo-id."""
  return f"{NAMESPACE}/{REPO_PREFIX}{hardware}"
