"""Populations: reading candidates, the generator, the verdict cache, a population run end to
end on a local Dask cluster (CPU, interpret mode, small), and its `candidates` config.

The end-to-end runs share one module fixture: a JSON Lines population of relu candidates made
by the generator (tuning, broken, cheat), plus a twin, a crashing and a hanging kernel; then
the same sources again as a folder, one of them changed.
"""

import collections
import dataclasses
import io
import json
import re
import types

import datasets
import jax
import numpy as np
import pytest

from tests.builder.test_release import needs_this_release

from builder import plots
from builder.build import BuildError, build_dataset
from builder.trees import KernelTrees
from pallasbench_dataset import autotune
from pallasbench_dataset.evaluation.pipeline import cluster, suite, verdicts
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem
from pallasbench_dataset.evaluation.judge.core import JUDGE_VERSION, EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits
from pallasbench_dataset.kernels import kernel_path, load_module, sha256
from pallasbench_dataset.keys import EvalKey
from pallasbench_dataset.lowering import abstract_gpu
from pallasbench_dataset.population import __main__ as cli
from pallasbench_dataset.population import generate as gen
from pallasbench_dataset.population.candidates import (
    CANDIDATES, Candidate, PopulationError, read_candidates, to_jsonl)
from pallasbench_dataset.population.run import evaluate_population, summarize
from pallasbench_dataset.schema import (
    Artifacts, ErrorType, EvalRecord, Status, from_json_dict, to_json_dict)
from pallasbench_dataset.tasks import TASKS, get_task

from tests import runfixtures as rf
from tests.paths import CONTROLS, REPO

OPTIONS = EvalOptions(num_seeds=2, check_edge=False, timing_iterations=2, timing_rounds=1, warmup=1)
LIMITS = Limits(timeout_s=30, memory_bytes=8 << 30)
CLUSTER = suite.ClusterOptions(plan=cluster.WorkerPlan(gpus=(), cpu_workers=1),
                               compile_budget_s=300)
NO_KERNEL = "no Pallas kernel in the exported module"


def _load(folder, config, cache):
  """`datasets.load_dataset` with a cache folder of its own (a shared one can go stale)."""
  return datasets.load_dataset(str(folder), config, cache_dir=str(cache), split="train")


# ---------------------------------------------------------------------------------------------
# Reading a population.

def _jsonl(tmp_path, *lines, name="pop.jsonl"):
  path = tmp_path / name
  path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                          for line in lines))
  return path


def test_jsonl_candidates_with_and_without_ids(tmp_path):
  path = _jsonl(tmp_path, {"task": "relu", "source": "a"}, "",
                {"task": "gelu", "source": "b", "id": "mine", "parent": "p", "kind": "tuning"})
  assert read_candidates(path) == [
      Candidate(id="relu/line-1", task="relu", source="a"),
      Candidate(id="mine", task="gelu", source="b", parent="p", kind="tuning")]


def test_folder_candidates_are_task_slash_name(tmp_path):
  for rel in ("relu/b.py", "relu/a.py", "gelu/x.py", "relu/notes.txt", "relu/__pycache__/a.py"):
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text(rel)
  assert [(c.id, c.task, c.source) for c in read_candidates(tmp_path)] == [
      ("gelu/x", "gelu", "gelu/x.py"), ("relu/a", "relu", "relu/a.py"),
      ("relu/b", "relu", "relu/b.py")]


@pytest.mark.parametrize("lines, message", [
    (['{"task": "relu", "source": "a"}', '{"task": "relu", "source": '],
     r"pop.jsonl:2: not valid JSON \("),
    (['{"task": "no_such_task", "source": "a"}'], r"pop.jsonl:1: unknown task 'no_such_task'"),
    (['[1, 2]'], r"pop.jsonl:1: a line must hold one JSON object, not list"),
    (['{"task": "relu", "source": "a", "speed": 1}'], r"pop.jsonl:1: unknown keys \['speed'\]"),
    (['{"task": "relu"}'], r"pop.jsonl:1: 'source' must be a non-empty string, not None"),
    (['{"task": "relu", "source": "a", "kind": 3}'], r"pop.jsonl:1: 'kind' must be a non-empty"),
    (['{"task": "relu", "source": "a", "id": "x"}', '{"task": "relu", "source": "b", "id": "x"}'],
     r"pop.jsonl:2: id 'x' is also on line 1"),
    ([''], r"pop.jsonl holds no candidates"),
])
def test_bad_jsonl_names_the_line(tmp_path, lines, message):
  with pytest.raises(PopulationError, match=message):
    read_candidates(_jsonl(tmp_path, *lines))


