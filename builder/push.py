"""Publishing a built dataset folder to the Hugging Face Hub in ONE commit.

    from builder.push import push_folder
    result = push_folder(Path("data"), "org/pallasbench-robust-gpu-h200", tag="v1.0")

The folder is re-validated first (every config loads offline and matches the card). Then
the repo is created if needed, and one `create_commit` adds every file of the folder and
deletes every remote file the folder no longer has (`.gitattributes` kept), on top of the
commit the remote files were listed from (`parent_commit`: if someone pushed meanwhile the
Hub refuses, nothing is half-applied). An optional tag is placed on the commit just made.

Why `create_commit` and not `upload_folder(delete_patterns=...)`: with `hf_xet` installed
(the default), huggingface_hub 2.4's `upload_folder` runs a pipelined upload that commits
large folders in several batches and, when a commit fails, retries it "in smaller chunks"
(`_upload_pipeline._commit_with_split`); either can leave a half-pushed dataset on `main`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import re
from collections.abc import Iterator
from typing import Final

from builder.validate import validate_folder

log = logging.getLogger(__name__)

REPO_TYPE: Final = "dataset"
_NAME: Final = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID: Final = re.compile(rf"^({_NAME})/({_NAME})$")
KEEP_REMOTE: Final = frozenset({".gitattributes"})


class PushError(RuntimeError):
  """The push did not happen (or only partly: the message says exactly what exists)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PushResult:
  repo_id: str
  revision: str                  # the branch committed to ("main" for a pull request's base)
  commit_oid: str
  commit_url: str
  pr_url: str | None
  tag: str | None
  uploaded: tuple[str, ...]      # every path of the folder (unchanged files are not re-sent)
  deleted: tuple[str, ...]       # remote paths removed in the same commit
  rows: dict[str, dict[str, int]]

  def describe(self) -> str:
    where = self.pr_url or f"{self.repo_id}@{self.revision}"
    tag = f", tagged {self.tag}" if self.tag else ""
    return (f"pushed to {where}: commit {self.commit_oid}{tag} ({len(self.uploaded)} files, "
            f"{len(self.deleted)} stale files deleted)\n  {self.commit_url}")


def check_repo_id(repo_id: str) -> None:
  """`org/name` under the Hub's naming rules, else ValueError saying what is wrong."""
  match = _REPO_ID.match(repo_id or "")
  problem = None
  if match is None:
    problem = ("must be 'org/name': two parts of letters, digits, '-', '_' or '.', each "
               "starting and ending with a letter or digit, at most 96 characters")
  elif any(".." in part or "--" in part for part in match.groups()):
    problem = "must not contain '..' or '--'"
  elif match.group(2).endswith(".git"):
    problem = "must not end with '.git'"
  if problem:
    raise ValueError(f"invalid repo id {repo_id!r}: it {problem}; e.g. "
                     "'my-org/pallasbench-robust-gpu-h200'")


def find_token(token: str | None) -> str:
  """The explicit token, else HF_TOKEN, else the `hf auth login` store; PushError if none."""
  from huggingface_hub import get_token  # pylint: disable=import-outside-toplevel
  found = token or os.environ.get("HF_TOKEN") or get_token()
  if not found:
    raise PushError("no Hugging Face token: run `hf auth login` (a token with write access), "
                    "export HF_TOKEN=hf_..., or pass token=...")
  return found


def token_owner(token: str | None = None) -> str:
  """The user name the token belongs to (asks the Hub's whoami)."""
  from huggingface_hub import HfApi  # pylint: disable=import-outside-toplevel
  token = find_token(token)
  with _hub_errors("your account", "asking the Hub who the token belongs to"):
    return HfApi(token=token).whoami()["name"]


def _local_files(folder: pathlib.Path) -> list[str]:
  """Every file the build wrote, as repo paths, sorted; hidden files are never uploaded."""
  paths = []
  for path in sorted(folder.rglob("*")):
    rel = path.relative_to(folder)
    if path.is_file() and not any(part.startswith(".") for part in rel.parts):
      paths.append(rel.as_posix())
  return paths


def _description(folder: pathlib.Path) -> str:
  """Where the records were measured, from the manifests the folder carries."""
  lines = []
  for manifest in sorted(folder.glob("results/*/manifest.json")):
    data = json.loads(manifest.read_text())
    env = data.get("environment", {})
    lines.append(f"{manifest.parent.name}: {env.get('device_kind')}, driver {env.get('driver')}, "
                 f"CUDA {env.get('cuda')}, jax {env.get('jax')}, commit {data.get('git_commit')}, "
                 f"{data.get('started_at')} .. {data.get('finished_at')}")
  return "Built by builder.build.\n\n" + "\n".join(lines)


