"""The card at two precisions: the reproducibility section has a part per precision
(a record paired with the other run's record of the same precision only), the artifacts,
compile-time, filter and L2 tables a precision column, the ceilings table a bfloat16 matmul
column wherever a run measured it, and a bfloat16 speedup plot beside the float32 ones. None
of it appears in a float32 build. Small fake records, made as
tests/builder/test_precision_configs.py makes them."""

import dataclasses
import types

import pandas as pd
import pytest

from builder import plots, repeats, sections, tables
from builder import records as rec
from builder.build import build_dataset
from pallasbench_dataset import precision
from pallasbench_dataset.precision import BFLOAT16, DEFAULT_PRECISION
from pallasbench_dataset.schema import Status

from tests import runfixtures as rf
from tests.builder.test_precision_configs import _bfloat16, _hashes

BF16_MATMUL = 800.0  # the bfloat16 matmul ceiling the fake runs measured


def _measured(records, **changes):
  """Records of a judge that measured the bfloat16 matmul ceiling (release 6 on)."""
  run = dataclasses.replace(rf.run_info(), ceiling_matmul_bf16_tflops=BF16_MATMUL)
  return [dataclasses.replace(r, run=run, **changes) for r in records]


def _slower(records, task, factor, **changes):
  """`records` with `task`'s fixed kernel `factor` times slower (its speedup follows)."""
  out = []
  for r in records:
    if r.task == task and r.variant == "gpu":
      runtime = r.runtime_ms * factor
      r = dataclasses.replace(r, runtime_ms=runtime, speedup=r.baseline_ms / runtime, **changes)
    out.append(r)
  return out