def test_bad_folders_and_paths(tmp_path):
  with pytest.raises(PopulationError, match="does not exist: pass a JSON Lines file"):
    read_candidates(tmp_path / "nowhere")
  (tmp_path / "relu").mkdir()
  (tmp_path / "relu" / "latin1.py").write_bytes(b"# caf\xe9\n")  # Python refuses it too
  with pytest.raises(PopulationError, match=r"latin1.py' cannot be read: .*encoding"):
    read_candidates(tmp_path)
  (tmp_path / "relu" / "latin1.py").write_bytes(b"# coding: latin-1\n# caf\xe9\n")
  with pytest.raises(PopulationError, match=r"declares the iso-8859-1 encoding: .* UTF-8"):
    read_candidates(tmp_path)  # its text would be published as another program (round 19)
  (tmp_path / "relu" / "latin1.py").write_bytes(b"\xef\xbb\xbfx = 1\n")
  assert read_candidates(tmp_path)[0].source == "x = 1\n"  # no byte order mark
  (tmp_path / "relu" / "latin1.py").unlink()
  (tmp_path / "loose.py").write_text("x")
  with pytest.raises(PopulationError, match="loose.py: a candidate folder holds <task>/<name>.py"):
    read_candidates(tmp_path)
  (tmp_path / "loose.py").unlink()
  (tmp_path / "relus").mkdir()
  (tmp_path / "relus" / "a.py").write_text("x")
  with pytest.raises(PopulationError, match=r"a.py \(its folder names the task\): unknown task "
                                            "'relus'"):
    read_candidates(tmp_path)


@pytest.mark.parametrize("write, message", [
    (lambda p: None, "does not exist"),
    (lambda p: p.write_text('{"task": "relu", "source": "x"}\n{oops}\n'), "pop.jsonl:2: not valid JSON"),
    (lambda p: p.write_text('{"task": "rleu", "source": "x"}\n'), "pop.jsonl:1: unknown task 'rleu'"),
])
def test_the_command_refuses_bad_input_before_evaluating(tmp_path, capsys, write, message):
  path = tmp_path / "pop.jsonl"
  write(path)
  code = cli.main(["evaluate", "--candidates", str(path), "--out", str(tmp_path / "run"),
                   "--device", "cpu", "--cache", str(tmp_path / "cache")])
  assert code == 2
  assert message in capsys.readouterr().err
  assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()


def test_the_command_refuses_a_cache_and_no_cache(tmp_path, capsys):
  path = _jsonl(tmp_path, {"task": "relu", "source": "x"})
  code = cli.main(["evaluate", "--candidates", str(path), "--out", str(tmp_path / "run"),
                   "--cache", str(tmp_path / "c"), "--no-cache"])
  assert code == 2 and "pass one" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The generator.

def test_generation_is_deterministic_and_mixed():
  first = gen.generate(60, tasks=["relu", "softmax", "matmul"])
  assert first == gen.generate(60, tasks=["relu", "softmax", "matmul"])
  assert first != gen.generate(60, seed=1, tasks=["relu", "softmax", "matmul"])
  # broken: 3 per task, so its missing 3 go to tuning
  assert collections.Counter(c.kind for c in first) == {"tuning": 39, "broken": 9, "cheat": 12}
  assert len({c.id for c in first}) == len({c.source for c in first}) == 60
  assert [c.task for c in first] == sorted((c.task for c in first), key=lambda t: get_task(t).task_id)
  for c in first:
    assert c.parent in (f"kernels_gpu/{c.task}.py", f"references/{c.task}.py"), c
    assert c.source.startswith(f"# {c.id} ({c.kind}, from {c.parent}): "), c
    compile(c.source, c.id, "exec")


