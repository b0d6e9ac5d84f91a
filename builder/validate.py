"""Checking a dataset folder the way users will read it: `datasets.load_dataset(folder, config)`.

Used by the build (before the folder replaces the old one) and by the push (before
anything is uploaded): every config of the card loads offline, its features equal the
schema's and the card's `dataset_info`, and its split sizes equal the card's.
"""

from __future__ import annotations

import errno
import pathlib
import tempfile
import types
from collections.abc import Mapping
from typing import Final

from pallasbench_dataset import schema
from pallasbench_dataset.precision import PRECISIONS

# The configs besides the precisions' headline tables, and the type of their rows.
EXPECTED_FEATURES: Final = {"runs": schema.RunRow,
                            "artifacts": schema.ArtifactRow, "candidates": schema.CandidateRow,
                            "sft": schema.SftRow, "preference": schema.PreferenceRow}
# Failures of the disk the check writes its cache to, not of the folder being checked.
_DISK_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def config_features() -> dict[str, type]:
  """Every config a card may declare and the type of its rows, in the card's order: each
  precision's headline table (`Precision.config`: `default`, `bf16`), then EXPECTED_FEATURES."""
  return {**{p.config: schema.SummaryRow for p in PRECISIONS.values()}, **EXPECTED_FEATURES}


class FolderError(ValueError):
  """The folder is not a loadable, self-consistent dataset; rebuild it with builder.build."""


def _card_yaml(folder: pathlib.Path) -> tuple[list[dict], dict[str, dict]]:
  from huggingface_hub import DatasetCard  # pylint: disable=import-outside-toplevel
  readme = folder / "README.md"
  if not readme.is_file():
    raise FolderError(f"{folder} has no README.md; build it with builder.build first")
  data = DatasetCard.load(readme).data.to_dict()
  configs, infos = data.get("configs"), data.get("dataset_info")
  if not configs or not infos:
    raise FolderError(f"{readme} lacks `configs:` or `dataset_info:`; rebuild the folder")
  infos = [infos] if isinstance(infos, dict) else infos
  return configs, {i.get("config_name", "default"): i for i in infos}


def _check_config(folder: pathlib.Path, name: str, info: dict, cache: str) -> dict[str, int]:
  import datasets  # pylint: disable=import-outside-toplevel
  expected = schema.features_of(config_features()[name])
  try:
    loaded = datasets.load_dataset(str(folder), name, cache_dir=cache)
  except datasets.exceptions.NonMatchingSplitsSizesError as e:
    raise FolderError(f"{folder}: the card's row counts for {name!r} do not match the files "
                      f"(stale dataset_info): rebuild the folder. {e}") from e
  except OSError as e:
    if e.errno not in _DISK_ERRNOS:
      raise FolderError(f"{folder}: config {name!r} does not load: {type(e).__name__}: {e}") from e
    raise FolderError(f"cannot check {folder}: loading config {name!r} failed writing its "
                      f"cache in {cache} ({e.strerror}); free space and retry") from e
  except Exception as e:  # datasets raises many types; all mean "does not load"
    raise FolderError(f"{folder}: config {name!r} does not load: {type(e).__name__}: {e}") from e
  card_features = datasets.Features._from_yaml_list(info.get("features", []))
  card_splits = {s["name"]: s["num_examples"] for s in info.get("splits", [])}
  counts = {split: ds.num_rows for split, ds in loaded.items()}
  for split, ds in loaded.items():
    if ds.features != expected:
      raise FolderError(f"{folder}: {name}/{split} features differ from schema.py's; rebuild")
  if card_features != expected:
    raise FolderError(f"{folder}: the card's dataset_info features of {name!r} are stale")
  if card_splits != counts:
    raise FolderError(f"{folder}: the card says {name!r} has {card_splits} rows, the files "
                      f"hold {counts}; rebuild the folder")
  return counts


def validate_folder(folder: pathlib.Path) -> Mapping[str, Mapping[str, int]]:
  """Row counts per config and split; FolderError when the folder would mislead a user."""
  folder = pathlib.Path(folder)
  configs, infos = _card_yaml(folder)
  names = [c["config_name"] for c in configs]
  if set(names) != set(infos):
    raise FolderError(f"{folder}: configs {sorted(names)} but dataset_info for {sorted(infos)}")
  known = config_features()
  unknown = sorted(set(names) - set(known))
  if unknown:
    raise FolderError(f"{folder}: unexpected configs {unknown}; configs: {list(known)}")
  if "default" not in names or "runs" not in names:
    raise FolderError(f"{folder}: the card must declare the `default` and `runs` configs")
  with tempfile.TemporaryDirectory(prefix="pallasbench-validate-") as cache:
    order = sorted(names, key=list(known).index)  # default, bf16, runs, artifacts, ...
    counts = {name: _check_config(folder, name, infos[name], cache) for name in order}
  return types.MappingProxyType(counts)
