"""pallasbench_dataset.analysis on known rows, with hand-computed expectations."""

import math

import numpy as np
import pandas as pd
import pytest

from pallasbench_dataset import analysis

# Six tasks. Hand count (a row passes when correct AND status == "pass"):
#   A pass 2.0 | B pass 0.5 | C incorrect 3.0 (fast, wrong) | D rejected 4.0 (correct, gamed)
#   E pass, no timing | F pass 1.5
# passing with speedup: A 2.0, B 0.5, F 1.5
#   fast_0 = 3/6, fast_1 = 2/6 (A, F), fast_2 = 0/6 (A is 2.0: not strictly above 2)
#   geomean = (2.0 * 0.5 * 1.5) ** (1/3) = 1.5 ** (1/3)
DEFAULT = pd.DataFrame({
    "Op_Name": ["a", "b", "c", "d", "e", "f"],
    "Task_ID": [1, 2, 3, 28, 29, 41],
    "Level_ID": [1, 1, 1, 2, 2, 3],
    "Correct": [True, True, False, True, True, True],
    "Status": ["pass", "pass", "incorrect", "rejected", "pass", "pass"],
    "Pallas_Speedup": [2.0, 0.5, 3.0, 4.0, None, 1.5],
    "Error": [None, None, "not allclose", None, None, None],
})
RUNS = DEFAULT.rename(columns={"Op_Name": "task", "Task_ID": "task_id", "Level_ID": "level",
                               "Correct": "correct", "Status": "status",
                               "Pallas_Speedup": "speedup", "Error": "error"}).assign(
                                   variant="gpu", size="medium")


@pytest.mark.parametrize("df", [DEFAULT, RUNS], ids=["default", "runs"])
def test_fast_p_counts_all_tasks_and_only_passing_kernels(df):
  assert analysis.fast_p(df, 0) == pytest.approx(3 / 6)
  assert analysis.fast_p(df, 1) == pytest.approx(2 / 6)
  assert analysis.fast_p(df, 2) == 0.0


@pytest.mark.parametrize("df", [DEFAULT, RUNS], ids=["default", "runs"])
def test_geomean_is_over_passing_rows(df):
  assert analysis.geomean_speedup(df) == pytest.approx(1.5 ** (1 / 3))


def test_without_status_column_correct_alone_decides():
  df = DEFAULT.drop(columns="Status")  # D now counts: correct, 4.0
  assert analysis.fast_p(df, 0) == pytest.approx(4 / 6)
  assert analysis.geomean_speedup(df) == pytest.approx((2.0 * 0.5 * 1.5 * 4.0) ** 0.25)


def test_empty_frame_gives_nan():
  assert math.isnan(analysis.fast_p(DEFAULT.iloc[:0], 0))
  assert math.isnan(analysis.geomean_speedup(DEFAULT.iloc[:0]))


def test_summary_by_level():
  table = analysis.summary_by_level(DEFAULT)
  assert list(table.columns) == ["level", "tasks", "passed", "fast_0", "fast_1", "fast_2",
                                 "geomean_speedup"]
  assert list(table["level"]) == ["1", "2", "3", "all"]
  assert list(table["tasks"]) == [3, 2, 1, 6]
  assert list(table["passed"]) == [2, 1, 1, 4]  # level 2: d is rejected, e passes untimed
  np.testing.assert_allclose(table["fast_0"], [2 / 3, 0.0, 1.0, 3 / 6])
  np.testing.assert_allclose(table["fast_1"], [1 / 3, 0.0, 1.0, 2 / 6])
  np.testing.assert_allclose(table["geomean_speedup"], [1.0, np.nan, 1.5, 1.5 ** (1 / 3)])
  pd.testing.assert_frame_equal(analysis.summary_by_level(RUNS), table)


def test_summary_by_level_custom_ps():
  table = analysis.summary_by_level(DEFAULT, ps=(0.8, 1.5))
  assert "fast_0.8" in table.columns and "fast_1.5" in table.columns
  assert table.loc[table.level == "all", "fast_0.8"].item() == pytest.approx(2 / 6)  # A, F
  assert table.loc[table.level == "all", "fast_1.5"].item() == pytest.approx(1 / 6)  # A only


def test_failures_lists_failing_rows_in_task_order():
  out = analysis.failures(DEFAULT.iloc[::-1])
  assert list(out["Op_Name"]) == ["c", "d"]
  assert list(out["Status"]) == ["incorrect", "rejected"]
  assert out["Error"].iloc[0] == "not allclose"
  runs_out = analysis.failures(RUNS)
  assert list(runs_out["task"]) == ["c", "d"]
  assert {"variant", "size", "status", "error"} <= set(runs_out.columns)