def test_the_default_population_covers_every_task_in_its_shares():
  population = gen.generate()
  assert len(population) == 500 and len({c.task for c in population}) == len(TASKS)
  assert collections.Counter(c.kind for c in population) == {"tuning": 300, "broken": 100,
                                                              "cheat": 100}


def test_generation_refuses_impossible_counts():
  with pytest.raises(PopulationError, match=r"give 26 mutations of these tasks; ask for --count 26"):
    gen.generate(27, tasks=["relu"])
  with pytest.raises(PopulationError, match="at least 1"):
    gen.generate(0)
  assert len(gen.generate(26, tasks=["relu"])) == 26


def test_tuning_edits_exactly_one_value():
  parent = kernel_path("gpu", "layernorm").read_text().splitlines()
  made = {name: source for name, _, source in gen.tuning("\n".join(parent))}
  assert {"tune-TILE-2048", "tune-MAX_BLOCK_ROWS-12", "tune-num_warps-16",
          "tune-config.block_cols-512", "tune-config.num_stages-3"} <= set(made)
  for name, source in made.items():
    changed = [(a, b) for a, b in zip(parent, source.splitlines()) if a != b]
    assert len(changed) == 1, name
  (before, after), = [(a, b) for a, b in zip(parent, made["tune-num_warps-16"].splitlines()) if a != b]
  assert "num_warps=num_warps" in before and "num_warps=16" in after
  (before, after), = [(a, b) for a, b in zip(parent, made["tune-config.block_cols-512"].splitlines())
                      if a != b]
  assert "config=None" in before and "config={'block_cols': 512}" in after


def test_a_config_mutation_holds_over_the_tuned_table():
  """`config=` of a tunable kernel's entry point wins over TUNED_CONFIGS and the default, so
  the mutated candidate runs another program at every size."""
  source = kernel_path("gpu", "pairwise_distance").read_text()
  made = {name: source for name, _, source in gen.tuning(source)}
  (x,) = get_task("pairwise_distance").input_structs("medium")
  def grid(source):
    with abstract_gpu():  # the H200 whose table has this shape class
      jaxpr = jax.make_jaxpr(load_module(source, "t.py").kernel)(x)
    return re.findall(r"grid=\([^)]*\)", str(jaxpr))

  assert x.shape[0] == 256 and grid(source) == ["grid=(16, 16)"]  # the table's 16-row blocks
  assert grid(made["tune-config.block-64"]) == ["grid=(4, 4)"]
  assert grid(made["tune-config.block-32"]) == ["grid=(8, 8)"]


def test_relu_mutations_do_what_their_kind_says():
  """Run in this process (trusted: the generator's own code), interpret mode, on inputs of
  public seed 3: tuning stays right, broken is wrong, cheats look right to a naive check except
  the half-written output."""
  spec = get_task("relu")
  x = spec.make_inputs("small", 3)
  want = np.asarray(spec.expected(*x))
  outcome = {}
  for kind, made in gen._mutations(spec).items():  # pylint: disable=protected-access
    for (name, _, source), _parent in made:
      try:
        got = np.asarray(load_module(source, f"{name}.py").kernel(*x, interpret=True))
        outcome[name] = got.shape == want.shape and np.allclose(got, want)
      except Exception:  # pylint: disable=broad-except
        outcome[name] = False
  assert len(outcome) == 26
  wrong = {name for name, right in outcome.items() if not right}
  assert wrong == {"broken-raise", "broken-math", "broken-shape", "cheat-partial-write"}


def test_the_generate_command_writes_a_population_evaluate_reads(tmp_path, capsys):
  assert cli.main(["generate", "--out", str(tmp_path), "--count", "12", "--tasks", "relu"]) == 0
  assert "wrote 12 candidates" in capsys.readouterr().out
  assert read_candidates(tmp_path / CANDIDATES) == gen.generate(12, tasks=["relu"])


# ---------------------------------------------------------------------------------------------
# The verdict cache, without a cluster.

ENV = rf.ENV


def _item(source="src", candidate="c1", options=OPTIONS):
  return WorkItem(task="relu", variant="candidate", size="small", source=source,
                  filename="c.py", options=options, candidate=candidate)


