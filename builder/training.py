"""The fine-tuning configs: `sft` and `preference`, in the formats of Hugging Face's TRL trainers.

Column names follow TRL 1.10.0.dev0 (huggingface/trl@f2cd577, docs/source/dataset_formats.md,
`trl.data_utils.is_conversational`): conversational rows, each message a {"role", "content"}
dict.

- `sft` (the prompt-completion type, for SFTTrainer; its `prompt` and `task` columns are also
  a GRPOTrainer dataset for `pallasbench_dataset.reward`): `prompt` is one user message that
  states the task (`evolve.prompt.task_prompt`: what it computes, the JAX reference, input
  shapes and dtypes per size, the H200's rules for Pallas kernels: Triton's, or Mosaic GPU's
  and Triton's where the answer holds Mosaic GPU code, `for_answer`), `completion` one assistant
  message, the fixed kernel (kernels_gpu/) in a fenced python block. Each task whose fixed
  kernel passed at the headline size has a `write` row and a `fix` row, whose prompt also
  holds the original TPU kernel and the judge's verdict on it (`repair_prompt`).
- `preference` (the preference type, for DPOTrainer and the like): `prompt`, `chosen`,
  `rejected`, from judged kernels of one task, size and machine: the fixed kernel against the
  original (`release`), and a population's candidates (`population`). `chosen` always passed;
  `rejected` did not, or passed and was slower by `MIN_SPEEDUP_RATIO` with comparable timings.
  Both verdicts and speedups are columns.

Both configs have the splits `train` and `test`: `test` holds the tasks of `TEST_TASKS`, and
no row of theirs is in `train`, so a model trained on `train` is evaluated on tasks it never saw.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from pallasbench_dataset.evolve.prompt import GPU_RULES, repair_prompt, task_prompt
from pallasbench_dataset.population.candidates import MUST_FAIL
from pallasbench_dataset.schema import (
    CandidateRow, EvalRecord, Message, PreferenceRow, SftRow, Status, to_json_dict)
from pallasbench_dataset.tasks import TASKS

from builder.records import Merged
from builder.trees import KernelTrees

# The held-out tasks: a fifth of each level (5 of 27, 3 of 13, 1 of 5), the tasks whose
# sha256(HELD_OUT_SALT + name) is lowest in their level. Fixed here, so that a later release's
# test split holds the same tasks; tests/training/test_finetune_configs.py checks the rule still
# gives them.
HELD_OUT_SALT: Final = "pallasbench-robust held-out "
HELD_OUT_SHARE: Final = 0.2
TEST_TASKS: Final = ("gelu", "tanh", "batched_matmul", "cross_entropy", "mse_loss",
                     "layernorm_residual", "linear_bias_relu", "sigmoid_bce", "triangle_update")
SPLITS: Final = ("train", "test")
# Two passing kernels make a pair only when one is this much faster (run-to-run noise of the
# release's repeats is a few percent) and both were timed comparably (not CPU interpret mode).
MIN_SPEEDUP_RATIO: Final = 1.1
FATE_CHARS: Final = 1200
MOSAIC_GPU: Final = "mosaic_gpu"  # the backend name the judge records (EvalRecord.backends)
_MOSAIC_IMPORT: Final = "from jax.experimental.pallas import mosaic_gpu"
# The rules a prompt states where its answer uses Mosaic GPU, in place of the Triton-only
# GPU_RULES (whose "no scratch memory" a TMA and wgmma kernel would contradict).
MOSAIC_GPU_RULES: Final = (
    "GPU rules (Pallas has two backends on an NVIDIA H200, jax 0.11.2; the kernel may use "
    "either, and may pick one per shape): Mosaic GPU (`from jax.experimental.pallas import "
    "mosaic_gpu as plgpu`; `plgpu.kernel`, or `pl.pallas_call` with `plgpu.CompilerParams`) "
    "programs Hopper directly: TMA copies between global and shared memory "
    "(`plgpu.copy_gmem_to_smem`, `plgpu.copy_smem_to_gmem`, or a pipeline such as "
    "`plgpu.emit_pipeline_warp_specialized`), `plgpu.wgmma` on the tensor cores from swizzled "
    "shared-memory tiles (`plgpu.TilingTransform`, `plgpu.SwizzleTransform`) into a float32 "
    "accumulator (`plgpu.ACC`), scratch buffers in shared memory (`plgpu.SMEM` with "
    "`pl.run_scoped`, at most 227 KB per block), warpgroups, and persistent grids over the SMs "
    "(`plgpu.nd_loop`); tiles need not divide the shapes if the kernel pads or masks them, which "
    "the judge's edge size checks. Triton (the default backend; `pltriton` from "
    "`jax.experimental.pallas.triton`) has no scratch memory and no TMA: blocks and values "
    "with a power-of-two number of elements, at most 2^20 per tensor, 2-D `jnp.dot`s of "
    "dimensions at least 16 accumulating in float32, reductions as `jax.lax.fori_loop`s inside "
    "the kernel, masked loads and stores at the edges, `num_warps` and `num_stages` set with "
    "`pltriton.CompilerParams`.")


def held_out(level_tasks: Mapping[int, Sequence[str]]) -> tuple[str, ...]:
  """The rule TEST_TASKS was chosen by, over the tasks of each level (in registry order)."""
  picked = []
  for level in sorted(level_tasks):
    names = level_tasks[level]
    k = round(len(names) * HELD_OUT_SHARE)
    picked += sorted(names, key=lambda n: hashlib.sha256((HELD_OUT_SALT + n).encode()).hexdigest()
                     )[:k]
  return tuple(sorted(picked, key=lambda n: TASKS[n].task_id))


def split_of(task: str) -> str:
  return "test" if task in TEST_TASKS else "train"


# A run of backticks opening a line, after any indentation: what a Markdown reader
# (reward.extract_kernel among them) takes for a fence.
_BACKTICKS_OPENING_A_LINE: Final = re.compile(r"^[ \t]*(`+)", re.MULTILINE)


def fenced(source: str) -> str:
  """`source` as an answer's Python block, in a fence longer than any run of backticks that
  opens one of its lines, so that nothing in the source can close it: a candidate's docstring
  holding ``` made the published answer read back as a text the judge never saw (red team
  round 16). `reward.extract_kernel` reads the source back whole."""
  longest = max((len(m.group(1)) for m in _BACKTICKS_OPENING_A_LINE.finditer(source)), default=0)
  fence = "`" * max(3, longest + 1)
  return f"{fence}python\n{source.rstrip()}\n{fence}"


