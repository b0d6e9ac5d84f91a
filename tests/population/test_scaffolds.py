"""Scaffolds for evolutionary search, driven through OpenEvolve's and ShinkaEvolve's own code.

No LLM is called. OpenEvolve's `Evaluator` loads a scaffold's evaluator.py from its config.yaml
as OpenEvolve's controller does; the broken child is made with OpenEvolve's own diff and
EVOLVE-BLOCK code. Shinka's `JobScheduler` runs evaluate.py as a program with the job settings
of shinka.yaml and reads the results with Shinka's `load_results`. Each judge evaluation runs
on the CPU in interpret mode at the `small` size.
"""

import ast
import asyncio
import dataclasses
import functools
import importlib.util
import json
import math
import pathlib

import jax
import pytest
import yaml
from openevolve.config import Config
from openevolve.evaluator import Evaluator
from openevolve.utils.code_utils import apply_diff, enforce_evolve_blocks, parse_evolve_blocks
from shinka.cli.run_config import load_optional_yaml_config
from shinka.launch import JobScheduler, LocalJobConfig

from pallasbench_dataset import scaffold
from pallasbench_dataset.evolve import blocks, prompt, scoring, shinka_adapter
from pallasbench_dataset.kernels import kernel_path, load_module
from pallasbench_dataset.schema import Status
from pallasbench_dataset.tasks import list_tasks
from tests import runfixtures

CASES = [(spec, variant) for spec in list_tasks() for variant in ("gpu", "tpu")]
CPU_SMALL = {"size": "small", "device": "cpu"}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
  """Every scaffold of both frameworks, written once through the command line."""
  folder = tmp_path_factory.mktemp("scaffolds")
  for framework in scaffold.FRAMEWORKS:
    assert scaffold.main(["--framework", framework, "--all", "--out", str(folder)]) == 0
  return folder


def _with_block(program: str, body: str) -> str:
  """`program` with the inside of its EVOLVE-BLOCK replaced by `body`."""
  head, rest = program.split(blocks.START + "\n")
  return head + blocks.START + "\n" + body + blocks.END + rest.split(blocks.END, 1)[1]


def test_all_writes_both_variants_of_every_task(out):
  for framework, adapter in scaffold.FRAMEWORKS.items():
    folders = sorted(p.name for p in (out / framework).iterdir())
    assert folders == sorted(f"{spec.name}-{variant}" for spec, variant in CASES)
    for folder in (out / framework).iterdir():
      assert sorted(p.name for p in folder.iterdir()) == sorted(
          [adapter.PROGRAM, adapter.EVALUATOR, adapter.CONFIG, "README.md"])


@pytest.mark.parametrize("spec,variant", CASES, ids=[f"{s.name}-{v}" for s, v in CASES])
def test_initial_program_has_one_block_and_still_runs(out, spec, variant):
  program = (out / "openevolve" / f"{spec.name}-{variant}" / "initial_program.py").read_text()
  assert (out / "shinka" / f"{spec.name}-{variant}" / "initial.py").read_text() == program
  assert len(parse_evolve_blocks(program)) == 1  # OpenEvolve's reading
  lines = program.splitlines()
  assert lines.count(blocks.START) == 1 and lines.count(blocks.END) == 1  # Shinka's markers
  original = kernel_path(variant, spec.name).read_text()
  assert sorted(map(ast.dump, ast.parse(program).body)) == \
      sorted(map(ast.dump, ast.parse(original).body))  # the same statements, only reordered
  block = parse_evolve_blocks(program)[0][2]
  assert "def kernel(" in block and "import " not in block
  module = load_module(program, f"{spec.name}-{variant}")
  out_struct = jax.eval_shape(functools.partial(module.kernel, interpret=True),
                              *spec.input_structs("small"))
  assert out_struct.shape == spec.output_shape("small")


@pytest.mark.parametrize("spec,variant", CASES[:2] + CASES[-2:],
                         ids=lambda x: getattr(x, "name", x))
def test_configs_carry_the_task_and_load_in_each_framework(out, spec, variant):
  message = prompt.describe(spec, variant)
  assert spec.reference_source.strip() in message and f"kernels_{variant}/" in message
  oe_folder = out / "openevolve" / f"{spec.name}-{variant}"
  config = Config.from_yaml(oe_folder / "config.yaml")
  assert config.prompt.system_message == message
  assert config.enforce_evolve_blocks and not config.evaluator.cascade_evaluation
  sh_folder = out / "shinka" / f"{spec.name}-{variant}"
  parsed, runner = load_optional_yaml_config(
      task_dir=sh_folder, config_fname="shinka.yaml", allowed_field_types=_shinka_fields())
  assert parsed["evo"]["task_sys_msg"] == message and parsed["evo"]["use_text_feedback"]
  assert runner["max_evaluation_jobs"] == 1
  LocalJobConfig(**parsed["job"])
  for folder in (oe_folder, sh_folder):
    assert f'TASK = "{spec.name}"' in next(folder.glob("evaluat*.py")).read_text()