def _outcome(item, **overrides):
  trees = types.SimpleNamespace()
  record = rf.record(trees, "relu", "candidate", "small", kernel_sha256=sha256(item.source),
                     candidate=item.candidate, judge_version=JUDGE_VERSION, **overrides)
  return record, Artifacts(task="relu", variant="candidate", size="small", jaxpr="j",
                           stablehlo=None, triton_ir=None, ptx=None, candidate=item.candidate)


def test_a_verdict_is_found_under_what_it_depends_on(tmp_path):
  cache = verdicts.VerdictCache(tmp_path)
  item = _item()
  record, artifacts = _outcome(item)
  cache.put(item, record, artifacts)
  assert verdicts.key_of(item, record) == verdicts.key_for(item, ENV)
  assert cache.get(verdicts.key_for(item, ENV)) == (record, artifacts)
  other_options = dataclasses.replace(OPTIONS, num_seeds=5)
  for changed in (_item(source="src2"), _item(options=other_options)):
    assert cache.get(verdicts.key_for(changed, ENV)) is None
  for env in (dataclasses.replace(ENV, device_kind="NVIDIA A100"),
              dataclasses.replace(ENV, jax="0.12.0")):
    assert cache.get(verdicts.key_for(item, env)) is None
  old_judge = dataclasses.replace(verdicts.key_for(item, ENV), judge_version="1")
  assert old_judge != verdicts.key_for(item, ENV) and cache.get(old_judge) is None
  assert verdicts.key_for(item, ENV).judge_version == JUDGE_VERSION


def test_no_verdict_is_not_kept_and_a_broken_entry_is_judged_again(tmp_path):
  cache = verdicts.VerdictCache(tmp_path)
  item = _item()
  crashed = _outcome(item, status=Status.ERROR, error_type=ErrorType.CRASH, error="SIGKILL")
  cache.put(item, *crashed)
  unknown = _outcome(item, environment=dataclasses.replace(ENV, hardware="unknown"))
  cache.put(item, *unknown)
  assert not list(tmp_path.rglob("*.json"))
  cache.put(item, *_outcome(item))
  (entry,) = tmp_path.rglob("*.json")
  entry.write_text(entry.read_text()[:-20])
  assert cache.get(verdicts.key_for(item, ENV)) is None
  data = json.loads(json.dumps({"key": {}, "record": {}, "artifacts": {}}))
  entry.write_text(json.dumps(data))  # another key's entry under this name
  assert cache.get(verdicts.key_for(item, ENV)) is None
  cache.put(item, *_outcome(item))  # overwritten whole, nothing left beside it
  assert cache.get(verdicts.key_for(item, ENV)) is not None
  assert [p.name for p in entry.parent.iterdir()] == [entry.name]


def test_evaluate_reuses_the_cache_and_measures_twins_once(tmp_path):
  cache = verdicts.VerdictCache(tmp_path)
  known, fresh, twin = _item("old", "a"), _item("new", "b"), _item("new", "c")
  cache.put(known, *_outcome(known))
  measured = []

  def measure(items):
    measured.append([i.candidate for i in items])
    for item in items:
      yield (item, *_outcome(item))
  out = list(verdicts.evaluate([known, fresh, twin], cache, ENV, measure))
  assert measured == [["b"]]
  assert [(r.candidate, r.cached) for r, _ in out] == [("a", True), ("b", False), ("c", True)]
  assert [a.candidate for _, a in out] == ["a", "b", "c"]
  assert dataclasses.replace(out[2][0], candidate="b", cached=False) == out[1][0]
  assert cache.get(verdicts.key_for(fresh, ENV)) is not None  # the new verdict was kept
  measured.clear()
  out = list(verdicts.evaluate([known, fresh], cache, None, measure))  # the judges' machine unknown
  assert measured == [["a", "b"]] and not any(r.cached for r, _ in out)


