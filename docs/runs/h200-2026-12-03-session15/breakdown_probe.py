"""Where the time of the float32 contraction stragglers goes, kernel by kernel (CUPTI, median of
20 calls on one input set): the fixed kernel as its tuned config runs it, and XLA's reference
beside it; the bfloat16 matmul for contrast. Prints one JSON line per (task, precision, side)."""
import collections
import json
import statistics
import sys

import jax
from jax.experimental.mosaic.gpu import profiler

from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.tasks import Size, get_task

CASES = [("matmul", "float32"), ("swiglu", "float32"), ("geglu", "float32"),
         ("linear_bias_relu", "float32"), ("batched_matmul", "float32"), ("matmul", "bfloat16")]


def breakdown(fn, inputs):
  jax.block_until_ready(fn(*inputs))
  _, runs = profiler.measure(fn, aggregate=False, iterations=20)(*inputs)
  per = collections.defaultdict(list)
  for run in runs:
    for name, ms in run:
      per[name].append(ms)
  kernels = {name: round(statistics.median(v), 5) for name, v in per.items()}
  return kernels, round(statistics.median(sum(ms for _, ms in run) for run in runs), 5)


for task, precision in CASES:
  spec = get_task(task).at_precision(precision)
  inputs = spec.make_inputs(Size.LARGE, 7)
  module = load_kernel("gpu", task)
  for side, fn in (("fixed", jax.jit(module.kernel)), ("xla", jax.jit(spec.reference))):
    try:
      kernels, total = breakdown(fn, inputs)
      line = {"task": task, "precision": precision, "side": side, "total_ms": total,
              "kernels_ms": kernels}
      if side == "fixed":
        line["config"] = module.config_for(*inputs)
    except Exception as e:  # report and go on to the next case
      line = {"task": task, "precision": precision, "side": side,
              "error": f"{type(e).__name__}: {e}"[:300]}
    print(json.dumps(line), flush=True)
    sys.stdout.flush()
