"""The build over several runs: the kernel-source check covers every run given, not only the
first; a row's artifacts come from the run that gave its record."""

import dataclasses

import pytest

from builder.build import BuildError, build_dataset
from builder.records import merge_runs, read_run
from pallasbench_dataset import kernels

from tests import runfixtures as rf


def test_kernel_source_check_covers_every_run_not_only_the_first(tmp_path):
  """A later run measured with another relu source (its rows at large would publish code that
  was not measured) is refused, and nothing is written."""
  trees = rf.write_tree(tmp_path)
  medium = rf.write_run(tmp_path / "medium", rf.standard_records(trees))
  older = kernels.sha256("an older relu kernel, since edited")
  large = rf.write_run(tmp_path / "large",
                       [rf.record(trees, "relu", "gpu", "large", kernel_sha256=older)],
                       tasks=("relu",), sizes=("large",), variants=("gpu",))
  with pytest.raises(BuildError, match=r"1 record\(s\) measured a kernel that differs from the "
                     r"file in the trees \(relu/gpu/large\)"):
    build_dataset([medium, large], tmp_path / "out", kernel_trees=trees)
  assert not (tmp_path / "out").exists()


def _ir(records, module: str):
  return [dataclasses.replace(a, stablehlo=f"module @{module} {{}}") for a in rf.artifacts_for(records)]


def test_a_rows_artifacts_come_from_the_run_whose_record_it_is(tmp_path):
  """Two runs measured relu/gpu/medium: the first run's record is the row, so the IR beside it
  must be the first run's too, not the later run's (which compiled it anew)."""
  trees = rf.write_tree(tmp_path)
  first = [rf.record(trees, "relu", "gpu")]
  later = [rf.record(trees, "relu", "gpu", runtime_ms=0.25)]
  runs = [read_run(rf.write_run(tmp_path / "a", first, _ir(first, "from_a"))),
          read_run(rf.write_run(tmp_path / "b", later, _ir(later, "from_b")))]
  merged = merge_runs(runs)
  assert merged.records == (first[0],)
  assert [a.stablehlo for a in merged.artifacts] == ["module @from_a {}"]