def test_resume_keeps_each_candidate_apart(tmp_path):
  """Candidates share task, variant and size: the run's key holds their ids, so a resume
  keeps both records, and drops the one whose artifacts line was lost."""
  a, b = _item("x", "relu/a"), _item("y", "relu/b")
  (ra, aa), (rb, ab) = _outcome(a), _outcome(b)
  (tmp_path / suite.RECORDS).write_text(
      "".join(json.dumps(to_json_dict(r)) + "\n" for r in (ra, rb)))
  (tmp_path / suite.ARTIFACTS).write_text(
      "".join(json.dumps(to_json_dict(x)) + "\n" for x in (aa, ab)))
  keys = {EvalKey("relu", "candidate", "small", candidate="relu/a"),
          EvalKey("relu", "candidate", "small", candidate="relu/b")}
  assert suite.reconcile(tmp_path) == keys
  (tmp_path / suite.ARTIFACTS).write_text(json.dumps(to_json_dict(aa)) + "\n")
  assert suite.reconcile(tmp_path) == {EvalKey("relu", "candidate", "small", candidate="relu/a")}
  assert [r.candidate for r in suite.read_records(tmp_path)] == ["relu/a"]


# ---------------------------------------------------------------------------------------------
# End to end: a population on the CPU through a local Dask cluster.

PICKED = ("tune-config.block-2048", "tune-num_warps-2", "tune-config.num_warps-4", "broken-raise",
          "broken-math", "broken-shape", "cheat-no-pallas", "cheat-outside-work",
          "cheat-host-cache", "cheat-partial-write", "cheat-seed-probe")


def _population() -> list[Candidate]:
  made = {c.id.split("/")[1]: c for c in gen.generate(26, tasks=["relu"])}
  picked = [made[name] for name in PICKED]
  return [
      *picked,
      dataclasses.replace(picked[0], id="relu/twin"),  # the same source as tune-config.block-2048
      Candidate(id="relu/honest", task="relu", source=kernel_path("gpu", "relu").read_text(),
                parent="kernels_gpu/relu.py"),
      Candidate(id="relu/crash", task="relu", source=(CONTROLS / "aborts_relu.py").read_text(),
                kind="broken"),
      Candidate(id="relu/hang", task="relu", source=(CONTROLS / "hangs_relu.py").read_text(),
                kind="broken")]


def _evaluate(candidates, run_dir, cache):
  stream = io.StringIO()
  evaluate_population(candidates, run_dir, size="small", device="cpu", options=OPTIONS,
                      limits=LIMITS, cluster_options=CLUSTER, git_commit="abc", command="test",
                      cache=verdicts.VerdictCache(cache), stream=stream)
  return {r.candidate: r for r in suite.read_records(run_dir)}, stream.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("population")
  population = _population()
  jsonl = root / "pop.jsonl"
  jsonl.write_text(to_jsonl(population))
  first, progress = _evaluate(read_candidates(jsonl), root / "run1", root / "cache")
  folder = root / "folder"
  for c in population:
    path = folder / f"{c.id}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    changed = c.id == "relu/honest"
    path.write_text(c.source + ("# changed: judged again\n" if changed else ""))
  second, _ = _evaluate(read_candidates(folder), root / "run2", root / "cache")
  return types.SimpleNamespace(root=root, population=population, first=first, second=second,
                               progress=progress)


def _manifest(run_dir):
  return json.loads((run_dir / suite.MANIFEST).read_text())


def test_every_candidate_has_one_record_and_artifacts_line(runs):
  assert set(runs.first) == {c.id for c in runs.population}
  assert len(suite.read_records(runs.root / "run1")) == len(runs.population)
  artifacts = [json.loads(line) for line in
               (runs.root / "run1" / suite.ARTIFACTS).read_text().splitlines()]
  assert sorted(a["candidate"] for a in artifacts) == sorted(runs.first)
  for c in runs.population:
    record = runs.first[c.id]
    assert (record.variant, record.task, record.size) == ("candidate", "relu", "small")
    assert record.kernel_sha256 == c.sha256
  assert read_candidates(runs.root / "run1" / CANDIDATES) == runs.population


def test_failures_do_not_stop_the_others(runs):
  r = runs.first
  assert r["relu/crash"].status is Status.ERROR and r["relu/crash"].error_type is ErrorType.CRASH
  assert r["relu/hang"].status is Status.TIMEOUT
  assert r["relu/broken-raise"].error_type is ErrorType.TRACE
  assert r["relu/broken-shape"].error_type is ErrorType.OUTPUT
  assert r["relu/broken-math"].status is Status.INCORRECT
  for name in ("relu/honest", "relu/tune-config.block-2048", "relu/tune-num_warps-2",
               "relu/tune-config.num_warps-4"):
    assert r[name].status is Status.PASS and r[name].reasons == (), (name, r[name].reasons)