def _user(text: str) -> tuple[Message, ...]:
  return (Message(role="user", content=text),)


def _assistant(source: str) -> tuple[Message, ...]:
  return (Message(role="assistant", content=fenced(source)),)


def _fate(record: EvalRecord) -> str:
  """The judge's verdict on the original: status, speedup, its reasons and its error, each
  said once (a reason the error already holds, as its first line often is, is left out; cut
  to FATE_CHARS)."""
  speed = "" if record.speedup is None else f", speedup {record.speedup:.3g}x"
  error = record.error or ""
  said = " ".join(error.split())  # a reason may be the error's first lines, re-wrapped
  lines = [f"Verdict on an {record.environment.device_kind} at size {record.size}: "
           f"{record.status.value}{speed}",
           *(f"- {reason}" for reason in dict.fromkeys(record.reasons)
             if " ".join(reason.split()) not in said)]
  if error:
    lines.append(f"- error: {error}")
  text = "\n".join(lines)
  return text if len(text) <= FATE_CHARS else text[:FATE_CHARS - 1] + "…"


def for_answer(prompt: str, answer: str, recorded: Iterable[str] = ()) -> str:
  """The prompt with the GPU rules of the backends its answer holds: MOSAIC_GPU_RULES where the
  judge recorded Mosaic GPU for it (`recorded`) or its source imports Mosaic GPU (a kernel
  with a Mosaic GPU path for some shapes holds TMA and wgmma code even where the judge's size
  took its Triton path), else the Triton rules `task_prompt` states."""
  if MOSAIC_GPU not in recorded and _MOSAIC_IMPORT not in answer:
    return prompt
  if GPU_RULES not in prompt:
    raise ValueError("the prompt no longer states evolve.prompt.GPU_RULES; update "
                     "builder.training.for_backends to the prompt's new rules")
  return prompt.replace(GPU_RULES, MOSAIC_GPU_RULES)


# ---------------------------------------------------------------------------------------------
# The release's kernels at the headline size.

