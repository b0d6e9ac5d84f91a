"""The sealed judge as a reward function, with the signature TRL's GRPOTrainer calls.

    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer
    from pallasbench_dataset.reward import KernelReward

    with KernelReward() as reward:  # a local Dask cluster on 127.0.0.1, the verdict cache
      GRPOTrainer(model="Qwen/Qwen2.5-Coder-7B-Instruct", reward_funcs=reward,
                  args=GRPOConfig(), train_dataset=load_dataset("data", "sft", split="train")
                  ).train()

No main guard is needed: the cluster's workers are programs of their own, which never import
the caller's script (`evaluation.pipeline.cluster`).

TRL (1.10.0.dev0, `GRPOTrainer._calculate_rewards`) calls a reward function with the keyword
arguments `prompts`, `completions`, `completion_ids`, every dataset column but `prompt` and
`completion` (a list, one value per completion: here `task` is the one needed),
`trainer_state`, `log_extra` and `log_metric`, and takes one float per completion. A
completion is a string or, for conversational prompts, a list of message dicts; the kernel
is the last closed fenced block of its assistant text tagged python (py, python3, py3, any
case) or untagged, found in time linear in the text. Every completion gets a reward in
bounded time: one that cannot be read (not text, not UTF-8, over MAX_COMPLETION_CHARS, a
kernel holding a lone surrogate) scores 0 with the reason in its feedback, and the batch goes
on. Ctrl-C during a batch raises `Interrupted`, a KeyboardInterrupt.

The reward (`reward_of`):

    0                                        unless the judge's status is `pass`
    PASS_FLOOR + (1 - PASS_FLOOR) * s/(1+s)  for a pass with a comparable timing
    PASS_FLOOR                               for a pass without one (CPU interpret mode)

s is the speedup over the faster of two references timed in the same evaluation, interleaved
with the candidate (`paid_speedup`): the jitted XLA baseline (`speedup`) and, on a GPU, the
task's shipped kernel (`speedup_shipped`). A copy of the shipped kernel, however disguised
(renamed, an identity op added, a select inverted: no fingerprint decides what two programs
compute), is paid what an original kernel exactly as fast would be, parity, and no more; the
reward above parity is for beating the best kernel known.

s/(1+s) is the logistic of ln(s): bounded, strictly increasing, 1/2 at parity and symmetric
on a log scale (2x faster and 2x slower are equally far from it), with no cap at which
faster kernels stop being told apart. The floor (0.2) keeps every pass above every failure
however slow it is: correctness first, then speed. A reward never credits a speed it did not
measure: a CPU pass gets the floor.

Every completion is judged by the project's pipeline: the sandboxed exporter, the compile
stage and the sealed judge on a Dask cluster (a local one by default, started once and kept
for the reward's lifetime so judges stay warm; `scheduler=` names a shared one), with the
verdict cache, so the same source for the same task is judged once in a batch, and a failure
once across batches. A pass on fresh seeds is judged again in each batch that repeats it: one
evaluation is a sample, and a kernel wrong on some draws passes some evaluations; paying its
one lucky pass for every repeat of the text would reward the lottery. A failure that a limit
ended (a timeout, a stage past its budget, a process killed) may be a neighbour's doing: it is
judged again at the end of its batch, alone, on the same draw, and that verdict is the one
paid; ended so again, it holds like any failure, so a kernel that spins on its unlucky draws
cannot keep them out of the cache. Each evaluation has a budget (`budget_s` for the export and again for the judge,
`compile_budget_s` per compiled artifact): a slow candidate becomes a `timeout` verdict,
reward 0, while the others go on. The judge's feedback on the last batch is
`reward.last_feedback` (status, reasons, error, speedup, the record, and `text()` for the next
turn of a multi-turn loop).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import pathlib
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from pallasbench_dataset.evaluate import (
    default_options, measurable, resolve_device, summary_text)
from pallasbench_dataset.evaluation.judge.core import EvalOptions
from pallasbench_dataset.evaluation.judge.process import Limits, default_memory_limit
from pallasbench_dataset.evaluation.pipeline import cluster, suite, verdicts
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem
from pallasbench_dataset.evaluation.sandbox.launch import remove_orphaned_scratch
from pallasbench_dataset.kernels import Variant
from pallasbench_dataset.population.run import DEFAULT_SIZE
from pallasbench_dataset.schema import EvalRecord, Status
from pallasbench_dataset.tasks import Size, get_task

logger = logging.getLogger(__name__)

PASS_FLOOR: Final = 0.2
NO_KERNEL: Final = "no_kernel"  # the feedback status of a completion without a fenced block
UNREADABLE: Final = "unreadable"  # ... of one whose text cannot be read (its reason says why)
# Per evaluation: the export, and the judge, each get `budget_s`; each compile `compile_budget_s`.
DEFAULT_BUDGET_S: Final = {"gpu": 60.0, "cpu": 300.0}
DEFAULT_COMPILE_BUDGET_S: Final = {"gpu": 30.0, "cpu": 120.0}
# A completion is read only up to this many characters (a kernel is a few KB; a trainer's
# completions are bounded by its token limit): beyond it, it is unreadable, at no cost.
MAX_COMPLETION_CHARS: Final = 1 << 20
# The info words of a fence whose block is Python code (compared in lower case); "" is untagged.
CODE_TAGS: Final = frozenset({"", "python", "py", "python3", "py3"})
# A fence line: its indent, the fence (3 or more ` or ~) and what follows it on the line.
_FENCE_LINE: Final = re.compile(r"^([ \t]*)(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)


class Interrupted(KeyboardInterrupt):
  """Ctrl-C (SIGINT) or SIGTERM stopped a batch: a KeyboardInterrupt, so that a trainer's
  `except KeyboardInterrupt` sees the user's Ctrl-C and its `except Exception` does not
  swallow it. The reward stays usable: its cluster is kept for the next batch."""


class UnreadableCompletion(ValueError):
  """A completion whose text cannot be read: its message is the reason, for the feedback."""


def completion_text(completion: object) -> str:
  """The text of a completion: a string, UTF-8 bytes, or the assistant messages of a
  conversational one (content a string or a list of text parts). Raises UnreadableCompletion
  for anything else, and for a text over MAX_COMPLETION_CHARS."""
  if isinstance(completion, (bytes, bytearray)):
    try:
      completion = bytes(completion).decode("utf-8")
    except UnicodeDecodeError as e:
      raise UnreadableCompletion(f"the completion's bytes are not UTF-8 ({e.reason} at byte "
                                 f"{e.start})") from None
  if isinstance(completion, str):
    text = completion
  elif isinstance(completion, Sequence) and all(isinstance(m, Mapping) for m in completion):
    text = "\n".join(_message_text(m) for m in completion
                     if m.get("role", "assistant") == "assistant")
  else:
    raise UnreadableCompletion(f"a completion is a string or a list of message dicts, not "
                               f"{type(completion).__name__}")
  if len(text) > MAX_COMPLETION_CHARS:
    raise UnreadableCompletion(f"the completion has {len(text)} characters; at most "
                               f"{MAX_COMPLETION_CHARS} are read")
  return text


def _message_text(message: Mapping[str, Any]) -> str:
  content = message.get("content")
  if isinstance(content, str):
    return content
  if isinstance(content, Sequence):  # multimodal messages: [{"type": "text", "text": ...}, ...]
    return "\n".join(part["text"] for part in content if isinstance(part, Mapping)
                     and part.get("type") == "text" and isinstance(part.get("text"), str))
  return ""


def extract_kernel(text: str) -> str | None:
  """The last closed fenced block tagged python, py, python3 or py3 (any case), as the prompt
  promises (`evolve.prompt.ANSWER`); in an answer with no tagged block, its last untagged one.
  None if there is neither (red team round 18: an answer's trailing untagged block of what its
  kernel printed is not its kernel). Fences are CommonMark's: ``` or ~~~ (or longer) opening
  a line, closed by a line of at least as many of the same character. One pass of an anchored
  pattern finds the fence lines (linear time: each line is tried once, nothing backtracks
  across lines); only the judged block's text is ever copied."""
  last = {True: None, False: None}  # the last closed block, by whether it is tagged python
  opened = None
  for line in _FENCE_LINE.finditer(text):
    indent, fence, rest = line.groups()
    if opened is None:
      info = rest.split()
      tag = info[0].lower() if info else ""
      opened = (indent, fence, tag if tag in CODE_TAGS else None, line.end() + 1)
    elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]) and not rest.strip():
      if opened[2] is not None:
        last[bool(opened[2])] = (opened[0], opened[3], line.start())
      opened = None
  block = last[True] or last[False]
  if block is None:
    return None
  indent, begin, end = block
  return "".join((row[len(indent):] if row.startswith(indent) else row.lstrip(" \t")
                  ).removesuffix("\r") + "\n" for row in text[begin:end].split("\n")[:-1])


