"""builder.push through the REAL huggingface_hub client against tests/fakehub.py (no internet).

huggingface_hub and datasets read HF_ENDPOINT when they are imported, so each client runs in
a fresh subprocess with the fake Hub's endpoint, Xet and telemetry off, and a dummy token;
the test then inspects the server's in-memory repos.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tests import runfixtures as rf
from builder.build import build_dataset
from builder.push import PreflightError, PushError, check_repo_id, preflight, push_folder
from tests.fakehub import GITATTRIBUTES, FakeHub
from tests.paths import REPO as CHECKOUT

REPO = "org/pallasbench-robust-gpu-h200"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> pathlib.Path:
  root = tmp_path_factory.mktemp("push")
  trees = rf.write_tree(root)
  run = rf.write_run(root / "run", rf.standard_records(trees))
  return build_dataset([run], root / "data", kernel_trees=trees, repo_id=REPO).out_dir


@pytest.fixture
def hub():
  with FakeHub() as server:
    yield server


def client(hub: FakeHub, tmp_path: pathlib.Path, code: str, *, token: str | None = "hf_dummy"):
  """Runs `code` in a fresh interpreter pointed at the fake Hub; returns (rc, result, stderr).

  The code sets `result` (JSON-able); a PushError becomes {"push_error": message}. Every
  `datasets.load_dataset` of a local folder in `code` passes `cache_dir=CACHE`, a directory of
  this call's own.
  """
  env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
  env.update(HF_ENDPOINT=hub.endpoint, HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1",
             HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="0", PYTHONPATH=str(CHECKOUT))
  if token is not None:
    env["HF_TOKEN"] = token
  script = textwrap.dedent("""
      import dataclasses, json, sys
      import datasets
      datasets.config.USE_PARQUET_EXPORT = False
      from builder.push import PushError, push_folder
      CACHE = {cache!r}
      result = None
      try:
      {body}
      except PushError as e:
          result = {{"push_error": str(e)}}
      print("RESULT=" + json.dumps(result, default=str))
  """).format(body=textwrap.indent(textwrap.dedent(code), "    "),
             cache=str(tmp_path / "datasets-cache"))
  proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                        cwd=tmp_path, timeout=300)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT=")]
  result = json.loads(lines[-1][len("RESULT="):]) if lines else None
  return proc.returncode, result, proc.stderr


def _local_files(folder: pathlib.Path) -> dict[str, bytes]:
  return {p.relative_to(folder).as_posix(): p.read_bytes()
          for p in folder.rglob("*") if p.is_file()}


def test_push_is_one_commit_that_deletes_stale_files(hub, folder, tmp_path):
  repo = hub.seed(REPO, {"README.md": b"old card", "default/level_9-00000-of-00001.parquet": b"x",
                         "results/old-run/records.jsonl": b"{}\n"})
  before = len(repo.history())
  rc, result, err = client(hub, tmp_path, f"""
      r = push_folder({str(folder)!r}, {REPO!r}, commit_message="Regenerate on H200")
      result = dataclasses.asdict(r)
  """)
  assert rc == 0 and "push_error" not in (result or {}), err
  history = repo.history()
  assert len(history) == before + 1
  assert history[0].title == "Regenerate on H200"
  assert "NVIDIA H200" in history[0].message  # environment in the commit description
  assert repo.files("main") == {".gitattributes": GITATTRIBUTES, **_local_files(folder)}
  assert sorted(result["deleted"]) == ["default/level_9-00000-of-00001.parquet",
                                       "results/old-run/records.jsonl"]
  assert result["commit_oid"] == repo.branches["main"]
  assert result["rows"]["default"] == {"level_1": 2, "level_2": 1, "level_3": 1}
  assert hub.state.unhandled == []


def test_tag_points_at_the_commit_and_load_by_tag(hub, folder, tmp_path):
  rc, result, err = client(hub, tmp_path, f"""
      r = push_folder({str(folder)!r}, {REPO!r}, tag="v1.0")
      from pallasbench_dataset.loading import load
      rows = {{}}
      for config in ("default", "runs"):
          remote = load({REPO!r}, config, revision="v1.0")
          local = datasets.load_dataset({str(folder)!r}, config, cache_dir=CACHE)
          rows[config] = {{s: remote[s].to_list() == local[s].to_list() for s in local}}
          rows[config + "_features"] = all(remote[s].features == local[s].features for s in local)
      plain = datasets.load_dataset({REPO!r}, revision="v1.0")  # the bare repo id form
      local = datasets.load_dataset({str(folder)!r}, cache_dir=CACHE)
      rows["plain"] = {{s: plain[s].to_list() == local[s].to_list() for s in local}}
      result = {{"oid": r.commit_oid, "rows": rows}}
  """)
  assert rc == 0 and result and "push_error" not in result, err
  repo = hub.repo(REPO)
  assert repo.tags == {"v1.0": result["oid"]} and repo.branches["main"] == result["oid"]
  assert result["rows"] == {"default": {"level_1": True, "level_2": True, "level_3": True},
                            "default_features": True, "runs": {"train": True},
                            "runs_features": True,
                            "plain": {"level_1": True, "level_2": True, "level_3": True}}
  assert any(r.startswith("GET /datasets/org/pallasbench-robust-gpu-h200/resolve/")
             for r in hub.state.requests)  # the data really came through the server
  assert hub.state.unhandled == []


def test_pull_request_leaves_main_untouched(hub, folder, tmp_path):
  repo = hub.seed(REPO, {"README.md": b"old card"})
  main_before = repo.branches["main"]
  rc, result, err = client(hub, tmp_path, f"""
      r = push_folder({str(folder)!r}, {REPO!r}, create_pr=True)
      result = dataclasses.asdict(r)
  """)
  assert rc == 0 and "push_error" not in (result or {}), err
  assert repo.branches["main"] == main_before
  assert repo.files("main")["README.md"] == b"old card"
  assert result["pr_url"].endswith("/discussions/1")
  assert repo.files("refs/pr/1") == {".gitattributes": GITATTRIBUTES, **_local_files(folder)}


def test_branch_revision_is_created_and_main_untouched(hub, folder, tmp_path):
  repo = hub.seed(REPO, {"README.md": b"old card"})
  main_before = repo.branches["main"]
  rc, result, err = client(hub, tmp_path, f"""
      result = dataclasses.asdict(push_folder({str(folder)!r}, {REPO!r}, revision="staging"))
  """)
  assert rc == 0 and "push_error" not in (result or {}), err
  assert repo.branches["main"] == main_before
  assert repo.branches["staging"] == result["commit_oid"]
  assert repo.files("staging")["README.md"] == (folder / "README.md").read_bytes()


def test_unchanged_push_makes_no_commit_and_keeps_its_tag(hub, folder, tmp_path):
  rc, result, err = client(hub, tmp_path, f"""
      a = push_folder({str(folder)!r}, {REPO!r}, tag="v1")
      b = push_folder({str(folder)!r}, {REPO!r}, tag="v1")  # same commit: the tag stands
      result = [a.commit_oid, b.commit_oid]
  """)
  assert rc == 0 and result and "push_error" not in result, err
  assert result[0] == result[1]
  assert len(hub.repo(REPO).history()) == 2  # initial commit + one push
  assert hub.repo(REPO).tags == {"v1": result[0]}


def test_tag_taken_by_another_commit_is_reported(hub, folder, tmp_path):
  import shutil
  changed = shutil.copytree(folder, tmp_path / "changed")
  (changed / "fix.patch").write_text((folder / "fix.patch").read_text() + "\n")
  rc, result, err = client(hub, tmp_path, f"""
      push_folder({str(folder)!r}, {REPO!r}, tag="v1")
      push_folder({str(changed)!r}, {REPO!r}, tag="v1")
  """)
  assert rc == 0, err
  message = result["push_error"]
  assert "tagging commit" in message and "(the commit itself succeeded)" in message
  assert "Tag v1 already exists" in message
  repo = hub.repo(REPO)
  assert repo.tags["v1"] != repo.branches["main"]  # the tag still names the first push


def test_default_repo_id_and_describe(hub, tmp_path):
  trees = rf.write_tree(tmp_path)
  run = rf.write_run(tmp_path / "run", rf.standard_records(trees))
  rc, result, err = client(hub, tmp_path, f"""
      from builder.build import KernelTrees, build_dataset
      trees = KernelTrees(tpu=__import__("pathlib").Path({str(trees.tpu)!r}),
                          gpu=__import__("pathlib").Path({str(trees.gpu)!r}))
      summary = build_dataset([{str(run)!r}], {str(tmp_path / "out")!r}, kernel_trees=trees)
      repo_id = summary.default_repo_id()
      pushed = push_folder(summary.out_dir, repo_id, create_pr=True)
      result = [repo_id, pushed.describe()]
  """)
  assert rc == 0 and result and "push_error" not in result, err
  assert result[0] == "tester/pallasbench-robust-gpu-h200"  # the token's user, from whoami
  assert result[1].startswith("pushed to http://127.0.0.1:")
  assert "/discussions/1: commit " in result[1]


def test_missing_token_says_how_to_log_in(hub, folder, tmp_path):
  rc, result, err = client(hub, tmp_path, f"""
      push_folder({str(folder)!r}, {REPO!r})
  """, token=None)
  assert rc == 0, err
  assert "no Hugging Face token" in result["push_error"]
  assert "hf auth login" in result["push_error"]
  assert hub.state.requests == []


def test_rejected_commit_is_a_clear_error_and_nothing_lands(hub, folder, tmp_path):
  repo = hub.seed(REPO, {"README.md": b"old card"})
  before = dict(repo.branches)
  hub.state.reject_commit = (422, "Invalid parquet file: default/level_1")
  rc, result, err = client(hub, tmp_path, f"""
      push_folder({str(folder)!r}, {REPO!r})
  """)
  assert rc == 0, err
  message = result["push_error"]
  assert "the Hub refused the request (HTTP 422)" in message
  assert "Invalid parquet file" in message and "nothing was committed" in message
  assert repo.branches == before


def test_readonly_token_is_a_permission_error(hub, folder, tmp_path):
  hub.seed(REPO, {})
  hub.state.readonly_tokens.add("hf_readonly")
  rc, result, err = client(hub, tmp_path, f"""
      push_folder({str(folder)!r}, {REPO!r})
  """, token="hf_readonly")
  assert rc == 0, err
  assert "no write permission on org/pallasbench-robust-gpu-h200" in result["push_error"]


def test_unreachable_hub_is_a_clear_error(folder, tmp_path):
  class Dead:  # a port nothing listens on
    endpoint = "http://127.0.0.1:9"
  rc, result, err = client(Dead(), tmp_path, f"""
      push_folder({str(folder)!r}, {REPO!r})
  """)
  assert rc == 0, err
  assert "cannot reach the Hub" in result["push_error"]


@pytest.mark.parametrize("repo_id", [
    "noslash", "a/b/c", "", "org/-name", "org/name-", "org/na..me", "org/na--me", "org/name.git",
    "org/na me", "o" * 97 + "/name"])
def test_bad_repo_id(repo_id, folder):
  with pytest.raises(ValueError, match="invalid repo id"):
    push_folder(folder, repo_id, token="hf_dummy")


@pytest.mark.parametrize("repo_id", ["org/name", "My-Org/pallas.bench_v2", "a/b"])
def test_good_repo_id(repo_id):
  check_repo_id(repo_id)


def test_invalid_folder_is_refused_before_any_request(tmp_path, folder):
  import shutil
  copy = shutil.copytree(folder, tmp_path / "copy")
  readme = copy / "README.md"
  readme.write_text(readme.read_text().replace("num_examples: 8", "num_examples: 7"))
  with pytest.raises(ValueError, match="stale dataset_info"):
    push_folder(copy, REPO, token="hf_dummy")


def test_pr_with_revision_is_refused(folder):
  with pytest.raises(ValueError, match="pull request against main"):
    push_folder(folder, REPO, create_pr=True, revision="dev", token="hf_dummy")


def test_missing_token_in_process(monkeypatch, folder):
  monkeypatch.delenv("HF_TOKEN", raising=False)
  monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
  with pytest.raises(PushError, match="hf auth login"):
    push_folder(folder, REPO)


# ---------------------------------------------------------------------------------------------
# Outcomes the client cannot know, and concurrent pushes.

COMMITS_PAGE = "{endpoint}/datasets/" + REPO + "/commits/main"


@pytest.mark.parametrize("fault, lands", [
    ("500", True),    # the commit landed, then the Hub answered 500
    ("drop", True),   # the commit landed, then the connection closed without an answer
    ("reject", False),  # a 500 before the commit landed: the client cannot tell the difference
])
def test_commit_with_unknown_outcome_says_how_to_check(hub, folder, tmp_path, fault, lands):
  repo = hub.seed(REPO, {"README.md": b"old card"})
  before = repo.branches["main"]
  if fault == "reject":
    hub.state.reject_commit = (500, "Internal Server Error")
  else:
    hub.state.fail_commit = fault
  rc, result, err = client(hub, tmp_path, f"""
      push_folder({str(folder)!r}, {REPO!r}, tag="v2")
  """)
  assert rc == 0, err
  message = result["push_error"]
  assert "unknown outcome" in message and "may have landed" in message
  assert "nothing was committed" not in message
  assert COMMITS_PAGE.format(endpoint=hub.endpoint) in message
  assert (repo.branches["main"] != before) == lands
  assert repo.tags == {}  # no tag on a commit nobody saw
  assert len(hub.state.commit_headers) == 1  # the commit call is never retried blindly


def test_push_after_a_dropped_commit_makes_no_second_commit(hub, folder, tmp_path):
  repo = hub.seed(REPO, {"README.md": b"old card"})
  hub.state.fail_commit = "drop"
  client(hub, tmp_path, f"push_folder({str(folder)!r}, {REPO!r})")
  landed = repo.branches["main"]
  hub.state.fail_commit = None
  rc, result, err = client(hub, tmp_path, f"""
      result = dataclasses.asdict(push_folder({str(folder)!r}, {REPO!r}))
  """)
  assert rc == 0 and "push_error" not in (result or {}), err
  assert result["commit_oid"] == landed == repo.branches["main"]


def test_failure_before_the_commit_call_is_known_to_commit_nothing(hub, folder, tmp_path):
  """A server error (5xx) on a request before the commit. 501, which huggingface_hub does not
  retry: on 503 its backoff waits 23 s before the same error reaches the push."""
  repo = hub.seed(REPO, {"README.md": b"old card"})
  before = dict(repo.branches)
  hub.state.fail_requests = {"/preupload/": 501}
  rc, result, err = client(hub, tmp_path, f"push_folder({str(folder)!r}, {REPO!r})")
  assert rc == 0, err
  message = result["push_error"]
  assert "HTTP 501" in message and "nothing was committed" in message
  assert "may have landed" not in message
  assert hub.state.commit_headers == [] and repo.branches == before


def test_concurrent_push_is_refused_by_the_parent_commit(hub, folder, tmp_path):
  """Someone pushes between the listing of the remote files and the commit: the Hub refuses
  the commit (412) because its parent is no longer the branch head; their push stays."""
  repo = hub.seed(REPO, {"README.md": b"old card"})
  listed = repo.branches["main"]

  def someone_else_pushes(state, target):
    theirs = state.add_commit(target, target.branches["main"], "their push", "",
                              {**target.files("main"), "theirs.txt": b"x"})
    target.branches["main"] = theirs.oid
    state.before_commit = None
  hub.state.before_commit = someone_else_pushes
  rc, result, err = client(hub, tmp_path, f"""
      push_folder({str(folder)!r}, {REPO!r}, tag="v2")
  """)
  assert rc == 0, err
  message = result["push_error"]
  assert "someone else pushed to the branch" in message and "push again" in message
  assert "nothing was committed" in message and "may have landed" not in message
  assert hub.state.commit_headers[0]["parentCommit"] == listed
  files = repo.files("main")
  assert files["README.md"] == b"old card" and files["theirs.txt"] == b"x"
  assert repo.history()[0].title == "their push" and repo.tags == {}


def test_conflicting_commit_is_refused(hub, folder, tmp_path):
  repo = hub.seed(REPO, {"README.md": b"old card"})
  before = dict(repo.branches)
  hub.state.reject_commit = (409, "Another commit is in progress on this branch")
  rc, result, err = client(hub, tmp_path, f"push_folder({str(folder)!r}, {REPO!r})")
  assert rc == 0, err
  message = result["push_error"]
  assert "a conflicting change exists" in message and "concurrent push" in message
  assert "nothing was committed" in message and "Another commit is in progress" in message
  assert repo.branches == before


def test_push_commits_on_top_of_the_head_it_listed(hub, folder, tmp_path):
  repo = hub.seed(REPO, {"README.md": b"old card"})
  head = repo.branches["main"]
  rc, result, err = client(hub, tmp_path, f"push_folder({str(folder)!r}, {REPO!r})")
  assert rc == 0 and "push_error" not in (result or {}), err
  assert [h["parentCommit"] for h in hub.state.commit_headers] == [head]


# ---------------------------------------------------------------------------------------------
# preflight: token and repo id checked before anything is measured.

def test_preflight_against_the_hub(hub, tmp_path):
  hub.seed(REPO, {})
  hub.seed("other/pallasbench", {})
  hub.state.orgs = {"org": "write", "readers": "read"}
  hub.state.readonly_tokens.add("hf_readonly")
  hub.state.rejected_tokens.add("hf_revoked")
  rc, result, err = client(hub, tmp_path, f"""
      from builder.push import preflight

      def outcome(*args, **kwargs):
          try:
              return preflight(*args, **kwargs)
          except ValueError as e:
              return type(e).__name__ + ": " + str(e)
      result = {{
          "existing": outcome({REPO!r}),
          "new_in_org": outcome("org/new-repo"),
          "new_own": outcome("tester/new-repo"),
          "default": outcome(None, hardware="h200"),
          "no_hardware": outcome(None),
          "foreign": outcome("other/pallasbench"),
          "stranger": outcome("stranger/new"),
          "read_org": outcome("readers/new"),
          "readonly": outcome({REPO!r}, token="hf_readonly"),
          "revoked": outcome({REPO!r}, token="hf_revoked"),
      }}
  """)
  assert rc == 0 and result, err
  assert result["existing"] == REPO
  assert result["new_in_org"] == "org/new-repo" and result["new_own"] == "tester/new-repo"
  assert result["default"] == "tester/pallasbench-robust-gpu-h200"
  refused = {k: v for k, v in result.items() if v.startswith("PreflightError: ")}
  assert set(refused) == {"no_hardware", "foreign", "stranger", "read_org", "readonly",
                          "revoked"}
  assert "pass --repo-id ORG/NAME" in refused["no_hardware"]
  assert "no write permission on other/pallasbench" in refused["foreign"]
  assert "'stranger' is neither the token's user nor one of its organisations" in (
      refused["stranger"])
  assert "only the read role in 'readers'" in refused["read_org"]
  assert "is read-only" in refused["readonly"]
  assert "the Hub rejected the token" in refused["revoked"]
  assert set(hub.state.repos) == {REPO, "other/pallasbench"}  # preflight creates nothing
  assert hub.state.commit_headers == []
  assert any("/auth-check/write" in r for r in hub.state.requests)
  assert hub.state.unhandled == []


def test_preflight_without_a_token_names_it_and_asks_nothing(hub, tmp_path):
  rc, result, err = client(hub, tmp_path, f"""
      from builder.push import preflight
      try:
          preflight({REPO!r})
      except ValueError as e:
          result = [type(e).__name__, str(e)]
  """, token=None)
  assert rc == 0, err
  assert result[0] == "PreflightError"
  assert "no Hugging Face token" in result[1] and "hf auth login" in result[1]
  assert "HF_TOKEN" in result[1]
  assert hub.state.requests == []


@pytest.mark.parametrize("kwargs, match", [
    ({"repo_id": "noslash"}, "invalid repo id 'noslash'"),
    ({"repo_id": REPO, "create_pr": True, "revision": "dev"}, "do not pass --revision"),
])
def test_preflight_refuses_before_any_request(kwargs, match, monkeypatch):
  def no_network(*args, **kwargs):
    raise AssertionError("preflight asked the Hub")
  monkeypatch.setattr("huggingface_hub.HfApi.whoami", no_network)
  with pytest.raises(ValueError, match=match):
    preflight(token="hf_dummy", **kwargs)


def test_preflight_error_is_a_value_error():
  assert issubclass(PreflightError, ValueError)


def test_preflight_names_missing_hub_packages(monkeypatch):
  """A GPU machine without `datasets`: --push is refused before measuring, saying why."""
  monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
  monkeypatch.setenv("HF_TOKEN", "hf_dummy")
  with pytest.raises(PreflightError, match=r"needs datasets: install them \(pip install -e "
                     r"\"\.\[hub\]\"\), or measure here with --measure-only"):
    preflight(REPO)
