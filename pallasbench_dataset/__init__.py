"""PallasBench-Robust: the task registry, the robust evaluator, loading and analysis.

The measuring side (tasks, evaluation) needs only jax and numpy; loading and analysis
import pandas and datasets lazily.
"""

from pallasbench_dataset.tasks import HEADLINE_SIZE, TASKS, Size, TaskSpec, get_task, list_tasks

__all__ = ["HEADLINE_SIZE", "TASKS", "Size", "TaskSpec", "get_task", "list_tasks"]
