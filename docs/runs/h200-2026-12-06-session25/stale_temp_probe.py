"""Red team round 6's stale_temp, on the GPU (#36): does a kernel result the program drops keep
its value from one call of an executable to the next?

XLA gives such a result a buffer in the executable's temporary allocation, which it does not
initialise. A Triton kernel here reads that buffer (the memo), returns what it read in its
output's first block and stores it back plus one. Called 25 times in a row with the judge's own
`timing.retire` between calls (what the timing does), the first element of each output is the
memo each call found: 0, 1, 2, ... means the state survives between calls (the class is real
on this GPU); NaN or garbage means it does not. The second run puts an allocation of the
temporary's size, filled with NaN and freed, before each call (a poison step): whether it lands
where the next call's temporary does. The judge refuses this kernel before it runs anything
(module_analysis: a dropped result the kernel reads); this probe compiles it directly.
  run: PYTHONPATH=. python3 stale_temp_probe.py
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from pallasbench_dataset.evaluation.judge import timing


def _counting(x_ref, o_ref, memo_ref):
  o_ref[...] = x_ref[...]

  @pl.when(pl.program_id(0) == 0)
  def _():
    seen = memo_ref[...]
    o_ref[...] = seen
    memo_ref[...] = seen + 1.0


def kernel(x):
  block = pl.BlockSpec((8, 128), lambda i: (i, 0))
  out, _ = pl.pallas_call(
      _counting, grid=(x.shape[0] // 8,), in_specs=[block],
      out_specs=[block, pl.BlockSpec((8, 128), lambda i: (0, 0))],
      out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                 jax.ShapeDtypeStruct((8, 128), jnp.float32)])(x)
  return out


def main() -> None:
  x = jnp.zeros((64, 128), jnp.float32)
  compiled = jax.jit(kernel).lower(x).compile()
  temp = compiled.memory_analysis().temp_size_in_bytes
  print(f"device {jax.devices()[0].device_kind}, temporary allocation {temp} bytes")
  for poison in (False, True):
    seen = []
    for _ in range(25):
      if poison:
        filler = [jnp.full((max(temp, 4) // 4,), jnp.nan, jnp.float32) for _ in range(2)]
        jax.block_until_ready(filler)
        for f in filler:
          f.delete()
      out = jax.block_until_ready(compiled(x))
      seen.append(float(np.asarray(out)[0, 0]))
      timing.retire(out, keep=False, args=(x,))
    print(f"poison step {poison}: memo seen by each call: {seen}")


if __name__ == "__main__":
  main()