@contextlib.contextmanager
def _hub_errors(repo_id: str, step: str) -> Iterator[None]:
  """HTTP failures as PushError messages that say what to do."""
  import httpx2  # pylint: disable=import-outside-toplevel  (huggingface_hub 2.x's HTTP client)
  from huggingface_hub.errors import HfHubHTTPError  # pylint: disable=import-outside-toplevel
  try:
    yield
  except HfHubHTTPError as e:
    status = e.response.status_code if e.response is not None else None
    server = e.server_message or str(e)
    advice = {
        401: "the Hub rejected the token: run `hf auth login` or set HF_TOKEN to a valid token",
        403: f"the token has no write permission on {repo_id}: use a token with write access "
             "to this repo or its organisation",
        404: f"{repo_id} or the revision was not found (a repo the token cannot see looks the "
             "same): check the repo id and revision",
        409: "a conflicting change exists (repo, branch or tag already there, or a concurrent "
             "push): check the refs and retry",
        412: "the branch moved while pushing (someone else pushed): nothing was committed; "
             "push again",
        413: "the upload is too large for the Hub",
    }.get(status, f"the Hub rejected the upload (HTTP {status}); nothing was committed")
    raise PushError(f"{step} failed for {repo_id}: {advice}. Server said: {server}") from e
  except (OSError, httpx2.TransportError) as e:  # connection refused, DNS, TLS, timeouts
    raise PushError(f"{step} failed for {repo_id}: cannot reach the Hub ({e})") from e


def push_folder(folder: pathlib.Path, repo_id: str, *, revision: str | None = None,
                create_pr: bool = False, tag: str | None = None, token: str | None = None,
                commit_message: str | None = None, private: bool | None = None) -> PushResult:
  """Validates `folder` and publishes it to the dataset repo `repo_id` in one commit.

  `revision`: a branch to commit to (created from main if missing); `create_pr`: open a pull
  request against main instead of committing to it; `tag`: tag the commit just made.
  """
  check_repo_id(repo_id)
  folder = pathlib.Path(folder)
  if create_pr and revision not in (None, "main"):
    raise ValueError("create_pr opens a pull request against main; do not pass a revision too")
  token = find_token(token)
  rows = {c: dict(s) for c, s in validate_folder(folder).items()}
  from huggingface_hub import HfApi  # pylint: disable=import-outside-toplevel
  api = HfApi(token=token)
  branch = revision or "main"
  with _hub_errors(repo_id, "creating the repo"):
    api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
    if branch != "main":
      api.create_branch(repo_id, branch=branch, repo_type=REPO_TYPE, exist_ok=True)
  files = _local_files(folder)
  with _hub_errors(repo_id, "the commit"):
    info, deleted = _commit(api, repo_id, folder, files, branch=branch, create_pr=create_pr,
                            message=commit_message or _default_message(rows))
  if tag:
    with _hub_errors(repo_id, f"tagging commit {info.oid} as {tag!r} (the commit itself "
                              "succeeded)"):
      _tag(api, repo_id, tag, info.oid, commit_message or f"PallasBench-Robust {tag}")
  log.info("pushed %s to %s (%s)", folder, info.commit_url, info.pr_url or branch)
  return PushResult(repo_id=repo_id, revision=branch, commit_oid=info.oid,
                    commit_url=info.commit_url, pr_url=info.pr_url, tag=tag,
                    uploaded=tuple(files), deleted=deleted, rows=rows)


def _tag(api, repo_id: str, tag: str, oid: str, message: str) -> None:
  """Tags `oid`; a tag already on that very commit (an unchanged re-push) is fine."""
  refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
  existing = {t.name: t.target_commit for t in refs.tags}
  if existing.get(tag) == oid:
    return
  api.create_tag(repo_id, tag=tag, revision=oid, repo_type=REPO_TYPE, tag_message=message)


def _default_message(rows: dict[str, dict[str, int]]) -> str:
  return f"Regenerate PallasBench-Robust ({sum(rows['default'].values())} tasks)"


def _commit(api, repo_id: str, folder: pathlib.Path, files: list[str], *, branch: str,
            create_pr: bool, message: str):
  """One create_commit: add every local file, delete remote files the folder lacks."""
  from huggingface_hub import (  # pylint: disable=import-outside-toplevel
      CommitOperationAdd, CommitOperationDelete)
  head = api.repo_info(repo_id, repo_type=REPO_TYPE, revision=branch).sha
  remote = api.list_repo_files(repo_id, repo_type=REPO_TYPE, revision=head)
  deleted = tuple(sorted(set(remote) - set(files) - KEEP_REMOTE))
  operations = [CommitOperationDelete(path_in_repo=p) for p in deleted]
  operations += [CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(folder / p))
                 for p in files]
  info = api.create_commit(repo_id, operations, commit_message=message,
                           commit_description=_description(folder), repo_type=REPO_TYPE,
                           revision=branch, create_pr=create_pr, parent_commit=head)
  return info, deleted
