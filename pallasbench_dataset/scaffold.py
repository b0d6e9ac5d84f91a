"""Scaffolds for evolutionary kernel search with OpenEvolve or ShinkaEvolve.

    python -m pallasbench_dataset.scaffold --framework openevolve --task relu --variant gpu --out e
    python -m pallasbench_dataset.scaffold --framework shinka --all --out e

A scaffold is the folder OUT/<framework>/<task>-<variant>/ with the files the framework expects:
the kernel (kernels_gpu/ or kernels_tpu/) as the initial program with one EVOLVE-BLOCK, an
evaluator that scores each program with the sealed judge, the framework's config with the task
description as its system prompt, and a README.md that says how to run it. Writing a scaffold
rewrites those four files and leaves anything else in the folder (a run's results) alone.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Final

import yaml

from pallasbench_dataset.evolve import blocks, openevolve_adapter, prompt, shinka_adapter
from pallasbench_dataset.kernels import Variant, kernel_path
from pallasbench_dataset.tasks import TaskSpec, get_task, list_tasks

# A framework is its adapter module: TITLE, the file names PROGRAM, EVALUATOR and CONFIG,
# PROMPT_KEY and SETTINGS_HINT (where its config holds the prompt and the judge's settings),
# CONFIG_HEADER, RUN (the README's run section), evaluator_source() and config().
FRAMEWORKS: Final[Mapping[str, types.ModuleType]] = types.MappingProxyType(
    {"openevolve": openevolve_adapter, "shinka": shinka_adapter})
VARIANTS: Final = (Variant.GPU, Variant.TPU)


class _Dumper(yaml.SafeDumper):
  """Writes multi-line strings (the task description) as literal blocks, to read and edit."""


_Dumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def files(framework: str, task: str, variant: Variant | str) -> dict[str, str]:
  """The scaffold's files, by name: initial program, evaluator, config and README.md."""
  if framework not in FRAMEWORKS:
    raise KeyError(f"unknown framework {framework!r}; known frameworks: {', '.join(FRAMEWORKS)}")
  adapter, spec, variant = FRAMEWORKS[framework], get_task(task), Variant(variant)
  if variant not in VARIANTS:
    raise ValueError(f"variant must be gpu or tpu, not {variant.value!r}")
  source = kernel_path(variant, spec.name)
  title = f"PallasBench-Robust task {spec.name} ({variant.value} variant)"
  config = yaml.dump(adapter.config(prompt.describe(spec, variant)), Dumper=_Dumper,
                     sort_keys=False, allow_unicode=True)
  return {adapter.PROGRAM: blocks.mark(source.read_text(), str(source)),
          adapter.EVALUATOR: adapter.evaluator_source(spec.name, title),
          adapter.CONFIG: adapter.CONFIG_HEADER.format(title=title) + config,
          "README.md": _readme(framework, spec, variant, title)}


def _folder(framework: str, task: str, variant: Variant | str, out: pathlib.Path) -> pathlib.Path:
  return out / framework / f"{task}-{Variant(variant).value}"


def _refuse_existing(folders: Sequence[pathlib.Path]) -> None:
  """A scaffold folder that holds files holds the user's work (an evolved program, edits)."""
  taken = [f for f in folders if f.is_dir() and any(f.iterdir())]
  if taken:
    raise FileExistsError(f"{len(taken)} scaffold folder(s) exist and hold files ({taken[0]}"
                          f"{', ...' if len(taken) > 1 else ''}): writing would overwrite your "
                          "edits. Pass --force to overwrite them, or choose another --out")


def write(framework: str, task: str, variant: Variant | str, out: pathlib.Path, *,
          force: bool = False) -> pathlib.Path:
  """Writes one scaffold into OUT/<framework>/<task>-<variant>/ and returns that folder; an
  existing folder with files is refused unless `force`."""
  contents = files(framework, task, variant)
  folder = _folder(framework, task, variant, out)
  if not force:
    _refuse_existing([folder])
  folder.mkdir(parents=True, exist_ok=True)
  for name, text in contents.items():
    (folder / name).write_text(text)
  return folder