def _release(merged: Merged, headline: str) -> dict[str, dict[str, EvalRecord]]:
  """task -> variant -> its record at the headline size."""
  out: dict[str, dict[str, EvalRecord]] = {}
  for record in merged.records:
    if record.size == headline:
      out.setdefault(record.task, {})[record.variant] = record
  return out


def _by_task_id(release: Mapping[str, Mapping[str, EvalRecord]]):
  return sorted(release.items(), key=lambda item: TASKS[item[0]].task_id)


def sft_rows(merged: Merged, trees: KernelTrees, headline: str) -> list[SftRow]:
  """A `write` and a `fix` row per task whose fixed kernel passed at the headline size."""
  rows = []
  for task, variants in _by_task_id(_release(merged, headline)):
    fixed, original = variants.get("gpu"), variants.get("tpu")
    if fixed is None or fixed.status is not Status.PASS:
      continue
    spec = TASKS[task]
    prompts = {"write": task_prompt(spec)}
    if original is not None:
      prompts["fix"] = repair_prompt(spec, trees.path("tpu", task).read_text(), _fate(original))
    answer = trees.path("gpu", task).read_text()
    for kind, text in prompts.items():
      rows.append(SftRow(
          prompt=_user(for_answer(text, answer, fixed.backends)), completion=_assistant(answer),
          task=task, task_id=spec.task_id, level=spec.level, category=spec.category,
          prompt_kind=kind, kernel=f"kernels_gpu/{task}.py", kernel_sha256=fixed.kernel_sha256,
          status=fixed.status.value, speedup=fixed.speedup, size=headline,
          hardware=fixed.environment.device_kind, timing_comparable=fixed.timing_comparable,
          original_status=None if original is None else original.status.value,
          original_speedup=None if original is None else original.speedup))
  return rows


# ---------------------------------------------------------------------------------------------
# Pairs.

def _judged(name: str, source: str, status: str, speedup: float | None, sha: str,
            backends: Sequence[str]) -> dict[str, Any]:
  return {"name": name, "source": source, "status": status, "speedup": speedup, "sha256": sha,
          "backends": tuple(backends)}


def better(a: Mapping[str, Any], b: Mapping[str, Any], comparable: bool) -> bool:
  """Whether `a` may be `chosen` over `b`: it passed, and `b` did not or (timings comparable)
  `a` is at least MIN_SPEEDUP_RATIO times faster."""
  if a["status"] != Status.PASS.value:
    return False
  if b["status"] != Status.PASS.value:
    return True
  return (comparable and a["speedup"] is not None and b["speedup"] is not None
          and a["speedup"] >= MIN_SPEEDUP_RATIO * b["speedup"])


def _pair(chosen: Mapping[str, Any], rejected: Mapping[str, Any], *, task: str, kind: str,
          size: str, hardware: str, comparable: bool) -> PreferenceRow:
  spec = TASKS[task]
  return PreferenceRow(
      prompt=_user(for_answer(task_prompt(spec), chosen["source"], chosen["backends"])),
      chosen=_assistant(chosen["source"]),
      rejected=_assistant(rejected["source"]), task=task, task_id=spec.task_id, level=spec.level,
      pair_kind=kind, size=size, hardware=hardware, timing_comparable=comparable,
      chosen_kernel=chosen["name"], rejected_kernel=rejected["name"],
      chosen_sha256=chosen["sha256"], rejected_sha256=rejected["sha256"],
      chosen_status=chosen["status"], rejected_status=rejected["status"],
      chosen_speedup=chosen["speedup"], rejected_speedup=rejected["speedup"])


def release_pairs(merged: Merged, trees: KernelTrees, headline: str) -> list[PreferenceRow]:
  """The fixed kernel against the original, per task, where one is `better` than the other."""
  rows = []
  for task, variants in _by_task_id(_release(merged, headline)):
    if set(variants) < {"gpu", "tpu"}:
      continue
    fixed, original = variants["gpu"], variants["tpu"]
    kernels = [_judged(f"kernels_{r.variant}/{task}.py", trees.path(r.variant, task).read_text(),
                       r.status.value, r.speedup, r.kernel_sha256, r.backends)
               for r in (fixed, original)]
    comparable = fixed.timing_comparable and original.timing_comparable
    for a, b in (kernels, kernels[::-1]):
      if better(a, b, comparable):
        rows.append(_pair(a, b, task=task, kind="release", size=headline,
                          hardware=fixed.environment.device_kind, comparable=comparable))
  return rows


