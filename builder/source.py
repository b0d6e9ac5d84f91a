"""The project's source shipped with a release, so that a user of the Hub alone can re-measure.

The source is a `git archive` tar of the commit that measured the release's records (the
commit every manifest and record names), without the dataset folder (`data/`) and the raw
records of past sessions (`docs/runs/`): the judge, the tasks, both kernel trees, the
builder and the tests at that commit. `git archive` writes the commit's id into the tar's
pax header (`git get-tar-commit-id < FILE` prints it); the build reads it back and refuses a
tar of another commit. A tar, not a folder of files, so that the folder keeps one copy of
the code that stays byte for byte what git wrote.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from typing import Final

from builder.records import BuildError, Run

FOLDER: Final = "source"                     # where the tar sits in the dataset folder
EXCLUDED: Final = ("data", "docs/runs")      # left out of the archive
PREFIX: Final = "pallasbench-robust"


def name_of(commit: str) -> str:
  """The tar's file name, e.g. `pallasbench-robust-133eada3ebb9.tar`; it unpacks into a
  folder of the same name without `.tar`."""
  return f"{PREFIX}-{commit[:12]}.tar"


def measuring_commit(runs: Sequence[Run]) -> str:
  """The one commit the runs' manifests and records name; a BuildError when they name none or
  several (a source of one commit could not have measured them all)."""
  commits = {c for run in runs
             for c in (run.manifest.git_commit, *(s.git_commit for s in run.manifest.resumes),
                       *(r.environment.git_commit for r in run.records))
             if c}
  if len(commits) != 1:
    raise BuildError(f"the runs name {len(commits)} commits ({sorted(commits)}); a source is "
                     "shipped only for runs measured at one commit: build without --source")
  return commits.pop()


def commit_of(tar: pathlib.Path) -> str | None:
  """The commit id `git archive` wrote into the tar's pax header; None if it holds none."""
  try:
    with tarfile.open(tar) as archive:
      return archive.pax_headers.get("comment")
  except (OSError, tarfile.TarError) as e:
    raise BuildError(f"{str(tar)!r} is not a readable tar ({e}); make one with "
                     "`python -m builder.regenerate ... --source .` in a checkout") from e


def ship(source: pathlib.Path, commit: str, folder: pathlib.Path) -> str:
  """Writes the source of `commit` into `folder`/source/ and returns its path there.

  `source` is a tar `git archive` made of the commit (a dataset folder's own, when
  rebuilding), or a git checkout holding the commit, which is archived. A tar of another
  commit, or a checkout without it, is a BuildError."""
  dest = folder / FOLDER / name_of(commit)
  dest.parent.mkdir(parents=True, exist_ok=True)
  if source.is_dir():
    _archive(source, commit, dest)
  else:
    shutil.copyfile(source, dest)
  found = commit_of(dest)
  if found != commit:
    raise BuildError(f"{str(source)!r} is the source of commit {found}, but the records were "
                     f"measured at {commit}; pass a checkout holding {commit[:12]} or its tar")
  return f"{FOLDER}/{dest.name}"


def _archive(checkout: pathlib.Path, commit: str, dest: pathlib.Path) -> None:
  excluded = [f":(exclude){path}" for path in EXCLUDED]
  command = ["git", "-C", str(checkout), "archive", "--format=tar",
             f"--prefix={dest.name.removesuffix('.tar')}/", "-o", str(dest.resolve()), commit,
             "--", ".", *excluded]
  proc = subprocess.run(command, capture_output=True, text=True, check=False)
  if proc.returncode != 0:
    raise BuildError(f"cannot archive commit {commit[:12]} of {str(checkout)!r}: "
                     f"{proc.stderr.strip()}; pass a checkout that holds it (git fetch) or a "
                     "tar `git archive` made of it")
