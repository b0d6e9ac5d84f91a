"""OpenEvolve's contract (openevolve 0.4.1 on PyPI) and the scaffold files that meet it.

`openevolve-run initial_program.py evaluator.py --config config.yaml` loads evaluator.py with
importlib and calls `evaluate(program_path, **evaluator.evaluator_args)` in a worker thread on
a temporary copy of each program (`openevolve/evaluator.py`: `_load_evaluation_function`,
`_resolve_evaluator_kwargs`, `_direct_evaluate`; `cascade_evaluation: false`, as this
evaluator has one stage). It accepts a dict of metrics or an `EvaluationResult(metrics,
artifacts)` (`openevolve/evaluation_result.py`); programs rank by `metrics["combined_score"]`
(`openevolve/utils/metrics_utils.py`, `get_fitness_score`), and a parent's artifacts are
rendered into its child's prompt (`prompt.include_artifacts`, `PromptSampler._render_artifacts`
in `openevolve/prompt/sampler.py`). The task description goes in `prompt.system_message`;
`enforce_evolve_blocks: true` reverts any edit outside the EVOLVE-BLOCK
(`openevolve/utils/code_utils.py`, `enforce_evolve_blocks`).
"""

from __future__ import annotations

import os
from typing import Any, Final

from pallasbench_dataset.evolve import scoring

TITLE: Final = "OpenEvolve"
PROGRAM: Final = "initial_program.py"
EVALUATOR: Final = "evaluator.py"
CONFIG: Final = "config.yaml"
PROMPT_KEY: Final = "prompt.system_message"
SETTINGS_HINT: Final = "`evaluator.evaluator_args` (`size`, `device`)"


def evaluate_program(task: str, program_path: str | os.PathLike, *, size: str | None = None,
                     device: str | None = None) -> Any:
  """What a scaffold's `evaluate()` returns: the judge's metrics, and its feedback as artifacts."""
  # Imported here: writing a scaffold must not need OpenEvolve installed.
  from openevolve.evaluation_result import EvaluationResult
  record = scoring.judge(task, program_path, scoring.settings(size, device))
  return EvaluationResult(metrics=scoring.metrics(record), artifacts=scoring.feedback(record))


def evaluator_source(task: str, title: str) -> str:
  return f'''"""OpenEvolve evaluator for {title}: the sealed judge scores each program.

OpenEvolve imports this file and calls evaluate(program_path, **evaluator.evaluator_args);
size and device come from there, else from PALLASBENCH_SIZE / PALLASBENCH_DEVICE (README.md).
"""
from pallasbench_dataset.evolve.openevolve_adapter import evaluate_program

TASK = "{task}"


def evaluate(program_path, size=None, device=None):
  return evaluate_program(TASK, program_path, size=size, device=device)
'''


def config(system_message: str) -> dict[str, Any]:
  """config.yaml: one evaluation at a time (the judge is heavy), artifacts in the prompt."""
  return {
      "max_iterations": 100,
      "checkpoint_interval": 10,
      "random_seed": 42,
      "language": "python",
      "diff_based_evolution": True,
      "enforce_evolve_blocks": True,
      "max_code_length": 40000,
      "llm": {"api_base": "https://api.openai.com/v1",
              "models": [{"name": "gpt-5-mini", "weight": 1.0}],
              "temperature": 0.7, "max_tokens": 16384, "timeout": 600, "retries": 3},
      "prompt": {"system_message": system_message, "num_top_programs": 3,
                 "num_diverse_programs": 2, "include_artifacts": True},
      "database": {"population_size": 200, "archive_size": 40, "num_islands": 2,
                   "migration_interval": 20},
      "evaluator": {"timeout": scoring.FRAMEWORK_TIMEOUT_S, "max_retries": 0,
                    "cascade_evaluation": False, "parallel_evaluations": 1,
                    "evaluator_args": {"size": None, "device": None}},
  }


CONFIG_HEADER: Final = """\
# OpenEvolve settings for {title},
# written by `python -m pallasbench_dataset.scaffold`.
# The task description is prompt.system_message. evaluator.evaluator_args.size / .device choose
# the judge's size (small, medium, large, edge) and device (auto, gpu, cpu); null defers to
# PALLASBENCH_SIZE / PALLASBENCH_DEVICE, then to device auto and size medium on a GPU, small
# on a CPU. llm.api_base and llm.models name the LLM (OPENAI_API_KEY holds the key).
"""

RUN: Final = """\
With the project's environment active (`source .venv/bin/activate` in the checkout;
`./scripts/setup.sh` installs OpenEvolve 0.4.1) and `OPENAI_API_KEY` set (or `llm.api_base` and
`llm.models` in config.yaml pointed at another OpenAI-compatible endpoint), from this folder:

```bash
openevolve-run initial_program.py evaluator.py --config config.yaml --iterations 50 --output run
```

The best program is `run/best/best_program.py`. Each evaluation's feedback reaches the next
prompt as OpenEvolve artifacts (`verdict`, `error`, `edge_error`, `kernel_output`).
"""
