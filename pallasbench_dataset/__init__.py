"""PallasBench-Robust: the task registry, the robust evaluator, loading and analysis.

The measuring side (tasks, evaluation) needs only jax and numpy; loading and analysis
import pandas and datasets lazily. Importing the package itself imports nothing else (the
sandbox's boot must start with the standard library alone): the registry's names below load
`pallasbench_dataset.tasks` on first use.
"""

_TASK_NAMES = ("HEADLINE_SIZE", "TASKS", "Size", "TaskSpec", "get_task", "list_tasks")
__all__ = list(_TASK_NAMES)


def __getattr__(name: str):
  if name in _TASK_NAMES:
    from pallasbench_dataset import tasks  # pylint: disable=import-outside-toplevel
    return getattr(tasks, name)
  raise AttributeError(f"module 'pallasbench_dataset' has no attribute {name!r}")
