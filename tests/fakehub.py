"""A small Hugging Face Hub on 127.0.0.1 for tests: the routes huggingface_hub 2.x and datasets
5.x use to create a dataset repo, commit to it (regular files, LFS objects, deletions, pull
requests, branches, tags) and read it back (repo info, refs, tree, paths-info, resolve).

State lives in memory: a repo is a dict of commits (each a full snapshot of its files) and
refs. Auth: the user `tester`, its organisations (`HubState.orgs`, name -> role), rejected and
read-only token lists; no Xet (clients must set HF_HUB_DISABLE_XET=1), no viewer. Requests it
does not know are answered 404 and recorded in `Hub.unhandled`, so a test can assert the
client stayed on known ground. Failure switches on `HubState` make the commit call fail
before or after it lands, or race with another push.

    with FakeHub() as hub:              # hub.endpoint = "http://127.0.0.1:PORT"
      ...; hub.repo("org/name").files("main")
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import http.server
import json
import re
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.png filter=lfs diff=lfs merge=lfs -text\n"
_LFS_SUFFIXES = (".parquet", ".png")
_DATE = "2026-11-20T12:00:00.000Z"


def git_blob_sha1(data: bytes) -> str:
  return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclasses.dataclass
class Commit:
  oid: str
  parent: str | None
  title: str
  message: str
  files: dict[str, bytes]


@dataclasses.dataclass
class Repo:
  repo_id: str
  private: bool
  commits: dict[str, Commit] = dataclasses.field(default_factory=dict)
  branches: dict[str, str] = dataclasses.field(default_factory=dict)
  tags: dict[str, str] = dataclasses.field(default_factory=dict)
  prs: dict[int, str] = dataclasses.field(default_factory=dict)  # number -> head commit

  def resolve(self, rev: str) -> Commit | None:
    rev = urllib.parse.unquote(rev)
    if rev in self.branches:
      return self.commits[self.branches[rev]]
    if rev in self.tags:
      return self.commits[self.tags[rev]]
    match = re.fullmatch(r"refs/pr/(\d+)", rev)
    if match and int(match.group(1)) in self.prs:
      return self.commits[self.prs[int(match.group(1))]]
    return self.commits.get(rev)

  def files(self, rev: str = "main") -> dict[str, bytes]:
    commit = self.resolve(rev)
    return dict(commit.files) if commit else {}

  def history(self, rev: str = "main") -> list[Commit]:
    out, commit = [], self.resolve(rev)
    while commit is not None:
      out.append(commit)
      commit = self.commits.get(commit.parent) if commit.parent else None
    return out


class HubState:
  """Everything the server knows; tests read it and set the failure switches."""

  def __init__(self) -> None:
    self.repos: dict[str, Repo] = {}
    self.lfs: dict[str, bytes] = {}
    self.unhandled: list[str] = []
    self.requests: list[str] = []
    self.reject_commit: tuple[int, str] | None = None   # (status, message) for every commit
    # After the commit has landed: "500" answers Internal Server Error, "drop" closes the
    # connection without an answer (the client cannot know the commit exists).
    self.fail_commit: str | None = None
    # Called with (state, repo) when a commit arrives, before its parent is checked: a push
    # that lands in between (a concurrent push).
    self.before_commit: Callable[[HubState, Repo], None] | None = None
    self.commit_headers: list[dict[str, Any]] = []     # the header line of every commit call
    self.fail_requests: dict[str, int] = {}            # URL path fragment -> status answered
    self.rejected_tokens: set[str] = set()             # answered 401
    self.readonly_tokens: set[str] = set()             # writes answered 403; whoami role "read"
    self.user = "tester"
    self.orgs: dict[str, str] = {"org": "write"}        # the user's organisations and roles
    self.lock = threading.Lock()
    self._counter = 0

  def new_oid(self, *parts: str) -> str:
    self._counter += 1
    return hashlib.sha1("\0".join((str(self._counter), *parts)).encode()).hexdigest()

  def add_commit(self, repo: Repo, parent: str | None, title: str, message: str,
                 files: dict[str, bytes]) -> Commit:
    commit = Commit(oid=self.new_oid(repo.repo_id, title, *sorted(files)), parent=parent,
                    title=title, message=message, files=files)
    repo.commits[commit.oid] = commit
    return commit


class _Error(Exception):
  def __init__(self, status: int, message: str, code: str | None = None, **extra: Any):
    super().__init__(message)
    self.status, self.message, self.code, self.extra = status, message, code, extra


class _Handler(http.server.BaseHTTPRequestHandler):
  protocol_version = "HTTP/1.1"
  server: _Server

  def log_message(self, format, *args):  # pylint: disable=redefined-builtin
    pass

  # -- plumbing ---------------------------------------------------------------------------------

  @property
  def state(self) -> HubState:
    return self.server.state

  @property
  def endpoint(self) -> str:
    return f"http://127.0.0.1:{self.server.server_address[1]}"

  def _body(self) -> bytes:
    if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
      data = b""
      while True:
        size = int(self.rfile.readline().strip().split(b";")[0], 16)
        if size == 0:
          while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
          return data
        data += self.rfile.read(size)
        self.rfile.readline()
    return self.rfile.read(int(self.headers.get("Content-Length") or 0))

  def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
            content_type: str = "application/json") -> None:
    self.send_response(status)
    self.send_header("Content-Type", content_type)
    self.send_header("Content-Length", str(len(body)))
    for k, v in (headers or {}).items():
      self.send_header(k, v)
    self.end_headers()
    if self.command != "HEAD":
      self.wfile.write(body)

  def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
    self._send(status, json.dumps(data).encode(), headers)

  def _token(self) -> str | None:
    auth = self.headers.get("Authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None

  def _check_auth(self, write: bool) -> None:
    token = self._token()
    if token in self.state.rejected_tokens:
      raise _Error(401, "Invalid credentials in Authorization header")
    if write and token is None:
      raise _Error(401, "You must be authenticated to write")
    if write and token in self.state.readonly_tokens:
      raise _Error(403, "You don't have the rights to write to this repository (read-only token)")

  def _repo(self, repo_id: str) -> Repo:
    repo = self.state.repos.get(repo_id)
    if repo is None:
      raise _Error(404, f"Repository {repo_id} not found", "RepoNotFound")
    return repo

  def _commit(self, repo: Repo, rev: str) -> Commit:
    commit = repo.resolve(rev)
    if commit is None:
      raise _Error(404, f"Invalid rev id: {urllib.parse.unquote(rev)}", "RevisionNotFound")
    return commit

  def _dispatch(self) -> None:
    parsed = urllib.parse.urlsplit(self.path)
    self.query = urllib.parse.parse_qs(parsed.query)
    parts = [p for p in parsed.path.split("/") if p]
    self.state.requests.append(f"{self.command} {parsed.path}")
    try:
      for fragment, status in self.state.fail_requests.items():
        if fragment in parsed.path:
          self._body()
          raise _Error(status, f"fake hub: {fragment} fails with {status}")
      with self.state.lock:
        handled = self._route(parts)
      if not handled:
        self.state.unhandled.append(f"{self.command} {self.path}")
        raise _Error(404, f"fake hub: no route for {self.command} {parsed.path}")
    except _Error as e:
      headers = {"X-Error-Code": e.code} if e.code else {}
      headers["X-Error-Message"] = e.message
      headers["Connection"] = "close"  # the request body may be unread
      self.close_connection = True
      self._json({"error": e.message, **e.extra}, e.status, headers)

  do_GET = do_POST = do_PUT = do_HEAD = _dispatch  # noqa: N815

  # -- routes -----------------------------------------------------------------------------------

  def _route(self, p: list[str]) -> bool:  # pylint: disable=too-many-return-statements
    m = self.command
    if p[:2] == ["api", "whoami-v2"] and m == "GET":
      return self._whoami() or True
    if p == ["api", "repos", "create"] and m == "POST":
      return self._create_repo() or True
    if p == ["api", "validate-yaml"] and m == "POST":
      self._body()
      return self._json({"errors": [], "warnings": []}) or True
    if len(p) >= 4 and p[:2] == ["api", "datasets"]:
      return self._api_dataset(f"{p[2]}/{p[3]}", p[4:])
    if len(p) >= 3 and p[0] == "datasets" and p[2].endswith(".git") and p[3:] == [
        "info", "lfs", "objects", "batch"]:
      return self._lfs_batch(f"{p[1]}/{p[2][:-4]}") or True
    if len(p) == 2 and p[0] == "lfs-upload" and m == "PUT":
      data = self._body()
      if hashlib.sha256(data).hexdigest() != p[1]:
        raise _Error(400, "LFS object does not match its oid")
      self.state.lfs[p[1]] = data
      return self._send(200) or True
    if len(p) >= 5 and p[0] == "datasets" and p[3] == "resolve" and m in ("GET", "HEAD"):
      return self._resolve(f"{p[1]}/{p[2]}", p[4], "/".join(p[5:])) or True
    return False

  def _api_dataset(self, repo_id: str, rest: list[str]) -> bool:
    m = self.command
    if m == "GET" and (not rest or rest[0] == "revision"):
      self._check_auth(write=False)
      return self._repo_info(repo_id, rest[1] if len(rest) > 1 else "main") or True
    if m == "GET" and rest in (["auth-check"], ["auth-check", "write"]):
      return self._auth_check(repo_id, write=rest == ["auth-check", "write"]) or True
    if m == "GET" and rest == ["refs"]:
      return self._refs(self._repo(repo_id)) or True
    if m == "GET" and rest[:1] == ["tree"] and len(rest) >= 2:
      return self._tree(repo_id, rest[1], "/".join(rest[2:])) or True
    if m == "POST" and rest[:1] == ["paths-info"] and len(rest) == 2:
      return self._paths_info(repo_id, rest[1]) or True
    if m == "POST" and rest[:1] == ["preupload"] and len(rest) == 2:
      return self._preupload(repo_id, rest[1]) or True
    if m == "POST" and rest[:1] == ["commit"] and len(rest) == 2:
      return self._commit_route(repo_id, rest[1]) or True
    if m == "POST" and rest[:1] == ["branch"] and len(rest) == 2:
      return self._branch(repo_id, urllib.parse.unquote(rest[1])) or True
    if m == "POST" and rest[:1] == ["tag"] and len(rest) == 2:
      return self._tag(repo_id, rest[1]) or True
    if m == "GET" and rest[:1] == ["commits"] and len(rest) == 2:
      return self._commits(repo_id, rest[1]) or True
    return False

  def _whoami(self) -> None:
    if self._token() is None:
      raise _Error(401, "Invalid username or password.")
    self._check_auth(write=False)
    role = "read" if self._token() in self.state.readonly_tokens else "write"
    self._json({"type": "user", "name": self.state.user, "fullname": "Tester",
                "orgs": [{"type": "org", "name": n, "roleInOrg": r}
                         for n, r in sorted(self.state.orgs.items())],
                "auth": {"type": "access_token",
                         "accessToken": {"displayName": "dummy", "role": role}}})

  def _may_write(self, namespace: str) -> bool:
    return namespace == self.state.user or self.state.orgs.get(namespace) in (
        "contributor", "write", "admin")

  def _auth_check(self, repo_id: str, write: bool) -> None:
    self._check_auth(write=write)
    self._repo(repo_id)
    if write and not self._may_write(repo_id.split("/")[0]):
      raise _Error(403, f"You don't have write access to {repo_id}")
    self._json({})

  def _create_repo(self) -> None:
    self._check_auth(write=True)
    payload = json.loads(self._body() or b"{}")
    if payload.get("type") != "dataset":
      raise _Error(400, f"fake hub only serves dataset repos, got {payload.get('type')!r}")
    repo_id = f"{payload.get('organization') or self.state.user}/{payload['name']}"
    if not self._may_write(repo_id.split("/")[0]):
      raise _Error(403, f"You don't have the rights to create a dataset under {repo_id}")
    url = f"{self.endpoint}/datasets/{repo_id}"
    if repo_id in self.state.repos:
      raise _Error(409, "You already created this dataset repo", url=url)
    repo = Repo(repo_id=repo_id, private=payload.get("visibility") == "private")
    first = self.state.add_commit(repo, None, "initial commit", "",
                                  {".gitattributes": GITATTRIBUTES})
    repo.branches["main"] = first.oid
    self.state.repos[repo_id] = repo
    self._json({"url": url, "name": repo_id})

  def _repo_info(self, repo_id: str, rev: str) -> None:
    repo = self._repo(repo_id)
    commit = self._commit(repo, rev)
    self._json({"id": repo_id, "author": repo_id.split("/")[0], "sha": commit.oid,
                "private": repo.private, "disabled": False, "gated": False,
                "lastModified": _DATE, "createdAt": _DATE, "tags": [], "cardData": {},
                "siblings": [{"rfilename": f} for f in sorted(commit.files)]})

  def _refs(self, repo: Repo) -> None:
    def ref(kind: str, name: str, oid: str) -> dict[str, str]:
      return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": oid}
    self._json({"branches": [ref("heads", n, o) for n, o in sorted(repo.branches.items())],
                "tags": [ref("tags", n, o) for n, o in sorted(repo.tags.items())],
                "converts": [],
                "pullRequests": [{"name": f"refs/pr/{n}", "ref": f"refs/pr/{n}",
                                  "targetCommit": o} for n, o in sorted(repo.prs.items())]})

  def _entry(self, commit: Commit, path: str, expand: bool) -> dict[str, Any]:
    if path in commit.files:
      data = commit.files[path]
      entry: dict[str, Any] = {"type": "file", "oid": git_blob_sha1(data), "size": len(data),
                               "path": path}
      if path.endswith(_LFS_SUFFIXES):
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                        "pointerSize": 134}
    else:
      entry = {"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "size": 0,
               "path": path}
    if expand:
      entry["lastCommit"] = {"id": commit.oid, "title": commit.title, "date": _DATE}
    return entry

  def _children(self, commit: Commit, prefix: str, recursive: bool) -> list[str]:
    base = f"{prefix}/" if prefix else ""
    out: set[str] = set()
    for f in commit.files:
      if not f.startswith(base):
        continue
      parts = f[len(base):].split("/")
      if recursive:
        out.update(base + "/".join(parts[:i]) for i in range(1, len(parts) + 1))
      else:
        out.add(base + parts[0])
    return sorted(out)

  def _tree(self, repo_id: str, rev: str, path: str) -> None:
    commit = self._commit(self._repo(repo_id), rev)
    children = self._children(commit, path.strip("/"), self.query.get("recursive") == ["true"]
                              or self.query.get("recursive") == ["True"])
    if path.strip("/") and not children and path not in commit.files:
      raise _Error(404, f"path {path} not found", "EntryNotFound")
    expand = self.query.get("expand", ["false"])[0].lower() == "true"
    self._json([self._entry(commit, c, expand) for c in children])

  def _paths_info(self, repo_id: str, rev: str) -> None:
    commit = self._commit(self._repo(repo_id), rev)
    body = self._body().decode()
    form = (urllib.parse.parse_qs(body) if "application/json" not in
            self.headers.get("Content-Type", "") else json.loads(body))
    paths = form.get("paths", [])
    expand = str(form.get("expand", ["false"])[0]).lower() == "true"
    dirs = {d for f in commit.files for d in _parents(f)}
    self._json([self._entry(commit, p.strip("/"), expand) for p in paths
                if p.strip("/") in commit.files or p.strip("/") in dirs])

  def _preupload(self, repo_id: str, rev: str) -> None:
    repo = self._repo(repo_id)
    files = repo.files(rev if "create_pr" not in self.query else "main")
    out = []
    for f in json.loads(self._body())["files"]:
      lfs = f["path"].endswith(_LFS_SUFFIXES)
      current = files.get(f["path"])
      oid = None if current is None else (
          hashlib.sha256(current).hexdigest() if lfs else git_blob_sha1(current))
      out.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular",
                  "shouldIgnore": False, "oid": oid})
    self._json({"files": out, "commitOid": self._commit(repo, rev).oid})

  def _lfs_batch(self, repo_id: str) -> None:
    self._check_auth(write=True)
    self._repo(repo_id)
    payload = json.loads(self._body())
    objects = []
    for obj in payload["objects"]:
      item = {"oid": obj["oid"], "size": obj["size"]}
      if obj["oid"] not in self.state.lfs:
        item["actions"] = {"upload": {"href": f"{self.endpoint}/lfs-upload/{obj['oid']}"}}
      objects.append(item)
    self._json({"transfer": "basic", "objects": objects})

  def _commit_route(self, repo_id: str, rev: str) -> None:
    self._check_auth(write=True)
    repo = self._repo(repo_id)
    lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
    header = lines[0]["value"]
    self.state.commit_headers.append(header)
    if self.state.reject_commit is not None:
      status, message = self.state.reject_commit
      raise _Error(status, message)
    if self.state.before_commit is not None:
      self.state.before_commit(self.state, repo)
    create_pr = self.query.get("create_pr") == ["1"]
    branch = urllib.parse.unquote(rev)
    base = self._commit(repo, rev)
    if header.get("parentCommit") and header["parentCommit"] != base.oid:
      raise _Error(412, "A commit has happened since. Please refresh and try again.")
    files = _apply(dict(base.files), lines[1:], self.state.lfs)
    commit = self.state.add_commit(repo, base.oid, header["summary"],
                                   header.get("description", ""), files)
    pr_url = None
    if create_pr:
      number = max(repo.prs, default=0) + 1
      repo.prs[number] = commit.oid
      pr_url = f"{self.endpoint}/datasets/{repo_id}/discussions/{number}"
    elif re.fullmatch(r"refs/pr/\d+", branch):
      repo.prs[int(branch.rsplit("/", 1)[1])] = commit.oid
    elif branch in repo.branches:
      repo.branches[branch] = commit.oid
    else:
      raise _Error(400, f"cannot commit to {branch!r}: not a branch")
    if self.state.fail_commit == "500":
      raise _Error(500, "Internal Server Error")
    if self.state.fail_commit == "drop":
      self.close_connection = True  # no answer at all: the client sees the connection close
      return
    self._json({"commitOid": commit.oid, "commitUrl":
                f"{self.endpoint}/datasets/{repo_id}/commit/{commit.oid}",
                "pullRequestUrl": pr_url, "success": True})

  def _branch(self, repo_id: str, name: str) -> None:
    self._check_auth(write=True)
    repo = self._repo(repo_id)
    payload = json.loads(self._body() or b"{}")
    if name in repo.branches:
      raise _Error(409, f"Branch {name} already exists")
    repo.branches[name] = self._commit(repo, payload.get("startingPoint", "main")).oid
    self._json({})

  def _tag(self, repo_id: str, rev: str) -> None:
    self._check_auth(write=True)
    repo = self._repo(repo_id)
    payload = json.loads(self._body())
    if payload["tag"] in repo.tags:
      raise _Error(409, f"Tag {payload['tag']} already exists")
    repo.tags[payload["tag"]] = self._commit(repo, rev).oid
    self._json({})

  def _commits(self, repo_id: str, rev: str) -> None:
    repo = self._repo(repo_id)
    self._commit(repo, rev)
    self._json([{"id": c.oid, "title": c.title, "message": c.message, "date": _DATE,
                 "authors": [{"user": "tester"}]} for c in repo.history(rev)])

  def _resolve(self, repo_id: str, rev: str, path: str) -> None:
    repo = self._repo(repo_id)
    commit = self._commit(repo, rev)
    path = urllib.parse.unquote(path)
    if path not in commit.files:
      raise _Error(404, f"{path} not found", "EntryNotFound")
    data = commit.files[path]
    etag = hashlib.sha256(data).hexdigest() if path.endswith(_LFS_SUFFIXES) else git_blob_sha1(data)
    headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
    status, body = 200, data
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
    if match:
      start = int(match.group(1))
      end = int(match.group(2)) if match.group(2) else len(data) - 1
      body = data[start:end + 1]
      status = 206
      headers["Content-Range"] = f"bytes {start}-{start + len(body) - 1}/{len(data)}"
    self._send(status, body, headers, content_type="application/octet-stream")


def _parents(path: str) -> list[str]:
  parts = path.split("/")
  return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _apply(files: dict[str, bytes], operations: list[dict], lfs: dict[str, bytes]
           ) -> dict[str, bytes]:
  for op in operations:
    key, value = op["key"], op["value"]
    if key == "file":
      files[value["path"]] = base64.b64decode(value["content"])
    elif key == "lfsFile":
      if value["oid"] not in lfs:
        raise _Error(422, f"LFS object {value['oid']} for {value['path']} was never uploaded")
      files[value["path"]] = lfs[value["oid"]]
    elif key == "deletedFile":
      if value["path"] not in files:
        raise _Error(404, f"A file with this name doesn't exist: {value['path']}",
                     "EntryNotFound")
      del files[value["path"]]
    elif key == "deletedFolder":
      prefix = value["path"].rstrip("/") + "/"
      for f in [f for f in files if f.startswith(prefix)]:
        del files[f]
    else:
      raise _Error(400, f"unknown commit operation {key!r}")
  return files


class _Server(http.server.ThreadingHTTPServer):
  daemon_threads = True

  def __init__(self, state: HubState):
    super().__init__(("127.0.0.1", 0), _Handler)
    self.state = state


class FakeHub:
  """Starts the server on a free port of 127.0.0.1; use as a context manager."""

  def __init__(self) -> None:
    self.state = HubState()
    self._server = _Server(self.state)
    self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

  @property
  def endpoint(self) -> str:
    return f"http://127.0.0.1:{self._server.server_address[1]}"

  def repo(self, repo_id: str) -> Repo:
    return self.state.repos[repo_id]

  def seed(self, repo_id: str, files: dict[str, bytes]) -> Repo:
    """A dataset repo whose main holds .gitattributes plus `files` (two commits)."""
    with self.state.lock:
      repo = Repo(repo_id=repo_id, private=False)
      first = self.state.add_commit(repo, None, "initial commit", "",
                                    {".gitattributes": GITATTRIBUTES})
      second = self.state.add_commit(repo, first.oid, "seed", "",
                                     {".gitattributes": GITATTRIBUTES, **files})
      repo.branches["main"] = second.oid
      self.state.repos[repo_id] = repo
    return repo

  def __enter__(self) -> FakeHub:
    self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self._server.shutdown()
    self._server.server_close()
    self._thread.join(timeout=5)
