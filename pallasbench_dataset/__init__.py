"""PallasBench-Robust: the task registry, the robust evaluator, loading and analysis.

The measuring side (tasks, evaluation) needs only jax and numpy; loading and analysis
import pandas and datasets lazily. Importing the package itself imports nothing else (the
sandbox's boot must start with the standard library alone): the registry's names below load
`pallasbench_dataset.tasks` on first use.
"""

__all__ = ["HEADLINE_SIZE", "TASKS", "Size", "TaskSpec", "get_task", "list_tasks"]


def __getattr__(name: str):
  """The registry's names, imported when first asked for: the sandbox's boot starts with the
  standard library alone."""
  if name in __all__:
    from pallasbench_dataset import tasks  # pylint: disable=import-outside-toplevel
    return getattr(tasks, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
