"""Loading the dataset from a local folder or from the Hugging Face Hub.

    from pallasbench_dataset.loading import load, to_pandas
    ds = load("org/pallasbench-robust-gpu-h200")             # DatasetDict: level_1..level_3
    runs = to_pandas("data", "runs")                          # every measurement, one DataFrame
    pinned = load("org/pallasbench-robust-gpu-h200", revision="v1.0")

An existing local directory is loaded as a folder (offline, no Hub call); anything else
must be a Hub repo id `org/name` and is always fetched from the Hub (as
`hf://datasets/org/name`), so a same-named local folder cannot shadow it. `datasets` is
imported only when called: the measuring side does not need it.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Final

from pallasbench_dataset.precision import PRECISIONS

if TYPE_CHECKING:
  import datasets
  import pandas as pd

# The configs besides the precisions' headline tables (`Precision.config`): every measurement,
# its IR, a population's candidates.
OTHER_CONFIGS: Final = ("runs", "artifacts", "candidates")
_REPO_ID: Final = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_HUB_PREFIX: Final = "hf://datasets/"


def _source(path_or_repo: str | os.PathLike[str], revision: str | None) -> str:
  """The path `datasets.load_dataset` gets: a local folder, or the remote-only hf:// form."""
  text = os.fspath(path_or_repo)
  if os.path.isdir(text):
    if revision is not None:
      raise ValueError(f"revision={revision!r} applies to a Hub repo, but {text!r} is a local "
                       "folder; check out that revision of the folder instead")
    return text
  repo = text.removeprefix(_HUB_PREFIX)
  if not _REPO_ID.match(repo):
    raise ValueError(f"{text!r} is neither an existing folder nor a Hub repo id of the form "
                     "'org/name'")
  return _HUB_PREFIX + repo


def configs() -> tuple[str, ...]:
  """The dataset's configs: each registered precision's headline table, in the registry's
  order (default: float32's; bf16), then the others."""
  return (*(p.config for p in PRECISIONS.values()), *OTHER_CONFIGS)


def load(path_or_repo: str | os.PathLike[str], config: str = "default", *,
         revision: str | None = None) -> datasets.DatasetDict:
  """One config of the dataset as a DatasetDict (a precision's headline table, where that
  precision was measured: splits level_1..3; runs, artifacts and candidates: split train).
  `revision` (a tag, branch or commit) pins a Hub version."""
  import datasets  # pylint: disable=import-outside-toplevel,redefined-outer-name
  if config not in configs():
    raise ValueError(f"unknown config {config!r}; configs: {', '.join(configs())}")
  return datasets.load_dataset(_source(path_or_repo, revision), config, revision=revision)


def to_pandas(path_or_repo: str | os.PathLike[str], config: str = "default", *,
              revision: str | None = None) -> pd.DataFrame:
  """One config as a single DataFrame, its splits concatenated in order."""
  import pandas as pd  # pylint: disable=import-outside-toplevel,redefined-outer-name
  dataset = load(path_or_repo, config, revision=revision)
  frames = [dataset[split].to_pandas() for split in dataset]
  return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