def population_pairs(candidates: Iterable[CandidateRow]) -> list[PreferenceRow]:
  """Pairs within each (task, size, machine, run) of the population runs: every distinct
  source that is not the fastest passing one is `rejected` once, against a passing one that
  is `better`: the passing candidates in turn (fastest first) for those that failed, the
  fastest for those that passed slower. Sources judged twice (cached twins) count once.

  A `chosen` answer needs nothing against it in the whole build (red team round 21): a source
  that any row of its task shows not passing (a twin, another size, run or machine), or that
  its population calls a kind that must fail (a hole in the judge), is never chosen."""
  candidates = list(candidates)
  doubted = {(c.task, c.kernel_sha256) for c in candidates
             if c.status != Status.PASS.value or c.kind in MUST_FAIL}
  groups: dict[tuple, list[CandidateRow]] = {}
  for c in candidates:
    groups.setdefault((c.task_id, c.task, c.size, c.hardware, c.run), []).append(c)
  rows = []
  for (_, task, size, hardware, run), members in sorted(groups.items()):
    first: dict[str, CandidateRow] = {}
    for c in sorted(members, key=lambda c: c.candidate):
      first.setdefault(c.kernel_sha256, c)
    unique = first.values()
    comparable = all(c.timing_comparable for c in unique)
    kernels = [_judged(f"{run}/{c.candidate}", c.source, c.status, c.speedup, c.kernel_sha256,
                       ()) for c in unique]
    passed = sorted((k for k in kernels if k["status"] == Status.PASS.value
                     and (task, k["sha256"]) not in doubted),
                    key=lambda k: (-(k["speedup"] or 0.0), k["name"]))
    if not passed:
      continue
    turn = 0
    for k in sorted(kernels, key=lambda k: k["name"]):
      if k is passed[0]:
        continue
      if k["status"] == Status.PASS.value:
        chosen = passed[0]
      else:
        chosen, turn = passed[turn % len(passed)], turn + 1
      if better(chosen, k, comparable):
        rows.append(_pair(chosen, k, task=task, kind="population", size=size, hardware=hardware,
                          comparable=comparable))
  return rows


# ---------------------------------------------------------------------------------------------
# The configs.

def _split(rows: Sequence[SftRow | PreferenceRow]) -> dict[str, list[dict[str, Any]]]:
  """split -> JSON rows; an empty split is left out (`datasets` cannot load one)."""
  out = {split: [to_json_dict(r) for r in rows if split_of(r.task) == split] for split in SPLITS}
  return {split: v for split, v in out.items() if v}


def config_rows(merged: Merged, trees: KernelTrees, headline: str,
                candidates: Sequence[CandidateRow]) -> dict[str, dict[str, list[dict[str, Any]]]]:
  """config -> split -> JSON rows of the `sft` and `preference` configs (empty ones left out)."""
  sft = sft_rows(merged, trees, headline)
  pairs = [*release_pairs(merged, trees, headline), *population_pairs(candidates)]
  configs = {"sft": _split(sft), "preference": _split(pairs)}
  return {name: splits for name, splits in configs.items() if splits}


def card_stats(configs: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]]) -> dict[str, Any]:
  """The card's section on the fine-tuning configs."""
  def count(config: str, split: str, key: str | None = None) -> Any:
    rows = configs.get(config, {}).get(split, [])
    if key is None:
      return len(rows)
    values = sorted({r[key] for r in rows})
    return ", ".join(f"{v} {sum(r[key] == v for r in rows)}" for v in values) or "none"
  return {"test_tasks": ", ".join(f"`{t}`" for t in TEST_TASKS),
          "n_test_tasks": len(TEST_TASKS), "min_ratio": f"{MIN_SPEEDUP_RATIO:g}",
          "sft": {s: count("sft", s) for s in SPLITS},
          "sft_kinds": {s: count("sft", s, "prompt_kind") for s in SPLITS},
          "preference": {s: count("preference", s) for s in SPLITS},
          "pair_kinds": {s: count("preference", s, "pair_kind") for s in SPLITS}}