def _shinka_fields():
  """Shinka's config fields per namespace, as `shinka_run` checks a YAML config against them.

  EvolutionConfig and DatabaseConfig import Shinka's LLM clients, which this environment
  leaves out (pyproject.toml, the `evolve` extra): their field names are read from the
  installed sources instead.
  """
  root = pathlib.Path(importlib.util.find_spec("shinka").submodule_search_locations[0])

  def fields(relative, name):
    tree = ast.parse((root / relative).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    return {n.target.id: None for n in cls.body if isinstance(n, ast.AnnAssign)}

  return {"evo": fields("core/config.py", "EvolutionConfig"),
          "db": fields("database/dbase.py", "DatabaseConfig"),
          "job": {f.name: None for f in dataclasses.fields(LocalJobConfig)}}


def test_openevolve_scores_the_initial_program_and_zeroes_a_broken_child(tmp_path):
  folder = scaffold.write("openevolve", "relu", "gpu", tmp_path)
  config = Config.from_yaml(folder / "config.yaml")
  config.evaluator.evaluator_args = CPU_SMALL  # the config's way to choose size and device
  evaluator = Evaluator(config.evaluator, str(folder / "evaluator.py"))
  parent = (folder / "initial_program.py").read_text()

  metrics = asyncio.run(evaluator.evaluate_program(parent, "parent"))
  verdict = evaluator.get_pending_artifacts("parent")["verdict"]
  assert metrics["status"] == "pass" and metrics["passed"] == 1.0 and metrics["correct"] == 1.0
  # A CPU judge's interpret-mode speedup is reported, never scored.
  assert metrics["combined_score"] == scoring.UNTIMED_PASS and metrics["speedup"] > 0
  assert "relu [small, cpu]: pass" in verdict

  # An LLM's diff: the kernel stores zeros, and an edit outside the block is reverted.
  store = next(line for line in parent.splitlines() if "jnp.maximum(x, 0.0)" in line)
  fixed = next(line for line in parent.splitlines() if line.startswith("FIX_APPLIED"))
  diff = "".join(f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n" for old, new in [
      (store, store.replace("jnp.maximum(x, 0.0)", "jnp.zeros_like(x)")),
      (fixed, 'FIX_APPLIED: Final = "edited outside the block"')])
  child = enforce_evolve_blocks(parent, apply_diff(parent, diff, config.diff_pattern))
  assert "jnp.zeros_like(x)" in child and fixed in child.splitlines()
  metrics = asyncio.run(evaluator.evaluate_program(child, "child"))
  verdict = evaluator.get_pending_artifacts("child")["verdict"]
  assert metrics["combined_score"] == 0.0 and metrics["passed"] == 0.0
  assert metrics["status"] in ("rejected", "incorrect")
  assert f"relu [small, cpu]: {metrics['status']}" in verdict
  assert any(line.startswith("  - ") for line in verdict.splitlines())  # the judge's reasons


def test_shinka_scores_the_initial_program_and_zeroes_a_broken_one(tmp_path, monkeypatch):
  monkeypatch.setenv(scoring.ENV_SIZE, "small")  # the environment's way: evaluate.py inherits it
  monkeypatch.setenv(scoring.ENV_DEVICE, "cpu")
  folder = scaffold.write("shinka", "relu", "gpu", tmp_path)
  job = yaml.safe_load((folder / "shinka.yaml").read_text())["job"]
  scheduler = JobScheduler(
      "local", LocalJobConfig(eval_program_path=str(folder / "evaluate.py"), **job))
  initial = (folder / "initial.py").read_text()

  results, _ = scheduler.run(str(folder / "initial.py"), str(tmp_path / "initial"))
  metrics = results["metrics"]
  assert results["correct"] == {"correct": True, "error": None}
  assert metrics["combined_score"] == scoring.UNTIMED_PASS and metrics["public"]["speedup"] > 0
  assert metrics["public"]["status"] == "pass"
  assert (metrics["public"]["size"], metrics["public"]["device"]) == ("small", "cpu")
  assert "relu [small, cpu]: pass" in metrics["text_feedback"]

  broken = tmp_path / "broken.py"
  broken.write_text(_with_block(initial, "def kernel(x, *, interpret: bool = False):\n"
                                         "  raise ValueError('broken on purpose')\n"))
  results, _ = scheduler.run(str(broken), str(tmp_path / "broken"))
  metrics = results["metrics"]
  assert results["correct"]["correct"] is False
  assert "broken on purpose" in results["correct"]["error"]
  assert metrics["combined_score"] == 0.0 and metrics["public"]["status"] == "error"
  assert "broken on purpose" in metrics["text_feedback"]
  assert "relu [small, cpu]: error" in results["stdout_log"]  # what Shinka's fix prompt shows
  assert json.loads((tmp_path / "broken" / "metrics.json").read_text()) == metrics