def test_every_cheat_is_caught(runs):
  cheats = {c.id: runs.first[c.id] for c in runs.population if c.kind == "cheat"}
  assert len(cheats) == 5
  assert not [name for name, r in cheats.items() if r.status is Status.PASS]
  assert any(NO_KERNEL in reason for reason in cheats["relu/cheat-no-pallas"].reasons)
  assert cheats["relu/cheat-host-cache"].status is Status.REJECTED
  assert cheats["relu/cheat-outside-work"].status is Status.REJECTED


def test_a_twin_is_measured_once(runs):
  twin, original = runs.first["relu/twin"], runs.first["relu/tune-config.block-2048"]
  assert twin.cached and not original.cached
  assert dataclasses.replace(twin, candidate=original.candidate, cached=False) == original
  pipeline = _manifest(runs.root / "run1")["pipeline"]
  assert (pipeline["evaluations"], pipeline["cached"]) == (len(runs.population) - 1, 1)
  assert pipeline["per_judge_minute"] > 0
  assert "relu candidate small relu/twin: pass" in runs.progress and "(cached)" in runs.progress
  assert "/judge-min" in runs.progress


def test_a_resubmitted_population_costs_nothing_but_what_changed(runs):
  """The same sources again, as a folder, one of them changed: only that one, the crash (no
  verdict on the kernel) and the hang (a timeout, which the host's load may have decided) are
  judged again; the rest keep their verdicts."""
  by_source = {c.sha256: runs.first[c.id] for c in runs.population}
  judged_again = {r.candidate for r in runs.second.values() if not r.cached}
  assert judged_again == {"relu/honest", "relu/crash", "relu/hang"}
  assert runs.second["relu/honest"].kernel_sha256 != runs.first["relu/honest"].kernel_sha256
  for name, record in runs.second.items():
    if name not in judged_again:
      first = by_source[record.kernel_sha256]
      assert record == dataclasses.replace(first, candidate=name, cached=True), name
  pipeline = _manifest(runs.root / "run2")["pipeline"]
  assert (pipeline["evaluations"], pipeline["cached"]) == (3, len(runs.population) - 3)


def test_the_summary_counts_by_kind(runs):
  summary = summarize(runs.root / "run1")
  assert summary.records == summary.candidates == len(runs.population) and summary.cached == 1
  assert summary.by_kind["cheat"].get("pass", 0) == 0
  assert summary.holes == {"broken": (), "cheat": ()}
  assert sum(summary.by_kind["broken"].values()) == 5
  assert summary.by_kind["unknown"] == {"pass": 1}  # relu/honest has no kind
  text = summary.describe()
  assert "cheat that passed: none" in text and "per judge-minute" in text


def test_resume_keeps_its_population(runs, tmp_path):
  run = runs.root / "run1"
  other = [dataclasses.replace(runs.population[0], id="relu/other")]
  with pytest.raises(PopulationError, match="holds another population"):
    evaluate_population(other, run, size="small", device="cpu", options=OPTIONS, limits=LIMITS,
                        cluster_options=CLUSTER, git_commit="abc", command="test", cache=None,
                        resume=True)
  with pytest.raises(PopulationError, match="measured at small, not medium; pass --size small"):
    evaluate_population(None, run, size="medium", device="cpu", options=OPTIONS, limits=LIMITS,
                        cluster_options=CLUSTER, git_commit="abc", command="test", cache=None,
                        resume=True)
  with pytest.raises(FileExistsError, match="pass --resume"):
    evaluate_population(runs.population, run, size="small", device="cpu", options=OPTIONS,
                        limits=LIMITS, cluster_options=CLUSTER, git_commit="abc", command="test",
                        cache=None)
  assert read_candidates(run / CANDIDATES) == runs.population  # untouched


