"""ShinkaEvolve's contract (shinka-evolve 0.0.7 on PyPI) and the scaffold files that meet it.

`shinka_run --task-dir DIR --config-fname shinka.yaml ...` wants `evaluate.py` and `initial.py`
in DIR (`shinka/cli/run.py`: `_validate_task_dir`, `_detect_initial_program`), copies
evaluate.py into the results folder, and runs it as a program for every candidate: `PYTHON
evaluate.py --program_path P --results_dir R`, followed by `--KEY VALUE` for each entry of
`job.extra_cmd_args` (`shinka/launch/scheduler.py`, `JobScheduler._build_command`). It then
reads R/correct.json `{"correct": bool, "error": ...}` and R/metrics.json
(`shinka/utils/general.py`, `load_results`): `combined_score` ranks programs; `public` is shown
to the LLM, `private` is not; `text_feedback` is shown with `evo.use_text_feedback: true`
(`shinka/core/async_runner.py`, `shinka/prompts/prompts_base.py`), and the job's stdout is
shown when Shinka asks the LLM to fix an incorrect program (`shinka/prompts/prompts_fix.py`).
The task description is `evo.task_sys_msg`.

`shinka.core.run_shinka_eval` would import the candidate into this process and call a function
of it; the judge must be the only one to import candidate code, so this evaluator writes the
two files itself, in the format `shinka.core.wrap_eval.save_json_results` writes (as Shinka's
own examples for programs it cannot import do, `examples/go_collatz_steps/evaluate.py`).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any, Final

from pallasbench_dataset.evaluate import summary_text
from pallasbench_dataset.evolve import scoring
from pallasbench_dataset.schema import EvalRecord

TITLE: Final = "ShinkaEvolve"
PROGRAM: Final = "initial.py"
EVALUATOR: Final = "evaluate.py"
CONFIG: Final = "shinka.yaml"
PROMPT_KEY: Final = "evo.task_sys_msg"
SETTINGS_HINT: Final = "`job.extra_cmd_args` (`{size: medium, device: gpu}`)"


def main(task: str, argv: Sequence[str] | None = None) -> int:
  """What a scaffold's evaluate.py runs: judge the program, write correct.json and metrics.json."""
  parser = argparse.ArgumentParser(description=f"Judge a candidate kernel for {task}.")
  parser.add_argument("--program_path", required=True, type=pathlib.Path)
  parser.add_argument("--results_dir", required=True, type=pathlib.Path)
  parser.add_argument("--size", default=None, help="small, medium, large or edge")
  parser.add_argument("--device", default=None, help="auto, gpu or cpu")
  args = parser.parse_args(argv)
  try:
    chosen = scoring.settings(args.size, args.device)
  except (ValueError, RuntimeError) as e:
    parser.error(str(e))
  record = scoring.judge(task, args.program_path, chosen)
  correct, metrics = results(record, chosen)
  args.results_dir.mkdir(parents=True, exist_ok=True)
  (args.results_dir / "correct.json").write_text(json.dumps(correct, indent=2) + "\n")
  (args.results_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
  print(summary_text(record))  # the job's stdout: Shinka shows it when asking for a fix
  return 0


def results(record: EvalRecord, chosen: scoring.Settings) -> tuple[dict, dict]:
  """correct.json and metrics.json: a program is correct for Shinka when the judge passes it."""
  values = scoring.metrics(record)
  error = None
  if not scoring.passed(record):
    error = (record.error.splitlines()[0] if record.error else "; ".join(record.reasons)
             or record.status.value)
  public = {key: value for key, value in values.items() if key != "combined_score"}
  private = {"reasons": list(record.reasons), "error_type": record.error_type,
             "timing_comparable": record.timing_comparable, "kernel_sha256": record.kernel_sha256}
  feedback = "\n\n".join(f"{heading}:\n{text}" for heading, text in
                         scoring.feedback(record).items())
  metrics = {"combined_score": values["combined_score"],
             "public": {**public, "size": chosen.size, "device": chosen.device},
             "private": private, "text_feedback": feedback}
  return {"correct": scoring.passed(record), "error": error}, metrics


def evaluator_source(task: str, title: str) -> str:
  return f'''"""ShinkaEvolve evaluator for {title}: the sealed judge scores each program.

Shinka runs `python evaluate.py --program_path P --results_dir R` (with --size / --device from
job.extra_cmd_args, else PALLASBENCH_SIZE / PALLASBENCH_DEVICE; README.md) and reads
R/correct.json and R/metrics.json.
"""
import sys

from pallasbench_dataset.evolve.shinka_adapter import main

TASK = "{task}"

if __name__ == "__main__":
  sys.exit(main(TASK))
'''


def config(system_message: str) -> dict[str, Any]:
  """shinka.yaml: one evaluation at a time (the judge is heavy), text feedback on, a USD cap."""
  return {
      "max_evaluation_jobs": 1,
      "max_proposal_jobs": 2,
      "evo": {"task_sys_msg": system_message, "language": "python",
              "patch_types": ["diff", "full"], "patch_type_probs": [0.7, 0.3],
              "llm_models": ["gpt-5-mini"], "use_text_feedback": True, "max_api_costs": 10.0},
      "db": {"num_islands": 2, "archive_size": 40},
      # The project's Python (the one writing the scaffold) runs evaluate.py, so that Shinka
      # itself may live in an environment of its own.
      "job": {"python_executable": sys.executable,
              "time": time.strftime("%H:%M:%S", time.gmtime(scoring.FRAMEWORK_TIMEOUT_S)),
              "extra_cmd_args": {}},
  }


CONFIG_HEADER: Final = """\
# ShinkaEvolve settings for {title},
# written by `python -m pallasbench_dataset.scaffold`.
# The task description is evo.task_sys_msg. job.extra_cmd_args {{size: medium, device: gpu}}
# chooses the judge's size (small, medium, large, edge) and device (auto, gpu, cpu); without
# them PALLASBENCH_SIZE / PALLASBENCH_DEVICE decide, then device auto and size medium on a GPU,
# small on a CPU. evo.llm_models name the LLMs (their providers' keys in the environment).
"""

RUN: Final = """\
The project's environment holds what the evaluation needs, but not Shinka's LLM clients (about
65 packages; pyproject.toml's `evolve` extra says why). Install Shinka in an environment of
its own, then run from this folder:

```bash
python3.12 -m venv ~/shinka-env && ~/shinka-env/bin/pip install shinka-evolve==0.0.7
~/shinka-env/bin/shinka_run --task-dir . --config-fname shinka.yaml --results_dir results \\
    --num_generations 20
```

`job.python_executable` in shinka.yaml, the project's Python, runs evaluate.py. Each
evaluation's feedback reaches the prompt as Shinka's `text_feedback` (`use_text_feedback`).
"""