def test_unknown_task_framework_or_variant_say_what_exists(tmp_path, capsys):
  assert scaffold.main(["--framework", "shinka", "--task", "nope", "--out", str(tmp_path)]) == 2
  assert "unknown task 'nope'; known tasks: relu, gelu" in capsys.readouterr().err
  with pytest.raises(SystemExit) as exit_info:
    scaffold.main(["--framework", "alphaevolve", "--task", "relu", "--out", str(tmp_path)])
  assert exit_info.value.code == 2
  assert "invalid choice: 'alphaevolve'" in capsys.readouterr().err
  with pytest.raises(KeyError, match="unknown framework 'alphaevolve'; known frameworks: "
                                     "openevolve, shinka"):
    scaffold.files("alphaevolve", "relu", "gpu")
  with pytest.raises(ValueError, match="variant must be gpu or tpu"):
    scaffold.files("shinka", "relu", "candidate")
  with pytest.raises(SystemExit):
    scaffold.main(["--framework", "shinka", "--all", "--variant", "tpu", "--out", str(tmp_path)])
  assert "--all writes both variants" in capsys.readouterr().err
  assert not any(tmp_path.iterdir())


def test_only_a_pass_scores_and_the_feedback_holds_reasons_and_error():
  record = functools.partial(runfixtures.record, None, "relu", kernel_sha256="0" * 64)
  assert scoring.combined_score(record()) == 2.0  # baseline 1 ms, kernel 0.5 ms
  untimed = record(device="cpu", comparable=False)  # interpret mode: kept, never scored
  assert untimed.speedup == 2.0 and not untimed.timing_comparable
  assert scoring.combined_score(untimed) == scoring.UNTIMED_PASS
  for impossible in (math.inf, math.nan, 0.0, -2.0):  # no timing gives one: never a score
    assert scoring.combined_score(
        dataclasses.replace(record(), speedup=impossible)) == scoring.UNTIMED_PASS
  rejected = record(status=Status.REJECTED, reasons=("a timing above the hardware's limit",))
  assert rejected.speedup == 2.0 and scoring.combined_score(rejected) == 0.0
  correct, metrics = shinka_adapter.results(rejected, scoring.Settings(size="medium", device="gpu"))
  assert correct == {"correct": False, "error": "a timing above the hardware's limit"}
  assert metrics["combined_score"] == 0.0 and metrics["public"]["passed"] == 0.0
  assert "  - a timing above the hardware's limit" in metrics["text_feedback"]
  failed = record(status=Status.ERROR, correct=False, runtime_ms=None,
                  error="ValueError: boom\nraised at kernels_gpu/relu.py:30 in kernel")
  assert {"speedup", "runtime_ms"}.isdisjoint(scoring.metrics(failed))  # not measured: absent
  assert scoring.feedback(failed)["error"].endswith("relu.py:30 in kernel")  # the whole text
  assert shinka_adapter.results(failed, scoring.Settings(size="small", device="cpu"))[0] == \
      {"correct": False, "error": "ValueError: boom"}


def test_settings_config_then_environment_then_defaults():
  env = {scoring.ENV_SIZE: "medium", scoring.ENV_DEVICE: "cpu"}
  assert scoring.settings("edge", "cpu", env) == scoring.Settings(size="edge", device="cpu")
  assert scoring.settings(None, None, env) == scoring.Settings(size="medium", device="cpu")
  assert scoring.settings(None, "cpu", {}) == scoring.Settings(size="small", device="cpu")
  with pytest.raises(ValueError, match="size must be one of"):
    scoring.settings("huge", "cpu", {})
  with pytest.raises(ValueError, match="device must be auto, gpu or cpu"):
    scoring.settings(None, None, {scoring.ENV_DEVICE: "tpu"})


def test_fixed_constants_rise_above_the_block_with_their_comments():
  source = ('"""doc."""\nimport math\n\nBLOCK = 128\n# the task\'s eps\nEPS = 1e-5\n'
            'SQRT_2_OVER_PI = math.sqrt(2 / math.pi)\n\n\ndef kernel(x):\n  return x * EPS\n')
  assert blocks.mark(source) == (
      '"""doc."""\nimport math\n# the task\'s eps\nEPS = 1e-5\n'
      'SQRT_2_OVER_PI = math.sqrt(2 / math.pi)\n\n' + blocks.START +
      '\nBLOCK = 128\n\n\ndef kernel(x):\n  return x * EPS\n' + blocks.END + '\n')


def test_a_fixed_name_that_reads_the_block_stays_in_it():
  source = ("import jax\nBLOCK = 8\nEPS = 1.0 / BLOCK\nTASK_NAME = 'x'; SCALE = 2\n"
            "def kernel(x):\n  return x\n")
  marked = blocks.mark(source)
  assert marked.splitlines()[:2] == ["import jax", blocks.START]
  assert "EPS = 1.0 / BLOCK" in parse_evolve_blocks(marked)[0][2]
  assert "TASK_NAME = 'x'; SCALE = 2" in parse_evolve_blocks(marked)[0][2]


@pytest.mark.parametrize("source,message", [
    ("import jax\n# EVOLVE-BLOCK-START\ndef kernel(x):\n  return x\n", "already mentions"),
    ('"""doc."""\nimport jax\nTASK_NAME = "relu"\n', "nothing to evolve"),
    ("def kernel(x:\n", "does not parse"),
])
def test_sources_that_cannot_take_one_block_are_refused(source, message):
  with pytest.raises(blocks.BlockError, match=message):
    blocks.mark(source, "k.py")