def write_all(framework: str, out: pathlib.Path, *, force: bool = False) -> list[pathlib.Path]:
  """Every task, both variants: 90 scaffolds (none written when one exists, unless `force`)."""
  pairs = [(spec.name, variant) for spec in list_tasks() for variant in VARIANTS]
  if not force:
    _refuse_existing([_folder(framework, t, v, out) for t, v in pairs])
  return [write(framework, t, v, out, force=True) for t, v in pairs]


def _readme(framework: str, spec: TaskSpec, variant: Variant, title: str) -> str:
  adapter = FRAMEWORKS[framework]
  return f"""# {title} with {adapter.TITLE}

Task {spec.task_id}, level {spec.level} ({spec.category}). Written by `python -m
pallasbench_dataset.scaffold --framework {framework} --task {spec.name} --variant {variant.value}`.

- `{adapter.PROGRAM}`: `kernels_{variant.value}/{spec.name}.py` with one EVOLVE-BLOCK around what a
  search may change (tuning constants, kernel bodies, helpers, the `kernel` wrapper); the
  docstring, the imports and the constants the task fixes stay outside it.
- `{adapter.EVALUATOR}`: scores a program with the sealed PallasBench judge. `combined_score` is
  the judge's speedup over the jitted JAX baseline when the kernel passes (correct, a real
  Pallas kernel, robust) with a comparable timing, 1 for a pass on a CPU (interpret mode: its
  speed is not measured, so not scored), and 0 for any other verdict (incorrect, rejected, error, timeout); the
  verdict, the judge's reasons and the error text are the feedback.
- `{adapter.CONFIG}`: {adapter.TITLE} settings. The task description, which the LLM reads as
  its system prompt, is `{adapter.PROMPT_KEY}`.

## Run

{adapter.RUN}
## Size and device

The judge evaluates at one registered size on one device: by default device `auto` (an NVIDIA
GPU when one is usable) and size `medium` on a GPU, `small` on a CPU. On a CPU Pallas runs in
interpret mode and timings are not comparable: a CPU run checks that the loop works, a search
for speed needs a GPU. `PALLASBENCH_SIZE` (small, medium, large, edge) and `PALLASBENCH_DEVICE`
(auto, gpu, cpu) change them, and {adapter.SETTINGS_HINT} in `{adapter.CONFIG}` wins over both.

To judge the initial program alone:
`python -m pallasbench_dataset.evaluate --task {spec.name} --kernel {adapter.PROGRAM}`.
"""


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="python -m pallasbench_dataset.scaffold", description=__doc__.split("\n\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--framework", required=True, choices=list(FRAMEWORKS))
  which = parser.add_mutually_exclusive_group(required=True)
  which.add_argument("--task", help="task name, e.g. relu")
  which.add_argument("--all", action="store_true", help="every task, both variants")
  parser.add_argument("--variant", choices=[v.value for v in VARIANTS], default=None,
                      help="gpu: kernels_gpu/, the GPU-fixed kernel (default); tpu: kernels_tpu/, "
                           "the original")
  parser.add_argument("--out", required=True, type=pathlib.Path, help="output folder")
  parser.add_argument("--force", action="store_true",
                      help="overwrite scaffold folders that exist (and the edits in them)")
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  parser = build_parser()
  args = parser.parse_args(argv)
  if args.all and args.variant:
    parser.error("--all writes both variants; leave out --variant")
  try:
    if args.all:
      folders = write_all(args.framework, args.out, force=args.force)
    else:
      folders = [write(args.framework, args.task, args.variant or Variant.GPU, args.out,
                       force=args.force)]
  except (KeyError, ValueError, FileExistsError) as e:
    print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
    return 2
  print(folders[0] if len(folders) == 1 else
        f"{len(folders)} scaffolds in {args.out / args.framework}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
