"""Red team round 7 (adv_asm_memo_relu), on the GPU: can a Pallas Triton kernel read its dropped
memo through inline PTX (`ld.param` of the memo's kernel parameter, then `ld.global`), which
kernel_state.read_buffers does not see (no pointer operand), and does the value survive calls?

The kernel stores the value its asm read into its output's first block and the value plus one
into the memo (a store only, as far as the pointers show). 0, 1, 2, ... in the output's first
element means the asm read the memo and the state survives between calls.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

ASMS = {f"param_{i}": ("{ .reg .u64 %p; ld.param.u64 %p, [_counting_param_" + str(i) + "]; "
                       "ld.global.f32 $0, [%p]; }") for i in (2,)}


def make(asm):
  def _counting(x_ref, o_ref, memo_ref):
    o_ref[...] = x_ref[...]

    @pl.when(pl.program_id(0) == 0)
    def _():
      (seen,) = pltriton.elementwise_inline_asm(
          asm, args=[jnp.zeros((8, 128), jnp.float32)], constraints="=f,f", pack=1,
          result_shape_dtypes=[jax.ShapeDtypeStruct((8, 128), jnp.float32)])
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
  return kernel


def main() -> None:
  x = jnp.zeros((64, 128), jnp.float32)
  print(f"device {jax.devices()[0].device_kind}")
  for name, asm in ASMS.items():
    try:
      compiled = jax.jit(make(asm)).lower(x).compile()
      seen = []
      for _ in range(10):
        out = jax.block_until_ready(compiled(x))
        seen.append(float(np.asarray(out)[0, 0]))
      print(f"{name}: memo seen by each call: {seen}")
    except Exception as e:  # pylint: disable=broad-except
      print(f"{name}: {type(e).__name__}: {str(e)[-1500:]}")


if __name__ == "__main__":
  main()
