"""A behaviour of the build that a plausible one-line edit could break with every other test
green: the kernel-source check covers every run given, not only the first."""

import pytest

from builder.build import BuildError, build_dataset
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
