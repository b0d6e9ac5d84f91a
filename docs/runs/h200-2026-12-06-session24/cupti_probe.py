"""Does the judge's timer see work XLA does without a kernel (#36, red team round 5)?

The judge times a call as the sum of the device kernels CUPTI records in it
(`timing._cupti_call`, the jax CUDA plugin's CUPTI bindings). XLA can also fill a buffer with a
memset or move one with a device-to-device copy, which are not kernels. If those are left out,
a one_hot kernel could leave its zeros to a memset and be timed for its ones only. For each
program below: what `_cupti_call` records (names, summed ms, or the error it raises), against
the wall-clock time of the same call, one JSON line each.

    PYTHONPATH=. python3 docs/runs/h200-2026-12-06-session24/cupti_probe.py > OUT/cupti-probe.jsonl
"""
import json
import time

import jax
import jax.numpy as jnp

from pallasbench_dataset.evaluation.judge import timing

N = 8192


def programs():
  x = jnp.ones((N, N), jnp.float32)
  small = jnp.ones((N,), jnp.float32)
  yield "zeros_like", jax.jit(jnp.zeros_like), (x,)
  yield "full_like_7", jax.jit(lambda a: jnp.full_like(a, 7.0)), (x,)
  yield "copy", jax.jit(jnp.copy), (x,)
  yield "zeros_then_update_row", jax.jit(
      lambda a, r: jax.lax.dynamic_update_slice(jnp.zeros_like(a), r[None, :], (3, 0))), (x, small)
  yield "zeros_int32_one_hot_shape", jax.jit(
      lambda ids: jnp.zeros((ids.shape[0], 32000), jnp.float32)), (jnp.zeros((4096,), jnp.int32),)
  yield "relu (a kernel)", jax.jit(lambda a: jnp.maximum(a, 0.0)), (x,)


def main() -> None:
  print(json.dumps({"method": timing.available_method().value, "device": str(jax.devices()[0])}),
        flush=True)
  for name, fn, args in programs():
    jax.block_until_ready(fn(*args))
    row = {"program": name}
    try:
      ms, names, out = timing._cupti_call(fn, args)  # pylint: disable=protected-access
      row.update(cupti_ms=ms, kernels=list(names))
      del out
    except RuntimeError as e:
      row["cupti_error"] = str(e)
    t0 = time.perf_counter()
    for _ in range(10):
      jax.block_until_ready(fn(*args))
    row["wall_ms_mean_of_10"] = (time.perf_counter() - t0) * 100
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
  main()