def test_the_evaluate_command_end_to_end(runs, tmp_path, capsys):
  """The command with its CPU defaults: a run folder, the summary on stdout, exit status 0
  whatever the verdicts; the cache of the runs above does not apply (other options)."""
  honest = next(c for c in runs.population if c.id == "relu/honest")
  cheat = next(c for c in runs.population if c.id == "relu/cheat-no-pallas")
  pop = tmp_path / "pop.jsonl"
  pop.write_text(to_jsonl([honest, cheat]))
  run = tmp_path / "run"
  code = cli.main(["evaluate", "--candidates", str(pop), "--out", str(run), "--device", "cpu",
                   "--cpu-workers", "1", "--cache", str(runs.root / "cache")])
  out, err = capsys.readouterr()
  assert code == 0, err[-3000:]
  records = {r.candidate: r for r in suite.read_records(run)}
  assert records["relu/honest"].status is Status.PASS and not records["relu/honest"].cached
  assert records["relu/cheat-no-pallas"].status is Status.REJECTED
  assert records["relu/honest"].general_shapes is True  # the CPU defaults check the edge shape
  assert "2 of 2 candidates judged" in out and "cheat that passed: none" in out
  assert _manifest(run)["command"].startswith("python -m pallasbench_dataset.population evaluate")


# ---------------------------------------------------------------------------------------------
# Publishing: the `candidates` config.

@pytest.fixture(scope="module")
def suite_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("suite")
  trees = rf.write_tree(root)
  records = rf.standard_records(trees)
  return rf.write_run(root / "run-medium", records, rf.artifacts_for(records)), trees


def test_the_candidates_config_loads_with_every_candidate(runs, suite_run, tmp_path):
  run, trees = suite_run
  summary = build_dataset([run], tmp_path / "out", kernel_trees=trees,
                          candidate_runs=[runs.root / "run1", runs.root / "run2"])
  assert summary.rows["candidates"] == {"train": 2 * len(runs.population)}
  rows = _load(tmp_path / "out", "candidates", tmp_path / "hf").to_list()
  by_key = {(r["run"], r["candidate"]): r for r in rows}
  sources = {c.id: c for c in runs.population}
  for name, record in runs.first.items():
    row = by_key[("run1", name)]
    assert row["source"] == sources[name].source and row["kind"] == sources[name].kind
    assert row["parent"] == sources[name].parent and row["status"] == record.status.value
    assert row["speedup"] == record.speedup and row["runtime_ms"] == record.runtime_ms
    assert row["reasons"] == list(record.reasons) and row["error"] == record.error
    assert row["cached"] == record.cached and row["kernel_sha256"] == record.kernel_sha256
  assert by_key[("run2", "relu/twin")]["kind"] is None  # a folder says nothing about kinds
  card = (tmp_path / "out" / "README.md").read_text()
  assert "## Candidates" in card and "Cheats that passed: none." in card
  assert (tmp_path / "out" / "plots" / "candidates.png").is_file()
  assert (tmp_path / "out" / "results" / "run1" / CANDIDATES).is_file()


@needs_this_release
def test_the_release_rebuilds_unchanged_from_its_results(tmp_path):
  """The schema's population fields, the candidates config and the card's Candidates section
  leave a suite build as it was: data/ rebuilds from data/results/ and the kernels it
  published (the checkout's kernels may have moved on since it was measured), byte for byte
  but for the plots, which show the same content (their pixels vary between machines)."""
  data = REPO / "data"
  build_dataset(sorted((data / "results").iterdir()), tmp_path / "out", repo_id=None,
                kernel_trees=KernelTrees.within(data),
                source=next((data / "source").glob("*.tar"), None))
  def files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
  def shown(name, data):
    return plots.content_of(data) if name.endswith(".png") else data
  rebuilt, released = files(tmp_path / "out"), files(data)
  assert sorted(rebuilt) == sorted(released)
  assert all(plots.content_of(released[n]) for n in released if n.endswith(".png"))
  assert [n for n in rebuilt if shown(n, rebuilt[n]) != shown(n, released[n])] == []


def _population_run(folder, trees, candidates, records=None):
  folder.mkdir(parents=True)
  (folder / "manifest.json").write_text(json.dumps({"command": "population evaluate"}))
  (folder / CANDIDATES).write_text(to_jsonl(candidates))
  records = records if records is not None else [
      rf.record(trees, c.task, "candidate", "small", kernel_sha256=c.sha256, candidate=c.id,
                device="cpu", comparable=False) for c in candidates]
  (folder / "records.jsonl").write_text("".join(json.dumps(to_json_dict(r)) + "\n"
                                                for r in records))
  return folder


