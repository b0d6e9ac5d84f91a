"""Ceiling check at bf16 4096^3 on the H200: XLA's dot and JAX's own Pallas Mosaic GPU Hopper
matmul example (jax.experimental.pallas.ops.gpu.hopper_matmul_mgpu, when this jax ships it),
CUPTI device time, median of 20, four input sets rotated. Prints one JSON line per row."""
import json
import statistics

import jax
import jax.numpy as jnp
from jax.experimental.mosaic.gpu import profiler

N = 4096
FLOPS = 2 * N ** 3
keys = jax.random.split(jax.random.key(0), 8)
sets = [(jax.random.normal(keys[2 * i], (N, N), jnp.bfloat16),
         jax.random.normal(keys[2 * i + 1], (N, N), jnp.bfloat16)) for i in range(4)]


def median_ms(fn):
  fn = jax.jit(fn)
  jax.block_until_ready(fn(*sets[0]))
  times = []
  for i in range(20):
    _, t = profiler.measure(fn, iterations=1)(*sets[i % 4])
    times.append(t if isinstance(t, float) else sum(t))
  return statistics.median(times)


def row(name, fn):
  try:
    ms = median_ms(fn)
    print(json.dumps({"what": name, "ms": round(ms, 5), "tflops": round(FLOPS / ms / 1e9, 1)}))
  except Exception as e:  # a config that does not compile here
    print(json.dumps({"what": name, "error": f"{type(e).__name__}: {e}"[:300]}))


row("xla", lambda a, b: a @ b)
try:
  from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as ref
except ImportError as e:
  print(json.dumps({"what": "hopper_matmul_mgpu", "error": str(e)}))
else:
  for tm, tn, steps, minor, width in [(128, 128, 4, 0, 8), (128, 128, 4, 1, 8),
                                      (128, 256, 3, 1, 8), (128, 128, 5, 1, 4)]:
    cfg = ref.TuningConfig(tile_m=tm, tile_n=tn, tile_k=64, max_concurrent_steps=steps,
                           grid_minor_dim=ref.MatmulDimension(minor), grid_tile_width=width)
    row(f"jax_example tile {2 * tm}x{tn} steps {steps} minor {minor} width {width}",
        lambda a, b, cfg=cfg: ref.matmul_kernel(a, b, cfg))
