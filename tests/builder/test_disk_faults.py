"""builder.build under filesystem faults: a read-only or full disk ends the build with a
BuildError (a ValueError, which `regenerate` prints as an `error:` line, exit status 2), the
previous dataset folder stays as it was, and no staging folder or `.tmp` file is left."""

import errno
import hashlib
import os
import pathlib
import tempfile

import datasets
import pytest

from builder.build import BuildError, build_dataset
from builder.trees import KernelTrees
from tests import runfixtures as rf


def _hashes(folder: pathlib.Path) -> dict[str, str]:
  return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(folder.rglob("*")) if p.is_file()}


def _leftovers(root: pathlib.Path) -> list[str]:
  """Staging or backup folders of a build, and temporary files, anywhere under root."""
  return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                if p.name.startswith(".out.") or p.suffix == ".tmp")


@pytest.fixture
def setup(tmp_path):
  """A run, its trees, and a previous build in tmp_path/out."""
  trees = rf.write_tree(tmp_path / "src")
  records = rf.standard_records(trees)
  run = rf.write_run(tmp_path / "src" / "run", records, rf.artifacts_for(records))
  out = build_dataset([run], tmp_path / "out", kernel_trees=trees).out_dir
  return trees, run, out


def _enospc(*args, **kwargs):
  raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _erofs(*args, **kwargs):
  raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(args[0]) if args else None)


# Where the disk fills up or turns out read-only: each point of the build that writes.
FAULTS = {
    "staging folder (read-only parent)": ("builder.build.tempfile.mkdtemp", _erofs),
    "parquet file (disk full)": ("pyarrow.parquet.write_table", _enospc),
    "kernel copy or plot (disk full)": ("pathlib.Path.write_bytes", _enospc),
    "raw results copy (disk full)": ("builder.build.shutil.copyfile", _enospc),
    "JSON list or card (disk full)": ("pathlib.Path.write_text", _enospc),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_filesystem_fault_is_a_build_error_and_leaves_nothing(setup, tmp_path, monkeypatch, fault):
  trees, run, out = setup
  before = _hashes(out)
  target, raiser = FAULTS[fault]
  monkeypatch.setattr(target, raiser)
  with pytest.raises(BuildError) as info:
    build_dataset([run], out, kernel_trees=trees)
  monkeypatch.undo()
  message = str(info.value)
  assert isinstance(info.value, ValueError)
  assert os.strerror(errno.EROFS if "read-only" in fault else errno.ENOSPC) in message
  assert "nothing was replaced" in message and "--out" in message
  assert _hashes(out) == before
  assert _leftovers(tmp_path) == []


def test_failed_swap_puts_the_previous_folder_back(setup, tmp_path, monkeypatch):
  """The second rename of the swap (staging -> out) fails: out is the previous folder again."""
  trees, run, out = setup
  before = _hashes(out)
  real_replace = os.replace

  def replace(src, dst):
    if pathlib.Path(src).name.startswith(".out.building-"):
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real_replace(src, dst)
  monkeypatch.setattr("builder.build.os.replace", replace)
  with pytest.raises(BuildError, match="No space left on device"):
    build_dataset([run], out, kernel_trees=trees)
  assert _hashes(out) == before
  assert _leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_parent_folder(setup, tmp_path):
  trees, run, _ = setup
  parent = tmp_path / "readonly"
  parent.mkdir()
  parent.chmod(0o555)
  try:
    with pytest.raises(BuildError, match="Permission denied"):
      build_dataset([run], parent / "out", kernel_trees=trees)
  finally:
    parent.chmod(0o755)
  assert list(parent.iterdir()) == []


def test_regenerate_prints_an_error_line_and_exits_2(tmp_path, monkeypatch, capsys):
  """The disk fills while `regenerate --from-results` builds: `error: ...` and status 2."""
  from builder import regenerate  # pylint: disable=import-outside-toplevel
  trees = KernelTrees.shipped()
  records = [rf.record(trees, "relu", v) for v in ("tpu", "gpu")]
  run = rf.write_run(tmp_path / "run", records, rf.artifacts_for(records), tasks=("relu",))
  monkeypatch.setattr("builder.plots.roofline_png", _enospc)
  rc = regenerate.main(["--from-results", str(run), "--out", str(tmp_path / "out"),
                        "--allow-partial"])
  err = capsys.readouterr().err
  assert rc == 2
  assert any(line.startswith("error: cannot build") and "No space left on device" in line
             for line in err.splitlines()), err
  assert not (tmp_path / "out").exists() and _leftovers(tmp_path) == []


def test_validation_cache_is_removed_after_a_fault(setup, tmp_path, monkeypatch):
  """The offline load that validates the staging folder uses a temporary cache of its own; a
  full disk there is named as such (not as a broken folder), and the cache is removed."""
  trees, run, out = setup
  made = []
  real = tempfile.TemporaryDirectory

  def tracked(*args, **kwargs):
    directory = real(*args, **kwargs)
    made.append(pathlib.Path(directory.name))
    return directory
  monkeypatch.setattr("builder.validate.tempfile.TemporaryDirectory", tracked)
  monkeypatch.setattr(datasets, "load_dataset", _enospc)
  before = _hashes(out)
  with pytest.raises(ValueError, match=r"failed writing its cache .*No space left on device"):
    build_dataset([run], out, kernel_trees=trees)
  assert made and not any(p.exists() for p in made)
  assert _hashes(out) == before and _leftovers(tmp_path) == []
