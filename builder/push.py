"""Publishing a built dataset folder to the Hugging Face Hub in ONE commit.

    from builder.push import preflight, push_folder
    repo_id = preflight("org/pallasbench-robust-gpu-h200")   # before measuring anything
    result = push_folder(Path("data"), repo_id, tag="v5")

The folder is re-validated first (every config loads offline and matches the card). Then
the repo is created if needed, and one `create_commit` adds every file of the folder and
deletes every remote file the folder no longer has (`.gitattributes` kept), on top of the
commit the remote files were listed from (`parent_commit`: if someone pushed meanwhile the
Hub refuses, nothing is half-applied). An optional tag is placed on the commit just made.
When the commit call itself fails on the Hub's side (HTTP 5xx) or the connection drops after
it was sent, the commit may have landed: the error says so and where to look, never
"nothing was committed".

Why `create_commit` and not `upload_folder(delete_patterns=...)`: with `hf_xet` installed
(the default), huggingface_hub 2.4's `upload_folder` runs a pipelined upload that commits
large folders in several batches and, when a commit fails, retries it "in smaller chunks"
(`_upload_pipeline._commit_with_split`); either can leave a half-pushed dataset on `main`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import logging
import os
import pathlib
import re
from collections.abc import Iterator
from typing import Any, Final

from builder import release
from builder.validate import validate_folder

log = logging.getLogger(__name__)

REPO_TYPE: Final = "dataset"
_NAME: Final = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID: Final = re.compile(rf"^({_NAME})/({_NAME})$")
KEEP_REMOTE: Final = frozenset({".gitattributes"})
REPO_PREFIX: Final = release.REPO_PREFIX  # default repo name: this + the hardware slug
HUB_PACKAGES: Final = ("datasets", "huggingface_hub", "pyarrow")  # building and pushing need them


class PushError(RuntimeError):
  """The push did not happen (or only partly: the message says exactly what exists)."""


class PreflightError(ValueError):
  """A push could not succeed (token, repo id or permission); found before measuring."""


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
    raise PushError("no Hugging Face token: run `hf auth login` (a token with write access) "
                    "or export HF_TOKEN=hf_... before the command (from Python, pass "
                    "push_folder(..., token=...))")
  return found


def token_owner(token: str | None = None) -> str:
  """The user name the token belongs to (asks the Hub's whoami)."""
  from huggingface_hub import HfApi  # pylint: disable=import-outside-toplevel
  token = find_token(token)
  with _hub_errors("your account", "asking the Hub who the token belongs to", note=""):
    return HfApi(token=token).whoami()["name"]


def preflight(repo_id: str | None, *, hardware: str | None = None, token: str | None = None,
              revision: str | None = None, create_pr: bool = False) -> str:
  """Checks that a push to `repo_id` can work, before minutes of measuring; returns the repo id.

  `repo_id` None means `<the token's user>/pallasbench-robust-gpu-<hardware>`. Checked: the
  id's form, a token (`token`, HF_TOKEN or `hf auth login`) that the Hub accepts and that is
  not read-only, and write access: an existing repo through the Hub's write check, a new one
  through its namespace (the token's user, or an organisation it belongs to with more than
  read rights). PreflightError (a ValueError) names what is missing and how to fix it.
  """
  if create_pr and revision not in (None, "main"):
    raise PreflightError("--create-pr opens a pull request against main; do not pass --revision "
                         "too")
  if repo_id is not None:
    check_repo_id(repo_id)
  _check_packages()
  try:
    token = find_token(token)
    from huggingface_hub import HfApi  # pylint: disable=import-outside-toplevel
    api = HfApi(token=token)
    with _hub_errors(repo_id or "your account", "checking the Hub token", note=""):
      who = api.whoami()
    repo_id = repo_id or _default_repo_id(who, hardware)
    _check_write(api, repo_id, who)
  except PushError as e:
    raise PreflightError(f"--push cannot work: {e}") from None
  return repo_id


def _check_packages() -> None:
  """The GPU machine measures without `datasets`: say so before measuring, not after."""
  missing = []
  for name in HUB_PACKAGES:
    try:
      importlib.import_module(name)
    except ImportError:
      missing.append(name)
  if missing:
    raise PreflightError(f"--push builds and publishes the dataset, which needs "
                         f"{', '.join(missing)}: install them (pip install -e \".[hub]\"), or "
                         "measure here with --measure-only and build and push elsewhere")


def _default_repo_id(who: dict[str, Any], hardware: str | None) -> str:
  if not hardware:
    raise PreflightError("--push without --repo-id names the repo after the GPU "
                         f"({REPO_PREFIX}<hardware>), which is not known before measuring: pass "
                         "--repo-id ORG/NAME")
  repo_id = f"{who['name']}/{REPO_PREFIX}{hardware}"
  check_repo_id(repo_id)
  return repo_id


def _check_write(api, repo_id: str, who: dict[str, Any]) -> None:
  """PushError unless the token can write to `repo_id`, or create it when it does not exist."""
  from huggingface_hub.errors import (  # pylint: disable=import-outside-toplevel
      RepositoryNotFoundError)
  user = who.get("name")
  if (who.get("auth") or {}).get("accessToken", {}).get("role") == "read":
    raise PushError(f"the token of {user!r} is read-only: create one with write access "
                    "(https://huggingface.co/settings/tokens), then `hf auth login` or set "
                    "HF_TOKEN")
  try:
    with _hub_errors(repo_id, "checking write access", note=""):
      api.auth_check(repo_id, repo_type=REPO_TYPE, write=True)
    return
  except PushError as e:
    if not isinstance(e.__cause__, RepositoryNotFoundError):
      raise
  namespace = repo_id.split("/")[0]
  orgs = {o.get("name"): o.get("roleInOrg") for o in who.get("orgs") or ()}
  if namespace != user and namespace not in orgs:
    known = ", ".join(sorted(o for o in orgs if o)) or "none"
    raise PushError(f"{repo_id} does not exist, and {user!r} cannot create it: {namespace!r} is "
                    f"neither the token's user nor one of its organisations ({known}); check the "
                    "repo id, or create the repo first")
  if orgs.get(namespace) == "read":
    raise PushError(f"{repo_id} does not exist, and {user!r} has only the read role in "
                    f"{namespace!r}: ask for the write role, or use another namespace")


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


def _advice(status: int | None, repo_id: str, note: str) -> str:
  """What a refused request means, then `note` (before or at the commit: nothing committed)."""
  advice = {
      401: "the Hub rejected the token: run `hf auth login` or set HF_TOKEN to a valid token",
      403: f"the token has no write permission on {repo_id}: use a token with write access "
           "to this repo or its organisation",
      404: f"{repo_id} or the revision was not found (a repo the token cannot see looks the "
           "same): check the repo id and revision",
      409: "a conflicting change exists (repo, branch or tag already there, or a concurrent "
           "push): check the refs and retry",
      412: "someone else pushed to the branch while this push ran (it moved past the commit "
           "the remote files were listed from); push again",
      413: "the upload is too large for the Hub",
  }.get(status, f"the Hub refused the request (HTTP {status})")
  return advice + note


def _request_path(error: Exception) -> str:
  """The URL path of the request that failed ('' when the error does not say)."""
  try:
    response = getattr(error, "response", None)
    request = response.request if response is not None else error.request
    return request.url.path
  except (AttributeError, RuntimeError):
    return ""


def _may_have_landed(error: Exception, changes: str) -> bool:
  """The request that changes the repo (its URL path holds `changes`) was, or may have been,
  received: a 5xx answer, or a connection that failed after sending. Failures of the requests
  before it (upload checks, LFS uploads) are not; neither is an error that names no request
  but a refused connection."""
  import httpx2  # pylint: disable=import-outside-toplevel
  path = _request_path(error)
  if path and changes not in path:
    return False
  not_sent = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.ProxyError,
              httpx2.LocalProtocolError)
  if isinstance(error, httpx2.TransportError):
    return not isinstance(error, not_sent)
  status = getattr(getattr(error, "response", None), "status_code", None)
  return status is not None and status >= 500


