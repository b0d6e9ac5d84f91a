"""Judging lists of work items at once, on both of the CPU's cores.

`run_items` exports an item and then judges it, one after the other: a sandboxed exporter and
the judge process take turns on one core, so a long list leaves the other core idle, and a
list that waits out a time limit leaves both idle. Several `run_items` at once, each with
exporters and a judge process of its own, keep the cores busy; every record is still the
record of its item judged in its own list, in that list's order.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence

from pallasbench_dataset.evaluation.judge.process import JudgeConfig, Limits
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, run_items
from pallasbench_dataset.schema import EvalRecord

CPU = JudgeConfig(device="cpu", git_commit=None, dump_dir=None)


def halves(items: Sequence[WorkItem]) -> tuple[Sequence[WorkItem], Sequence[WorkItem]]:
  half = (len(items) + 1) // 2
  return items[:half], items[half:]


def run_at_once(lists: Sequence[tuple[Sequence[WorkItem], Limits]],
                config: JudgeConfig = CPU) -> list[list[EvalRecord]]:
  """Each (items, limits) judged by a `run_items` of its own, all at once; the records of
  each list, in its order."""

  def judged(items: Sequence[WorkItem], limits: Limits) -> list[EvalRecord]:
    records: list[EvalRecord] = []
    run_items(items, config, limits, on_result=lambda record, _: records.append(record))
    return records

  with concurrent.futures.ThreadPoolExecutor(len(lists)) as pool:
    return list(pool.map(judged, *zip(*lists)))