def read_kernel(completion: object) -> str | None:
  """The kernel source of a completion (None without a closed Python block). Raises
  UnreadableCompletion when the completion, or its kernel, cannot be read as text (a lone
  surrogate has no UTF-8 form: nothing could write, hash or send it)."""
  source = extract_kernel(completion_text(completion))
  if source is not None:
    try:
      source.encode("utf-8")
    except UnicodeEncodeError as e:
      raise UnreadableCompletion(f"the kernel holds a character that is not text "
                                 f"({e.object[e.start]!a} at character {e.start}: {e.reason})"
                                 ) from None
  return source


def paid_speedup(record: EvalRecord) -> float | None:
  """The speedup a pass is paid for: over the faster of its references, the jitted XLA
  baseline and (where the judge timed it) the task's shipped kernel; None without a
  comparable timing."""
  measured = [s for s in (record.speedup, record.speedup_shipped) if s is not None]
  if not record.timing_comparable or record.speedup is None or not all(
      measurable(s) for s in measured):
    return None
  return min(measured)


def reward_of(record: EvalRecord) -> float:
  """The documented reward of one verdict (see the module docstring)."""
  if record.status is not Status.PASS:
    return 0.0
  s = paid_speedup(record)
  if s is None:
    return PASS_FLOOR
  return PASS_FLOOR + (1.0 - PASS_FLOOR) * s / (1.0 + s)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
  """What the judge said of one completion."""
  task: str
  status: str                  # a Status value, or NO_KERNEL (nothing was judged)
  reward: float
  speedup: float | None
  timing_comparable: bool
  reasons: tuple[str, ...]
  error: str | None
  cached: bool                 # the verdict came from the cache or a twin in the batch
  kernel_sha256: str | None
  record: EvalRecord | None

  def text(self) -> str:
    """The verdict as the evaluator prints it, for the model's next turn."""
    if self.status == UNREADABLE:
      return f"{self.task}: the answer could not be read: {self.reasons[0]}"
    if self.record is None:
      return (f"{self.task}: no kernel was judged: the answer has no closed fenced ```python "
              "block. Answer with the complete module in one ```python block.")
    return summary_text(self.record)