_NOTHING: Final = "; nothing was committed"


@contextlib.contextmanager
def _hub_errors(repo_id: str, step: str, *, check: str | None = None, changes: str = "/commit/",
                note: str = _NOTHING) -> Iterator[None]:
  """HTTP failures as PushError messages that say what to do.

  `check`: for a step whose request changes the repo (its URL path holds `changes`), how to
  see whether it landed; a 5xx or a dropped connection on that request then says the outcome
  is unknown. `note` ends the other messages (what is known not to have happened).
  """
  import httpx2  # pylint: disable=import-outside-toplevel  (huggingface_hub 2.x's HTTP client)
  from huggingface_hub.errors import HfHubHTTPError  # pylint: disable=import-outside-toplevel
  try:
    yield
  except (HfHubHTTPError, httpx2.TransportError) as e:
    if check is not None and _may_have_landed(e, changes):
      raise PushError(f"{step} failed for {repo_id} with an unknown outcome ({_what(e)}): it may "
                      f"have landed. Check {check} before pushing again; a push of the same "
                      "folder on top of it makes no new commit") from e
    if isinstance(e, httpx2.TransportError):
      raise PushError(f"{step} failed for {repo_id}: cannot reach the Hub ({e}){note}") from e
    status = e.response.status_code if e.response is not None else None
    raise PushError(f"{step} failed for {repo_id}: {_advice(status, repo_id, note)}. "
                    f"Server said: {e.server_message or e}") from e
  except OSError as e:
    if isinstance(e, (ConnectionError, TimeoutError)) or e.filename is None:
      raise PushError(f"{step} failed for {repo_id}: cannot reach the Hub ({e}){note}") from e
    raise PushError(f"{step} failed for {repo_id}: cannot read {e.filename} ({e.strerror})"
                    f"{note}") from e


def _what(error: Exception) -> str:
  status = getattr(getattr(error, "response", None), "status_code", None)
  if status is not None:
    return f"HTTP {status}: {getattr(error, 'server_message', None) or error}"
  return f"the connection failed after the request was sent: {type(error).__name__}: {error}"


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
  with _hub_errors(repo_id, "the commit", check=_commits_page(api, repo_id, branch, create_pr)):
    info, deleted = _commit(api, repo_id, folder, files, branch=branch, create_pr=create_pr,
                            message=commit_message or _default_message(rows))
  if tag:
    with _hub_errors(repo_id, f"tagging commit {info.oid} as {tag!r} (the commit itself "
                              "succeeded)", note="", changes="/tag/",
                     check=f"the repo's tags (HfApi().list_repo_refs({repo_id!r}, "
                           "repo_type='dataset'))"):
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


def _commits_page(api, repo_id: str, branch: str, create_pr: bool) -> str:
  """Where a user sees whether a commit landed: the branch's history, or the pull requests."""
  base = f"{api.endpoint}/datasets/{repo_id}"
  return f"{base}/discussions (pull requests)" if create_pr else f"{base}/commits/{branch}"


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