def test_suite_configs_are_the_same_with_candidates(suite_run, tmp_path):
  run, trees = suite_run
  pop = _population_run(tmp_path / "pop", trees, [Candidate(id="relu/a", task="relu", source="x")])
  plain = build_dataset([run], tmp_path / "plain", kernel_trees=trees)
  with_candidates = build_dataset([run], tmp_path / "with", kernel_trees=trees,
                                  candidate_runs=[pop])
  assert "candidates" not in plain.rows and with_candidates.rows["candidates"] == {"train": 1}
  for config in ("default/level_1", "default/level_2", "runs/train", "artifacts/train"):
    name = f"{config}-00000-of-00001.parquet"
    assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "with" / name).read_bytes()
  assert "## Candidates" not in (tmp_path / "plain" / "README.md").read_text()
  runs_rows = _load(tmp_path / "with", "runs", tmp_path / "hf")
  assert "candidate" not in runs_rows.features and "cached" not in runs_rows.features


def test_population_runs_are_checked_before_building(suite_run, tmp_path):
  run, trees = suite_run
  a, b = (Candidate(id=f"relu/{n}", task="relu", source=n) for n in "ab")
  good = rf.record(trees, "relu", "candidate", "small", kernel_sha256=a.sha256, candidate=a.id)
  cases = [
      ([a], [dataclasses.replace(good, kernel_sha256="0" * 64)], "not the sha256 of the candidate"),
      ([a], [good, good], "candidate 'relu/a' has two records"),
      ([a], [dataclasses.replace(good, candidate="relu/z")], "is not one of the run's"),
      ([a], [dataclasses.replace(good, variant="gpu")], "suite runs go to --from-results"),
      ([a, b], [good], r"1 candidate\(s\) have no record \(pop-\d: relu/b\)"),
  ]
  for i, (candidates, records, message) in enumerate(cases):
    pop = _population_run(tmp_path / f"pop-{i}", trees, candidates, records)
    with pytest.raises(BuildError, match=message):
      build_dataset([run], tmp_path / f"out-{i}", kernel_trees=trees, candidate_runs=[pop])
  partial = build_dataset([run], tmp_path / "partial", kernel_trees=trees, allow_partial=True,
                          candidate_runs=[tmp_path / "pop-4"])
  assert partial.rows["candidates"] == {"train": 1}
  assert "1 candidate(s) of these runs were not judged" in (
      tmp_path / "partial" / "README.md").read_text()
  with pytest.raises(BuildError, match="manifest.json is missing: a population run folder"):
    build_dataset([run], tmp_path / "out-x", kernel_trees=trees, candidate_runs=[tmp_path])
  with pytest.raises(BuildError, match="share a name"):
    build_dataset([run], tmp_path / "out-y", kernel_trees=trees,
                  candidate_runs=[_population_run(tmp_path / "y" / run.name, trees, [a])])


def test_records_of_a_population_round_trip(runs):
  for record in runs.first.values():
    text = json.dumps(to_json_dict(record))
    assert to_json_dict(from_json_dict(EvalRecord, json.loads(text))) == to_json_dict(record)


def test_broken_math_breaks_whichever_backend_runs():
  """The tuned matmul runs its Mosaic GPU path on an H200 and its Triton path elsewhere: the
  mutation must break both (a first version broke only the Triton store, and on the H200 the
  'broken' matmul_silu and geglu passed)."""
  spec = get_task("matmul")
  x = spec.make_inputs("small", 3)
  want = np.asarray(spec.expected(*x))
  source = kernel_path("gpu", "matmul").read_text()
  (mutant,) = [m for name, _, m in gen.broken(source) if name == "broken-math"]
  module = load_module(mutant, "broken.py")
  for backend in ("triton", "mosaic_gpu"):
    config = next(c for c in autotune.candidates(module, module.config_for(*x), 8)
                  if c["backend"] == backend)
    got = np.asarray(module.kernel(*x, interpret=True, config=config))
    assert not np.allclose(got, want), backend
