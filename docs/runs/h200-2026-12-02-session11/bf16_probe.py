"""One-off probe: the 45 fixed kernels at bfloat16, medium, through the judge (not committed)."""
import json, os, pathlib, sys, time
from pallasbench_dataset.evaluate import default_options
from pallasbench_dataset.evaluation.pipeline.driver import WorkItem, run_items
from pallasbench_dataset.evaluation.judge.process import JudgeConfig, Limits, make_dump_dir, default_memory_limit
from pallasbench_dataset.tasks import list_tasks
out = pathlib.Path(os.environ["OUT"]) / "bf16-probe.jsonl"
items = [WorkItem(task=t.name, variant="candidate", size="medium",
                  source=pathlib.Path(f"kernels_gpu/{t.name}.py").read_text(),
                  filename=f"kernels_gpu/{t.name}.py", options=default_options("gpu"),
                  precision="bfloat16") for t in list_tasks()]
t0 = time.time()
def on(r, _):
  row = dict(task=r.task, status=str(r.status), ms=r.runtime_ms, base=r.baseline_ms,
             speedup=r.speedup, reason=(r.reasons[0][:200] if r.reasons else ""), t=round(time.time()-t0, 1))
  print(json.dumps(row), flush=True)
  with out.open("a") as f: f.write(json.dumps(row) + "\n")
run_items(items, JudgeConfig(device="gpu", git_commit=None, dump_dir=make_dump_dir("gpu")),
          Limits(timeout_s=60, memory_bytes=default_memory_limit()), on_result=on)
