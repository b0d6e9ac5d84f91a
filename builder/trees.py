"""The two kernel trees a build publishes: sources, sha256 checks, fix constants and fix.patch."""

from __future__ import annotations

import dataclasses
import difflib
import pathlib
from collections.abc import Iterable

from pallasbench_dataset import kernels
from pallasbench_dataset.schema import EvalRecord
from pallasbench_dataset.tasks import TASKS

from builder.records import BuildError, some


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KernelTrees:
  """Where kernels_tpu/ (the originals) and kernels_gpu/ (the fixes) are read from."""
  tpu: pathlib.Path
  gpu: pathlib.Path

  @classmethod
  def shipped(cls) -> KernelTrees:
    """The trees of this checkout (kernels_tpu/, kernels_gpu/)."""
    return cls(tpu=kernels.tree_dir("tpu"), gpu=kernels.tree_dir("gpu"))

  @classmethod
  def within(cls, folder: pathlib.Path) -> KernelTrees:
    """The trees under `folder` (a checkout, or a released dataset folder)."""
    trees = cls(tpu=folder / "kernels_tpu", gpu=folder / "kernels_gpu")
    missing = [str(d) for d in (trees.tpu, trees.gpu) if not d.is_dir()]
    if missing:
      raise BuildError(f"no kernel tree at {', '.join(missing)}: --kernel-trees takes a folder "
                       "holding kernels_tpu/ and kernels_gpu/")
    return trees

  def dir(self, variant: str) -> pathlib.Path:
    return {"tpu": self.tpu, "gpu": self.gpu}[variant]

  def path(self, variant: str, task: str) -> pathlib.Path:
    return self.dir(variant) / f"{task}.py"

  def source(self, variant: str, task: str) -> str:
    path = self.path(variant, task)
    if not path.is_file():
      raise BuildError(f"{path} does not exist, but the records measured it: restore the kernel "
                       "file or drop its records")
    return path.read_text()

  def files(self, variant: str) -> tuple[pathlib.Path, ...]:
    """The tree's kernel modules (registered task names only; no __init__.py), sorted."""
    return tuple(sorted(p for p in self.dir(variant).glob("*.py") if p.stem in TASKS))


def check_sha256(records: Iterable[EvalRecord], trees: KernelTrees) -> None:
  """Refuses records whose kernel_sha256 is not the kernel file the dataset would publish."""
  stale = []
  for r in records:
    actual = kernels.sha256(trees.source(r.variant, r.task))
    if actual != r.kernel_sha256:
      stale.append(f"{r.task}/{r.variant}/{r.size}")
  if stale:
    raise BuildError(
        f"{len(stale)} record(s) measured a kernel that differs from the file in the trees "
        f"({some(stale)}): the rows would publish code that was not measured. To rebuild a "
        "released folder, pass --kernel-trees with it (e.g. --kernel-trees data: it holds the "
        "kernels its rows measured); else re-measure them (regenerate --tasks ...) or restore "
        "the measured kernel files")


def gpu_fix(trees: KernelTrees, task: str) -> tuple[str, str]:
  """FIX_APPLIED and FIX_REASON of kernels_gpu/<task>.py, read by loading the module."""
  path = trees.path("gpu", task)
  try:
    module = kernels.load_module(trees.source("gpu", task), str(path))
  except kernels.KernelLoadError as e:
    raise BuildError(f"cannot load {path}: {e}") from None
  values = (getattr(module, "FIX_APPLIED", None), getattr(module, "FIX_REASON", None))
  if not all(isinstance(v, str) and v for v in values):
    raise BuildError(f"{path} must define FIX_APPLIED and FIX_REASON as non-empty strings")
  return values


def fix_patch(trees: KernelTrees) -> str:
  """A git diff that creates kernels_gpu/ next to kernels_tpu/, one file per fixed kernel in
  task-name order.

  Each fixed kernel is a copy of its original plus the fix's hunks (`copy from` / `copy to`;
  a new file where there is no original), so that `git apply` and `patch -p1` (GNU patch 2.7
  reads git copies) give the same tree and leave the originals as they are. A plain unified
  diff from a/kernels_tpu to b/kernels_gpu is read differently by the two tools: `patch`
  edits the original in place, `git apply` looks for kernels_gpu/ and fails.
  """
  chunks: list[str] = []
  for path in trees.files("gpu"):
    old = trees.path("tpu", path.stem)
    new_name = f"kernels_gpu/{path.name}"
    if old.is_file():
      old_name = f"kernels_tpu/{path.name}"
      hunks = list(difflib.unified_diff(_lines(old), _lines(path), fromfile=f"a/{old_name}",
                                        tofile=f"b/{new_name}"))
      chunks += [f"diff --git a/{old_name} b/{new_name}\n",
                 *([] if hunks else ["similarity index 100%\n"]),
                 f"copy from {old_name}\n", f"copy to {new_name}\n", *hunks]
    else:
      chunks += [f"diff --git a/{new_name} b/{new_name}\n", "new file mode 100644\n",
                 *difflib.unified_diff([], _lines(path), fromfile="/dev/null",
                                       tofile=f"b/{new_name}")]
  return "".join(chunks)


def _lines(path: pathlib.Path) -> list[str]:
  """Lines with their ends; a missing final newline is marked as `diff` does."""
  if not path.is_file():
    return []
  lines = path.read_text().splitlines(keepends=True)
  if lines and not lines[-1].endswith("\n"):
    lines[-1] += "\n\\ No newline at end of file\n"
  return lines
