"""Where a judge 3 evaluation's GPU seconds go (session 18): for a few fixed kernels at
`medium`, each piece of the judge's checks and timing stages timed alone, in the judge's
order, in one process; and the cost of one CUPTI session per call, with and without CUPTI's
detach (finalize) at its end. Prints one JSON line per measurement."""
import cProfile
import io
import json
import pstats
import secrets
import time

import jax

from pallasbench_dataset.evaluation.judge import checks, core, timing
from pallasbench_dataset.kernels import load_kernel
from pallasbench_dataset.tasks import get_task
from pallasbench_dataset.tolerance import compare

L2 = 60 * 2**20
BUDGET = 8 * 2**30


def emit(**kw):
  print(json.dumps(kw), flush=True)


def clock(fn):
  t0 = time.perf_counter()
  out = fn()
  return out, time.perf_counter() - t0


def session_cost(finalize, n=100):
  ext = timing._cupti_ext()
  x = jax.numpy.ones((1024,))
  f = jax.jit(lambda a: a + 1)
  jax.block_until_ready(f(x))
  t0 = time.perf_counter()
  for _ in range(n):
    ext._cupti_init()
    jax.block_until_ready(f(x))
    ext._cupti_get_timings(finalize)
  return (time.perf_counter() - t0) / n * 1e3


GPU = jax.default_backend() == "gpu"
METHOD = timing.TimingMethod.CUPTI if GPU else timing.TimingMethod.WALLCLOCK
SIZE = "medium" if GPU else "small"
if GPU:
  for flag in (True, False, True):
    emit(what="session_ms", finalize=flag, ms=session_cost(flag))

original = timing._cupti_session


def with_finalize(flag):
  import contextlib

  @contextlib.contextmanager
  def session(out):
    ext = timing._cupti_ext()
    ext._cupti_init()
    try:
      yield
    finally:
      out.extend(ext._cupti_get_timings(flag) or ())
  return session


for task, precision in [("relu", "float32"), ("layernorm", "float32"), ("matmul", "float32"),
                        ("relu", "bfloat16"), ("softmax", "float32"), ("swiglu", "bfloat16")]:
  spec = get_task(task).at_precision(precision)
  dims = spec.dims(SIZE)
  fn = jax.jit(load_kernel("gpu", task).kernel if GPU else spec.reference)  # CPU: a dry run
  seeds = tuple(secrets.randbelow(2**31) for _ in range(5))
  out = {}
  for attempt in ("cold", "warm"):
    prof = cProfile.Profile()
    prof.enable()
    runs, out[f"run_candidate_{attempt}"] = clock(lambda: checks.run_candidate(
        fn, spec, dims, seeds, on_gpu=True, edge=None))
    _, out[f"judge_outputs_{attempt}"] = clock(lambda: checks.judge_outputs(runs, spec, dims, None))
    prof.disable()
    if attempt == "cold":
      s = io.StringIO()
      pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
      emit(what="profile", task=task, precision=precision, text=s.getvalue()[-6000:])
    del runs
  sets, out["timing_sets"] = clock(lambda: core.timing_sets(spec, dims, L2, BUDGET))
  base_sets, _ = clock(lambda: core.timing_sets(spec, dims, L2, BUDGET))
  ref = jax.jit(spec.reference)
  _, out["baseline_compile"] = clock(lambda: jax.block_until_ready(ref(*base_sets[0])))
  keep = frozenset({3, 17, 41})
  medians = {}
  for flag in (True, False, True):
    timing._cupti_session = with_finalize(flag)
    res, wall = clock(lambda: timing.time_interleaved(
        [fn, ref], [sets, base_sets], iterations=50, rounds=5, warmup=5,
        method=METHOD, keep=[keep]))
    out[f"interleaved_finalize_{flag}"] = wall
    medians[str(flag)] = [r.samples.median_ms for r in res]
    kept = res[0].kept
  _, out["timed_output_checks"] = clock(lambda: [
      compare(o, checks.expected(spec, sets[i]), spec.tolerance) for _, (i, o) in kept.items()])
  for flag in (True, False):
    timing._cupti_session = with_finalize(flag)
    (eager,), out[f"eager_finalize_{flag}"] = clock(lambda: timing.time_interleaved(
        [spec.reference], [base_sets], iterations=50, rounds=5, warmup=5,
        method=METHOD))
    medians[f"eager_{flag}"] = eager.samples.median_ms
  timing._cupti_session = original
  emit(what="stages", task=task, precision=precision, seconds={k: round(v, 3) for k, v in out.items()},
       medians_ms=medians, sets=len(sets))
  del sets, base_sets