def test_missing_column_says_which():
  with pytest.raises(KeyError, match="speedup"):
    analysis.fast_p(DEFAULT.drop(columns="Pallas_Speedup"), 1)


def test_compile_time_table():
  runs = pd.DataFrame({
      "task_id": [28, 1, 2],
      "task": ["matmul_relu", "relu", "gelu"],
      "variant": ["gpu", "gpu", "gpu"],
      "size": ["medium"] * 3,
      "compile": [{"trace_s": 0.5, "lower_s": 0.25, "compile_s": 2.0, "triton_ir_bytes": 10,
                   "ptx_bytes": 20},
                  {"trace_s": 0.1, "lower_s": None, "compile_s": 0.4, "triton_ir_bytes": None,
                   "ptx_bytes": None},
                  None],
  })
  table = analysis.compile_time_table(runs)
  assert list(table["task"]) == ["relu", "matmul_relu"]  # task-id order, no profile dropped
  assert table["total_s"].tolist() == pytest.approx([0.5, 2.75])
  assert table.loc[1, "ptx_bytes"] == 20


def _runs(runtimes, comparable=None):
  keys = [("relu", "gpu", "medium"), ("gelu", "gpu", "medium"), ("exp", "gpu", "medium"),
          ("tanh", "gpu", "medium")]
  df = pd.DataFrame([{"task": t, "variant": v, "size": s, "runtime_ms": r}
                     for (t, v, s), r in zip(keys, runtimes)])
  if comparable is not None:
    df["timing_comparable"] = comparable
  return df


def test_reproducibility_table_and_summary():
  a = _runs([1.0, 2.0, 4.0, 1.0], comparable=[True, True, True, True])
  b = _runs([1.02, 2.5, 4.0, 9.0], comparable=[True, True, True, False])  # tanh: CPU, dropped
  table = analysis.reproducibility(a, b, threshold=0.05)
  assert list(table["task"]) == ["exp", "gelu", "relu"]
  np.testing.assert_allclose(table["rel_diff"], [0.0, 0.25, 0.02])
  assert list(table["above_threshold"]) == [False, True, False]
  stats = analysis.reproducibility_summary(table)
  assert stats["n"] == 3 and stats["n_above"] == 1
  assert stats["median"] == pytest.approx(0.02)
  assert stats["max"] == pytest.approx(0.25)
  assert stats["p90"] == pytest.approx(0.02 + 0.8 * 0.23)  # linear between 0.02 and 0.25


def test_verdict_changes_names_every_status_that_differs():
  a = pd.DataFrame([dict(task="relu", variant="tpu", size="medium", status="error", error="e1"),
                    dict(task="exp", variant="gpu", size="medium", status="pass", error=None),
                    dict(task="gelu", variant="tpu", size="medium", status="timeout", error="t"),
                    dict(task="tanh", variant="gpu", size="large", status="pass", error=None)])
  b = pd.DataFrame([dict(task="relu", variant="tpu", size="medium", status="timeout", error="e2"),
                    dict(task="exp", variant="gpu", size="medium", status="pass", error=None),
                    dict(task="gelu", variant="tpu", size="medium", status="pass", error=None)])
  table = analysis.verdict_changes(a, b)   # tanh is not in b: not a change
  assert table.to_dict("records") == [
      dict(task="gelu", variant="tpu", size="medium", status_a="timeout", status_b="pass",
           error_a="t", error_b=None, reasons_a=None, reasons_b=None),
      dict(task="relu", variant="tpu", size="medium", status_a="error", status_b="timeout",
           error_a="e1", error_b="e2", reasons_a=None, reasons_b=None)]
  assert analysis.verdict_changes(a, a).empty
  a["reasons"] = [["r1"], [], ["r2", "r3"], []]
  b["reasons"] = [[], [], ["the timing stage ran past its 200 s budget"]]
  reasons = analysis.verdict_changes(a, b)[["reasons_a", "reasons_b"]]
  assert reasons.to_dict("records") == [
      dict(reasons_a=["r2", "r3"], reasons_b=["the timing stage ran past its 200 s budget"]),
      dict(reasons_a=["r1"], reasons_b=[])]


def test_reproducibility_ignores_missing_and_zero_runtimes():
  a = _runs([1.0, None, 0.0, 1.0])
  b = _runs([1.1, 1.0, 1.0, None])
  table = analysis.reproducibility(a, b)
  assert list(table["task"]) == ["relu"]
  assert analysis.reproducibility_summary(table.iloc[:0])["n"] == 0