def _unjudged(task: str, status: str, reason: str | None = None) -> Feedback:
  return Feedback(task=task, status=status, reward=0.0, speedup=None, timing_comparable=False,
                  reasons=() if reason is None else (reason,), error=None, cached=False,
                  kernel_sha256=None, record=None)


def _no_kernel(task: str) -> Feedback:
  return _unjudged(task, NO_KERNEL)


def _feedback(record: EvalRecord) -> Feedback:
  return Feedback(task=record.task, status=record.status.value, reward=reward_of(record),
                  speedup=record.speedup, timing_comparable=record.timing_comparable,
                  reasons=record.reasons, error=record.error, cached=record.cached,
                  kernel_sha256=record.kernel_sha256, record=record)


def _read(completion: object) -> str | UnreadableCompletion | None:
  """The kernel source of a completion, None without one, or why it cannot be read."""
  try:
    return read_kernel(completion)
  except UnreadableCompletion as e:
    return e


class KernelReward:
  """A reward function for TRL's GRPOTrainer (and any caller): `reward(completions=..., task=...)`.

  `device` auto|gpu|cpu; `size` the registered size judged (default medium on a GPU, small on a
  CPU); `budget_s` / `compile_budget_s` the per-evaluation budgets; `scheduler` a Dask
  scheduler address (workers with resources judge=1 and cpu=1, see
  `evaluation.pipeline.cluster`), else a local cluster with `gpus` judges and `cpu_workers`
  export/compile workers; `cache_dir` the verdict cache (default ~/.cache/pallasbench/verdicts);
  `runs_dir` keeps each batch's run folder (records, artifacts, manifest) there, else they are
  removed. `reject_copies`: a completion whose compiled kernels are a shipped kernel's (renamed,
  its commutative operands swapped or its independent ops moved at most:
  `EvalRecord.copy_of`), or retuned to a config of its tables, is rejected, reward 0 (a near
  copy, with an identity op or an inverted select, computes another module and is not
  rejected: on a GPU it is paid the speedup over its own original, parity at most, as the
  module docstring says); whatever this option, a completion can import
  neither the project's kernel trees nor JAX's Pallas kernel library (`jax.experimental.pallas.
  ops`). Close it (or use it as a context manager) to stop the local cluster.
  """

  __name__ = "pallasbench_kernel_reward"  # TRL names a reward function's logs by its __name__

  def __init__(self, *, device: str = "auto", size: str | None = None,
               budget_s: float | None = None, compile_budget_s: float | None = None,
               scheduler: str | None = None, gpus: int | None = None,
               cpu_workers: int | None = None, cache_dir: pathlib.Path | None = None,
               runs_dir: pathlib.Path | None = None, options: EvalOptions | None = None,
               git_commit: str | None = None, reject_copies: bool = True):
    self.device = resolve_device(device, from_python=True)
    self.size = Size(size or DEFAULT_SIZE[self.device]).value
    self.limits = Limits(timeout_s=budget_s or DEFAULT_BUDGET_S[self.device],
                         memory_bytes=default_memory_limit())
    self.compile_budget_s = compile_budget_s or DEFAULT_COMPILE_BUDGET_S[self.device]
    self.options = dataclasses.replace(options or default_options(self.device),
                                       reject_copies=reject_copies)
    # A pass on fresh seeds is a sample, judged again rather than paid again; a failure a limit
    # ended is judged again alone, on the same draw, and held if it recurs (`verdicts`).
    self.cache = verdicts.VerdictCache(cache_dir or verdicts.default_folder(),
                                       serve_fresh_passes=False, judge_limits_again=True)
    self.runs_dir = None if runs_dir is None else pathlib.Path(runs_dir)
    self.git_commit = git_commit
    self.plan = cluster.default_plan(self.device, gpus, cpu_workers)
    self.last_feedback: tuple[Feedback, ...] = ()
    self.evaluations = 0  # measured by the judges, over all batches (cache hits cost none)
    self.batches = 0
    self.scheduler = scheduler  # the Dask scheduler address; a local one once started
    self._scratch = pathlib.Path(tempfile.mkdtemp(prefix="pallasbench-reward-"))
    self._stack = contextlib.ExitStack()
    self._finalizer = weakref.finalize(self, _shut, self._stack, self._scratch)

  # -- the trainer's call ----------------------------------------------------------------------

  def __call__(self, prompts: Sequence[Any] | None = None,
               completions: Sequence[str | Sequence[Mapping[str, Any]]] = (),
               completion_ids: Sequence[Sequence[int]] | None = None, *,
               task: str | Sequence[str], log_extra: Callable[[str, list], None] | None = None,
               log_metric: Callable[[str, float], None] | None = None,
               **columns: Any) -> list[float]:
    """One reward per completion. `task` is the dataset's column (one name per completion, or
    one for all); the other columns, `trainer_state` among them, are accepted and unused."""
    del prompts, completion_ids, columns
    tasks = [task] * len(completions) if isinstance(task, str) else list(task)
    feedback = self.judge(completions, tasks)
    if log_extra is not None:
      log_extra("judge_status", [f.status for f in feedback])
    if log_metric is not None and feedback:
      log_metric("judge/pass_rate", sum(f.status == Status.PASS.value for f in feedback)
                 / len(feedback))
    return [f.reward for f in feedback]

  def judge(self, completions: Sequence[str | Sequence[Mapping[str, Any]]],
            tasks: Sequence[str]) -> tuple[Feedback, ...]:
    """The judge's feedback on each completion (also kept as `last_feedback`)."""
    if len(tasks) != len(completions):
      raise ValueError(f"{len(completions)} completions but {len(tasks)} task names: pass the "
                       "dataset's `task` column (one name per completion)")
    for name in set(tasks):
      get_task(name)  # an unknown task is the caller's error, not a zero reward
    sources = [_read(c) for c in completions]
    items = [WorkItem(task=t, variant=Variant.CANDIDATE.value, size=self.size, source=src,
                      filename=f"completion_{n}.py", options=self.options,
                      candidate=f"completion-{n:05d}")
             for n, (t, src) in enumerate(zip(tasks, sources)) if isinstance(src, str)]
    records = self._evaluate(items) if items else {}
    self.last_feedback = tuple(
        _feedback(records[f"completion-{n:05d}"]) if isinstance(src, str)
        else _no_kernel(t) if src is None else _unjudged(t, UNREADABLE, str(src))
        for n, (t, src) in enumerate(zip(tasks, sources)))
    return self.last_feedback

  # -- the cluster -----------------------------------------------------------------------------

  def start(self) -> str:
    """Starts the local cluster now rather than at the first batch (a no-op with a scheduler
    or once started); returns the scheduler's address."""
    self._cluster_options()
    return self.scheduler

  def _cluster_options(self) -> suite.ClusterOptions:
    if self.scheduler is None:
      client = self._stack.enter_context(
          cluster.connect(self.plan, scheduler=None, directory=self._scratch / "workers"))
      self.scheduler = client.scheduler.address
      logger.info("reward: local Dask cluster at %s (%s)", self.scheduler, self.plan)
    return suite.ClusterOptions(plan=self.plan, scheduler=self.scheduler,
                                compile_budget_s=self.compile_budget_s,
                                compile_cache=self._scratch / "compile-cache")

  def _run_dir(self) -> pathlib.Path:
    self.batches += 1
    root = self.runs_dir or self._scratch / "runs"
    path = root / f"batch-{self.batches:06d}"
    while path.exists():  # a kept runs_dir from an earlier reward: never mix with its batches
      self.batches += 1
      path = root / f"batch-{self.batches:06d}"
    return path

  def _evaluate(self, items: Sequence[WorkItem]) -> dict[str, EvalRecord]:
    """Each item's record by candidate id: one run of the suite, the verdict cache in front."""
    options = self._cluster_options()
    run_dir = self._run_dir()
    try:
      suite.run_suite(items, run_dir, device=self.device, limits=self.limits,
                      git_commit=self.git_commit, command="pallasbench_dataset.reward",
                      cluster_options=options, cache=self.cache, stream=io.StringIO())
      records = {r.candidate: r for r in suite.read_records(run_dir)}
    except suite.Interrupted as e:
      raise Interrupted(f"batch {self.batches} {e}: no reward was computed") from None
    finally:
      if self.runs_dir is None:
        shutil.rmtree(run_dir, ignore_errors=True)
    missing = [item.candidate for item in items if item.candidate not in records]
    if missing:
      raise RuntimeError(f"the run of batch {self.batches} has no record for {missing}; its "
                         "cluster lost them (see the log)")
    self.evaluations += sum(not records[item.candidate].cached for item in items)
    return records

  def close(self) -> None:
    """Stops the local cluster (if this reward started one) and removes its scratch folder."""
    self._finalizer()

  def __enter__(self) -> KernelReward:
    return self

  def __exit__(self, *exc: object) -> None:
    self.close()


def _shut(stack: contextlib.ExitStack, scratch: pathlib.Path) -> None:
  try:
    stack.close()
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
    # An exporter stopped by Ctrl-C leaves its sandbox's scratch folder until its owner, a
    # worker of the cluster just stopped, is gone: now.
    remove_orphaned_scratch()
