"""The verdict cache: a kernel source judged once is not judged again on the same machine.

A verdict depends on the kernel's source, the task, size and precision, how it was judged (the
judge's version, the judge's code and the evaluation options) and where (platform, device kind,
jax and jaxlib). Those name one JSON file in the cache folder holding the record and its
artifacts; a later evaluation with the same key reuses them, marked `cached`. Records that are
no verdict on the kernel (a killed process, a harness bug: `driver.has_verdict`) are never
stored, nor those the host's load may have decided (`load_decided`: a stage cut by its time
limit or budget, memory exhausted, the analysis helper killed or aborted). Those depend on what ran beside the item, which another
candidate of the same batch controls (red team round 14: an exporter keeping every core busy
starves its neighbours into timeouts), and on limits the key does not hold; stored, they would
pay an honest source 0 in every later batch, a gain for the griefer under GRPO. Such an item
is judged again when it comes again (the reward's cache first judges it again alone: below):
a slow kernel costs its own judge time, never a verdict.

A cached verdict pays its source again without new evidence, so the cache is part of the judge.
The judge's code is in the key (`judge_code`: a digest of every file of this package and of the
shipped kernel trees), because JUDGE_VERSION is bumped by hand and verdicts changed under one
value across dozens of commits: a pass stored by a judge with a hole since closed would pay the
hole's exploit after the fix. The digest is this process' code: the judges of a cluster given
by address must run the same checkout as the driver (as the compile cache already needs). It
names the entry's contents, not its file: an entry stored by other code is overwritten by the
next verdict for its kernel.

A verdict drawn on fresh seeds (the default options) is a sample: a failure holds whatever seeds
come next (a counterexample, or a refusal), but a pass is only evidence, and a kernel that is
wrong on some draws passes some evaluations. A cache that pays a reward (`KernelReward`) is
built with `serve_fresh_passes=False`: it serves failures and passes measured on the options'
fixed seeds, and judges a fresh-seed pass again (its copies in one run still share one
measurement), so a lucky evaluation is paid once, not for every repeat of its text. A
population run keeps the default: a resubmitted population costs nothing but what changed.

The reward's cache (`judge_limits_again`) also holds a load-decided failure that recurs. A
kernel can end its own unlucky draws that way: one that spins in a device loop when its fast
path would be wrong runs into a stage's budget or the judge's limit instead of answering
`incorrect` (red team round 17), or kills its own exporter (rounds 18 and 19), and judged
again in every batch it would be paid on each lucky draw. So such an item is judged once more
at the end of its batch, alone and on the same seeds, which the driver drew (`evaluate`),
and a failure of that kind again is stored `held`: served for good. A neighbour starved an
honest source in the batch, not when it ran alone; the host's own rare starvation would have
to strike both runs. Nothing is counted across batches, so nothing depends on how many
trainers share the folder.

Only the driver writes the folder: the exporter, the one process that runs candidate code,
may write nothing outside its sandbox's scratch folder, and the judge and compilers hand
their results back to the driver. Each file is written beside its place and renamed, so
two drivers sharing a cache never see half a file; a file that does not parse, or whose key
differs from its name's, is ignored and overwritten by the next verdict for it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import pathlib
import secrets
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, has_verdict
from pallasbench_dataset.evaluation.judge.core import JUDGE_VERSION, EvalOptions
from pallasbench_dataset.keys import precision_field
from pallasbench_dataset.kernels import Variant, tree_dir
from pallasbench_dataset.precision import DEFAULT_PRECISION
from pallasbench_dataset.schema import (
    Artifacts, Environment, EvalRecord, ErrorType, Status, from_json_dict, to_json_dict)

logger = logging.getLogger(__name__)

# Bumped when the entry format changes: older entries then miss instead of misreading.
FORMAT: Final = "1"

Measured = tuple[WorkItem, EvalRecord, Artifacts]
Outcome = tuple[EvalRecord, Artifacts]


@functools.cache
def judge_code() -> str:
  """The sha256 of the code a verdict depends on: every Python file of this package (the
  judge, the exporter, the tasks, references, input families and tolerances) and of the
  shipped kernel trees (the copy check), by path and contents. Computed once per process."""
  roots = [pathlib.Path(__file__).resolve().parents[2]]
  for variant in (Variant.GPU, Variant.TPU):
    try:
      roots.append(tree_dir(variant).resolve())
    except FileNotFoundError:  # an install without the trees: the package alone
      pass
  return code_digest(roots)


def code_digest(roots: Iterable[pathlib.Path]) -> str:
  """The sha256 of the Python files under `roots`, each named by its root's name and its path
  below it, and its bytes."""
  digest = hashlib.sha256()
  for root in roots:
    for path in sorted(root.rglob("*.py")):
      name = f"{root.name}/{path.relative_to(root).as_posix()}".encode()
      data = path.read_bytes()
      digest.update(b"%d:%s%d:" % (len(name), name, len(data)) + data)
  return digest.hexdigest()


def default_folder() -> pathlib.Path:
  """$XDG_CACHE_HOME/pallasbench/verdicts, by default ~/.cache/pallasbench/verdicts."""
  base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
  return pathlib.Path(base) / "pallasbench" / "verdicts"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerdictKey:
  """Everything a verdict depends on."""
  kernel_sha256: str
  task: str
  size: str
  judge_version: str
  options: str      # the evaluation options (seeds, iterations, edge check), as JSON
  platform: str     # "gpu" or "cpu"
  device_kind: str  # as the judge records it, e.g. "NVIDIA H200"
  jax: str
  jaxlib: str
  judge_code: str   # judge_code() of the judge's checkout: which code judged
  precision: str = DEFAULT_PRECISION

  def fields(self) -> dict[str, str]:
    """The key as its entry stores it, the precision as an evaluation's key names it (none at
    float32, so that a float32 key also finds the entries that name no precision)."""
    fields = dataclasses.asdict(self)
    precision = fields.pop("precision")
    return {**fields, **precision_field(precision)}

  def digest(self) -> str:
    """The entry's file name: the key but the judge's code, so that a verdict of new code
    replaces the one of old code for the same kernel (the entry's stored key says which)."""
    fields = self.fields()
    del fields["judge_code"]
    text = json.dumps({"format": FORMAT, **fields}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _options(options: EvalOptions) -> str:
  return json.dumps(dataclasses.asdict(options), sort_keys=True)


def _key(item: WorkItem, judge_version: str, environment: Environment) -> VerdictKey:
  return VerdictKey(kernel_sha256=item.kernel_sha256, task=item.task, size=str(item.size),
                    precision=item.precision, judge_version=judge_version,
                    options=_options(item.options),
                    platform=environment.platform, device_kind=environment.device_kind,
                    jax=environment.jax, jaxlib=environment.jaxlib, judge_code=judge_code())


def key_for(item: WorkItem, environment: Environment) -> VerdictKey:
  """The key `item` would get from this judge version on a judge in `environment`."""
  return _key(item, JUDGE_VERSION, environment)


def key_of(item: WorkItem, record: EvalRecord) -> VerdictKey:
  """The key of `item`'s verdict as its record says it was measured."""
  return _key(item, record.judge_version, record.environment)


# The error types that say a limit or a signal ended a process, whatever the status: a
# `rejected` carries one when a stage ran past its budget or the compile past the compile
# budget (timeout), or the analysis helper died, ran out of time or outgrew its memory
# (`ModuleAnalysisError.ended_by`). Set where the judge and the driver raise them, never read
# from a reason's words, which quote the candidate's own names (red team round 17: a kernel
# named "... ran past its 1 s budget" kept its own rejection out of the cache).
ENDED_BY_A_LIMIT: Final = frozenset({ErrorType.TIMEOUT, ErrorType.OUT_OF_MEMORY, ErrorType.CRASH})


def load_decided(record: EvalRecord) -> bool:
  """Whether the host's load, or limits the key does not hold, may have decided `record`: a
  stage cut by the evaluation's time limit (`timeout`), or a process a limit or a signal ended
  (`ENDED_BY_A_LIMIT`: a stage or compile budget, memory exhausted, the analysis helper
  killed, aborted or out of time), read from the record's status and error type alone."""
  return record.status is Status.TIMEOUT or record.error_type in ENDED_BY_A_LIMIT


class VerdictCache:
  """One folder of verdicts: `<folder>/<digest[:2]>/<digest>.json`."""

  def __init__(self, folder: pathlib.Path, *, serve_fresh_passes: bool = True,
               judge_limits_again: bool = False):
    self.folder = pathlib.Path(folder)
    self.serve_fresh_passes = serve_fresh_passes
    self.judge_limits_again = judge_limits_again

  def serves(self, record: EvalRecord, item: WorkItem) -> bool:
    """Whether `evaluate` may reuse the stored `record` for `item`: always, but for a pass on
    fresh seeds where this cache pays a reward, and for a verdict the load may have decided (an
    entry stored before they were kept out) (the module docstring)."""
    return not load_decided(record) and (
        self.serve_fresh_passes or record.status is not Status.PASS or bool(item.options.seeds))

  def _path(self, key: VerdictKey) -> pathlib.Path:
    digest = key.digest()
    return self.folder / digest[:2] / f"{digest}.json"

  def _read(self, key: VerdictKey) -> dict | None:
    """The entry stored under `key` (None: absent, judged by other code, unusable)."""
    path = self._path(key)
    try:
      data = json.loads(path.read_text())
      stored = data.get("key")
      if isinstance(stored, dict) and stored.get("judge_code") != key.judge_code and {
          k: v for k, v in stored.items() if k != "judge_code"} == {
          k: v for k, v in key.fields().items() if k != "judge_code"}:
        logger.debug("verdict cache entry %s was judged by other code: evaluated again", path)
        return None
      if stored != key.fields():
        raise ValueError("its key is not the one its name says")
      data["outcome"] = (from_json_dict(EvalRecord, data["record"]),
                         from_json_dict(Artifacts, data["artifacts"]))
      return data
    except FileNotFoundError:
      return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
      logger.warning("verdict cache entry %s is unusable (%s): evaluated again", path, e)
      return None

  def get(self, key: VerdictKey) -> Outcome | None:
    """The record and artifacts stored under `key`."""
    entry = self._read(key)
    return None if entry is None else entry["outcome"]

  def lookup(self, item: WorkItem, environment: Environment) -> Outcome | None:
    """What the cache serves for `item` on a judge in `environment`: its stored verdict where
    `serves` allows it, or a limit's failure that recurred when judged again alone (`held`)."""
    entry = self._read(key_for(item, environment))
    if entry is None:
      return None
    if entry.get("held") is True or self.serves(entry["outcome"][0], item):
      return entry["outcome"]
    return None

  def put(self, item: WorkItem, record: EvalRecord, artifacts: Artifacts, *,
          held: bool = False) -> None:
    """Stores a verdict under the key its record was measured with (a record that is no
    verdict, that the load may have decided, or whose judge never reported its machine, is not
    stored), or, `held`, a limit's failure that recurred alone (`evaluate`), served as one.
    A record of another text than `item`'s is never stored under `item`'s."""
    if record.kernel_sha256 != item.kernel_sha256 or record.environment.hardware == "unknown" or (
        load_decided(record) is not held or not (held or has_verdict(record))):
      return
    key = key_of(item, record)
    self._write(self._path(key), {"key": key.fields(), "record": to_json_dict(record),
                                  "artifacts": to_json_dict(artifacts), "held": held})

  def _write(self, path: pathlib.Path, entry: dict) -> None:
    """Writes `entry` beside `path` and renames it there (never half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(entry)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
      with os.fdopen(fd, "w") as f:
        f.write(text)
      os.replace(tmp, path)
    finally:
      pathlib.Path(tmp).unlink(missing_ok=True)


def reuse(outcome: Outcome, item: WorkItem) -> Outcome:
  """Another evaluation's record and artifacts as `item`'s, marked cached. The record keeps
  its measurement (times, seeds, environment, and `run`: where it was measured)."""
  record, artifacts = outcome
  return (dataclasses.replace(record, variant=item.variant, candidate=item.candidate, cached=True),
          dataclasses.replace(artifacts, variant=item.variant, candidate=item.candidate))


def _twins(item: WorkItem) -> tuple[str, ...]:
  """What items of one run must share to share a verdict (the run's judges are alike)."""
  return (item.kernel_sha256, item.task, str(item.size), item.precision, _options(item.options))


def _drawn(item: WorkItem) -> WorkItem:
  """`item` on seeds drawn here, as the judge would draw them (`secrets`), where it has none,
  and with a secret for the draws a kernel must not predict (`WorkItem.secret`): the driver
  knows the whole draw, also of an evaluation its time limit killed before it answered, and
  can judge the same draw again. Like the judge's own draw, it never reaches the exporter."""
  options = item.options if item.options.seeds else dataclasses.replace(
      item.options, seeds=tuple(secrets.randbelow(2**31) for _ in range(item.options.num_seeds)))
  return dataclasses.replace(item, options=options, secret=secrets.randbelow(2**63))


def evaluate(items: Iterable[WorkItem], cache: VerdictCache, environment: Environment | None,
             measure: Callable[[list[WorkItem]], Iterable[Measured]]) -> Iterator[Outcome]:
  """Each item's record and artifacts: from the cache when it holds the item's verdict on a
  judge in `environment` (None: the judges' machine is unknown, nothing is looked up), else
  from `measure`, once for items of the same source, task, size, precision and options (the
  others get its outcome, marked cached). Cached outcomes come first, then each measured one
  as it arrives, stored in the cache. A hit the cache does not serve (`VerdictCache.lookup`)
  is measured again and replaced.

  Where the cache judges limits again (`judge_limits_again`, the reward's), each source is
  measured on seeds drawn here (`_drawn`), and one whose record the load may have decided is
  measured once more after the others, alone, on the same seeds: that outcome is the item's,
  and one the load may have decided again is stored `held`, served for good. A neighbour that starved an honest
  source in the batch is not beside it then, and a kernel that ends its own unlucky draws by
  a limit (spinning until a budget ends it, killing its own process: red team rounds 17 to
  19) ends the same draw the same way."""
  waiting: dict[tuple[str, ...], list[WorkItem]] = {}
  for item in items:
    hit = None if environment is None else cache.lookup(item, environment)
    if hit is not None:
      yield reuse(hit, item)
    else:
      waiting.setdefault(_twins(item), []).append(item)
  # Where limits are judged again, each source is measured on a draw the driver made.
  sources = [_drawn(group[0]) if cache.judge_limits_again else group[0]
             for group in waiting.values()]
  groups = {_twins(source): group for source, group in zip(sources, waiting.values())}
  again: list[WorkItem] = []
  for measured, record, artifacts in measure(sources):
    group = groups[_twins(measured)]
    if cache.judge_limits_again and load_decided(record):
      again.append(measured)
      continue
    cache.put(group[0], record, artifacts)
    yield from _with_twins(group, record, artifacts)
  for measured in again:  # alone, on the same draw
    group = groups[_twins(measured)]
    for _, record, artifacts in measure([measured]):
      cache.put(group[0], record, artifacts, held=load_decided(record))
      yield from _with_twins(group, record, artifacts)


def _with_twins(group: list[WorkItem], record: EvalRecord, artifacts: Artifacts
                ) -> Iterator[Outcome]:
  """The measured outcome of `group[0]`, then the same for each of its twins, marked cached."""
  yield record, artifacts
  for twin in group[1:]:
    yield reuse((record, artifacts), twin)