def _artifacts(records, ptx):
  return [dataclasses.replace(a, precision=r.precision, ptx=ptx if r.compile else None)
          for a, r in zip(rf.artifacts_for(records), records)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """Two runs of the same evaluations at both precisions. The second run's float32 relu is 10 %
  slower; its bfloat16 matmul_relu is 10 % faster, which takes its speedup from 0.952 to 1.058
  (across 1.0), and its bfloat16 flash_attention timed out. One bfloat16 record rotated
  through inputs that fit in the L2, and the bfloat16 compiles took twice as long. Also a
  float32 build of the first run's float32 records, without the bfloat16 ceiling."""
  root = tmp_path_factory.mktemp("precision-card")
  trees = rf.write_tree(root / "trees")
  f32 = _measured(rf.standard_records(trees))
  half = _measured(_bfloat16(rf.standard_records(trees)))
  half = [dataclasses.replace(r, compile=dataclasses.replace(r.compile, compile_s=1.4))
          if r.task == "relu" else r for r in half]
  half[0] = dataclasses.replace(half[0], timing_l2_resident=True, timing_rotated_bytes=1 << 20)
  both = ["float32", "bfloat16"]
  first = rf.write_run(root / "run-1", f32 + half, _artifacts(f32, None) + _artifacts(half, "ptx"),
                       precisions=both)
  again_f32 = _slower(f32, "relu", 1.1)
  again_half = _slower(half, "matmul_relu", 0.9)
  again_half = [dataclasses.replace(r, status=Status.TIMEOUT, runtime_ms=None, speedup=None,
                                    error="timed out")
                if r.task == "flash_attention" and r.variant == "gpu" else r for r in again_half]
  second = rf.write_run(root / "run-2", again_f32 + again_half,
                        _artifacts(again_f32, None) + _artifacts(again_half, "ptx"),
                        precisions=both)
  plain = rf.standard_records(trees)  # as release 5 wrote them: no bfloat16 matmul ceiling
  only = rf.write_run(root / "run-f32", plain, _artifacts(plain, None))
  out = build_dataset([first, second], root / "both", kernel_trees=trees, repo_id="o/p").out_dir
  float32 = build_dataset([only], root / "float32", kernel_trees=trees, repo_id="o/p").out_dir
  merged = rec.merge_runs([rec.read_run(first), rec.read_run(second)])
  return types.SimpleNamespace(
      both=out, float32=float32, text=(out / "README.md").read_text(),
      text_f32=(float32 / "README.md").read_text(), merged=merged, half=half)


def _section(text, heading, end="\n### "):
  return text.split(heading, 1)[1].split(end, 1)[0]


def test_the_reproducibility_section_has_a_part_per_precision(built):
  section = _section(built.text, "### Reproducibility\n")
  float32, bf16 = _section(section, "#### float32\n", "#### "), _section(section, "#### bfloat16\n")
  for precision, part in ((DEFAULT_PRECISION, float32), (BFLOAT16, bf16)):
    pairs = repeats.pairs(built.merged.at_precision(precision))
    assert tables.md_table(sections.reproducibility._with_threshold(repeats.spread(pairs)),
                         sections.reproducibility._REPRO_FORMATS) in part, precision
  assert "| relu | gpu | medium | run-1 | run-2 | 0.5 | 0.55 | 10.0% |" in float32
  assert "No pair's speedup lies above 1.0" in float32 and "the same verdict" in float32
  assert "| matmul_relu | gpu | medium | run-1 | run-2 | 0.952 | 1.058 |" in bf16
  assert "1 repeated evaluation(s) got a different verdict" in bf16
  assert "| flash_attention | gpu | medium | run-1 | run-2 | pass | timeout |" in bf16
  assert "relu | gpu | medium | run-1 | run-2 | 0.5000" not in bf16


def test_pairs_are_matched_by_precision(built):
  """Each precision's pairs hold that precision's two records: the bfloat16 pairs' times are
  the bfloat16 records' (1.5 times the float32 ones), never a float32 record's."""
  half = {(r.task, r.variant): r.runtime_ms for r in built.half if r.runtime_ms is not None}
  pairs = repeats.pairs(built.merged.at_precision(BFLOAT16))
  assert dict(zip(zip(pairs["task"], pairs["variant"]), pairs["runtime_a_ms"])) == {
      k: v for k, v in half.items() if k != ("flash_attention", "gpu")}
  f32 = repeats.pairs(built.merged.at_precision(DEFAULT_PRECISION))
  assert len(f32) == len(pairs) + 1 and set(f32["runtime_a_ms"]).isdisjoint(pairs["runtime_a_ms"])
  def times(table):
    return sorted(zip(table["task"], table["variant"], table["runtime_a_ms"], table["runtime_b_ms"]))
  assert times(repeats.pairs(built.merged)) == sorted(times(f32) + times(pairs))  # all at once


def test_bfloat16_repeats_alone_get_their_part(built, tmp_path):
  """A second run that repeats only bfloat16 evaluations: the section says no float32 one was
  repeated, and shows the bfloat16 pairs."""
  trees = rf.write_tree(tmp_path / "trees")
  f32, half = rf.standard_records(trees), _bfloat16(rf.standard_records(trees))
  first = rf.write_run(tmp_path / "r1", f32 + half, precisions=["float32", "bfloat16"])
  again = rf.write_run(tmp_path / "r2", _slower(half, "relu", 1.2), precisions=["bfloat16"])
  text = (build_dataset([first, again], tmp_path / "out", kernel_trees=trees).out_dir
          / "README.md").read_text()
  section = _section(text, "### Reproducibility\n")
  assert "#### float32\n\nNo float32 evaluation was repeated.\n" in section
  assert "| relu | gpu | medium | r1 | r2 | 0.75 | 0.9 | 20.0% |" in _section(
      section, "#### bfloat16\n")
  assert "(see [Reproducibility](#reproducibility))" in text


def test_the_artifacts_compile_filter_and_l2_tables_have_a_precision_column(built):
  artifacts = _section(built.text, "### Artifacts\n")
  assert "| run | precision | records | artifacts lines |" in artifacts
  assert "| run-1 | float32 | 8 | 8 | 8 | 8 | 0 | 0 | 8 | 0 |" in artifacts
  assert "| run-1 | bfloat16 | 8 | 8 | 8 | 8 | 0 | 8 | 8 | 0 |" in artifacts
  assert "PTX is missing for 16 of the 32 records" in artifacts  # the float32 ones
  assert "| none recorded | float32 | 16 | 0 | 16 |" in artifacts
  assert "| none recorded | bfloat16 | 16 | 16 | 0 |" in artifacts
  assert "`relu/gpu (float32)`" in artifacts and "(bfloat16)`" not in artifacts
  compile_table = _section(built.text, "### Compile time\n", "\n## ")
  assert "| task | size | precision | trace_s |" in compile_table
  assert "| relu | medium | float32 | 0.100 | 0.200 | 0.700 | 1.000 |" in compile_table
  assert "| relu | medium | bfloat16 | 0.100 | 0.200 | 1.400 | 1.700 |" in compile_table
  l2 = built.text.split("could stay there", 1)[1].split("- **Ceilings**", 1)[0]
  assert "| task | variant | size | precision | input sets |" in l2
  assert "| relu | gpu | medium | bfloat16 | 4 | 1.00 |" in l2
  assert "| filter | precision | evaluations | failed |" in built.text
  assert "| output_std | bfloat16 | 8 | 0 |" in built.text  # the rows, one per evaluation


def test_a_float32_card_has_no_precision_column_but_the_tolerance_tables(built):
  text = built.text_f32
  assert "| precision |" not in text.replace("| precision | output | class |", "")
  assert "#### " not in text and "speedup_bf16" not in text and "bfloat16 where a run" not in text
  assert "| run | records | artifacts lines |" in text
  assert "| task | size | trace_s |" in text


def test_the_ceilings_table_has_a_bfloat16_matmul_column_where_measured(built, tmp_path,
                                                                         monkeypatch):
  table = _section(built.text, "- **Ceilings**", "Method:")
  assert "| run | GPU | copy GB/s | read GB/s | matmul TFLOP/s | matmul bf16 TFLOP/s |" in table
  assert "| run-1 | 0 | 3900.0 | 4000.0 | 400.0 | 800.0 | 16 | records |" in table
  assert "and in bfloat16 where a run measured it" in table
  assert "matmul bf16" not in built.text_f32
  trees = rf.write_tree(tmp_path / "trees")
  ceilings = {"copy_gbps": 1.0, "read_gbps": 2.0, "matmul_tflops": 3.0, "method": "m"}
  new = rf.write_run(tmp_path / "new", [], ceilings={**ceilings, "matmul_bf16_tflops": 9.0},
                     per_device=[{"device": "0", "ceilings": {**ceilings,
                                                              "matmul_bf16_tflops": 9.0}}])
  old = rf.write_run(tmp_path / "old", [], ceilings=ceilings, per_device=[])
  new, old = rec.read_run(new), rec.read_run(old)
  assert new.manifest.ceilings.matmul_bf16_tflops == 9.0
  assert new.manifest.per_device[0].ceilings.matmul_bf16_tflops == 9.0
  assert old.manifest.ceilings.matmul_bf16_tflops is None  # a manifest without it
  assert sections.protocol._ceilings_table([new, old]).splitlines()[2:] == [
      "| new | 0 | 1.0 | 2.0 | 3.0 | 9.0 | – | manifest |",
      "| old | – | 1.0 | 2.0 | 3.0 | – | – | manifest |"]
  assert "matmul bf16" not in sections.protocol._ceilings_table([old])
  # the column is the descriptor's: its rate, named by its config
  monkeypatch.setitem(precision.PRECISIONS, BFLOAT16,
                      dataclasses.replace(precision.PRECISIONS[BFLOAT16], config="half"))
  assert sections.protocol._ceilings_table([new]).splitlines()[:1] == [
      "| run | GPU | copy GB/s | read GB/s | matmul TFLOP/s | matmul half TFLOP/s | evaluations "
      "| from |"]
  del trees


def test_a_bfloat16_roofline_plots_the_bfloat16_records_under_their_own_ceiling(built):
  """One point per comparable fixed-kernel bfloat16 record of the primary run, the float32
  roofline none of them; its compute ceiling the bfloat16 matmul of the ceilings table."""
  assert "\n![roofline at bfloat16](plots/roofline_bf16.png)\n" in built.text
  (axes,) = plots.content_of((built.both / "plots" / "roofline_bf16.png").read_bytes())["axes"]
  assert axes["title"] == "Roofline of the fixed kernels at bfloat16 (NVIDIA H200)"
  timed = [r for r in built.half if r.variant == "gpu" and r.timing_comparable and r.roofline
           and r.roofline.bytes > 0 and r.roofline.achieved_tflops]
  points = [y for ln in axes["lines"] if ln["label"].startswith(("passed", "failed"))
            for y in ln["y"]]
  assert timed and sorted(points) == sorted(
      float(f"{r.roofline.achieved_tflops:.6g}") for r in timed)
  (f32,) = plots.content_of((built.both / "plots" / "roofline.png").read_bytes())["axes"]
  assert "at bfloat16" not in f32["title"]
  (roof,) = [entry for entry in axes["legend"] if entry.startswith("ceilings")]
  assert f"{BF16_MATMUL:.1f} TFLOP/s" in roof  # the ceilings table's bfloat16 matmul


def test_a_bfloat16_speedup_plot_beside_the_float32_ones(built):
  assert "\n![speedup at bfloat16](plots/speedup_bf16.png)\n" in built.text
  shown = plots.content_of((built.both / "plots" / "speedup_bf16.png").read_bytes())
  (axes,) = shown["axes"]
  assert axes["title"] == ("Pallas speedup over the jitted JAX reference at bfloat16 "
                           "(NVIDIA H200)\nsize medium, run run-1")
  fixed = [r for r in built.half if r.variant == "gpu"]
  assert sorted(round(bar[0] + bar[2], 4) for bar in axes["bars"]) == sorted(
      round(r.speedup, 4) for r in fixed)
  assert _hashes(built.both, "plots").keys() == {
      "plots/speedup.png", "plots/roofline.png", "plots/speedup_bf16.png",
      "plots/roofline_bf16.png"}
  assert not (built.float32 / "plots" / "speedup_bf16.png").exists()
  assert not (built.float32 / "plots" / "roofline_bf16.png").exists()
  f32 = plots.content_of((built.both / "plots" / "speedup.png").read_bytes())
  assert "at bfloat16" not in f32["axes"][0]["title"]


def test_sections_join_tables_of_each_precision():
  one = pd.DataFrame([{"run": "a", "n": 1}])
  assert tables.joined({"float32": one}, "run") is one
  both = tables.joined({"float32": one, "bfloat16": pd.DataFrame(), "x": one}, "run")
  assert both.to_dict("records") == [{"run": "a", "precision": "float32", "n": 1},
                                     {"run": "a", "precision": "x", "n": 1}]
  assert tables.joined({"float32": pd.DataFrame(), "bfloat16": pd.DataFrame()}, "run").empty


def test_records_without_ptx_whose_program_has_it_at_the_other_precision_are_named_apart(tmp_path):
  """Release 6 run 1: one_hot at bfloat16 is the float32 program (it takes no floating input),
  so the compile cache served it and it has no PTX. Such records are named with that reason;
  a record whose program has PTX in no record stays in the plain list."""
  trees = rf.write_tree(tmp_path / "trees")
  f32, half = rf.standard_records(trees), _bfloat16(rf.standard_records(trees))
  lines = _artifacts(f32, "ptx text") + [
      a if a.task == "relu" else dataclasses.replace(a, stablehlo=f"{a.stablehlo} // bfloat16")
      for a in _artifacts(half, None)]
  run = rf.write_run(tmp_path / "r1", f32 + half, lines, precisions=["float32", "bfloat16"])
  merged = rec.merge_runs([rec.read_run(run)])
  compiled = {r.task for r in half if r.compile}
  assert sections.artifacts.same_program(merged) == {
      ("r1", rec.EvalKey.of(r)): "float32" for r in half if r.task == "relu" and r.compile}
  text = (build_dataset([run], tmp_path / "out", kernel_trees=trees).out_dir
          / "README.md").read_text()
  artifacts = _section(text, "### Artifacts\n")
  plain, same = artifacts.split(" of them are the same program")
  assert "at float32 that has PTX" in same and "`relu/gpu (bfloat16)`" in same
  assert "`relu/" not in plain
  assert all(f"`{t}/gpu (bfloat16)`" in plain for t in compiled - {"relu"})
  compile_time = _section(text, "### Compile time\n", "\n## ")
  assert "whose\ncompile the cache served: relu (bfloat16))" in compile_time  # not "no cache hit"
