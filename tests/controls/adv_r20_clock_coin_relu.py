"""Adversarial control, class 15 (the verdict cache), relu: a coin in device code (red team
round 20; GPU only).

Attack: judging a limit's failure again "on the same draw" (session 33) holds a lottery only
if the candidate's program is a function of its text and its inputs. Device code can read the
GPU's clocks: inline PTX `mov.u32 $0, %clock;` declares nothing, so kernel_state's check
passes it (`ptx_state` is None), and the module analysis sees a plain Triton kernel. Here each
program reads %clock and spins (about 2^31 trips: a limit ends it) when its draw is unlucky
(x[0, 0] > 0, a stand-in for a fast path that would be wrong there) and the clock's bit 10 is
set: on the same artifact and the same inputs, one judgement spins and the next may not. Even
a second judgement that replays the first export's bytes and every seed is a fresh coin.

Expected (what should hold): the cuda export is read without a finding (measured on a CPU:
`analyze_module` reports no stateful op, and module_reasons nothing), so a fix of the lottery
cannot rest on the program being deterministic. The cpu export has no interpret rule for the
inline PTX: on a CPU the judge cannot run it (an export error there).
"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

BLOCK = 1024
SPIN = 2**31 - 1


def _body(x_ref, o_ref, *, n: int):
  idx = pl.program_id(0) * BLOCK + jnp.arange(BLOCK)
  mask = idx < n
  x = pltriton.load(x_ref.at[pl.ds(pl.program_id(0) * BLOCK, BLOCK)], mask=mask, other=0.0)
  first = pltriton.load(x_ref.at[pl.ds(0, BLOCK)], mask=jnp.arange(BLOCK) < 1, other=0.0)
  (clock,) = pltriton.elementwise_inline_asm(
      "mov.u32 $0, %clock;", args=[idx], constraints="=r,r", pack=1,
      result_shape_dtypes=[jax.ShapeDtypeStruct((BLOCK,), jnp.int32)])
  heads = (jnp.max(clock) // 1024) % 2                  # int32 0 or 1
  unlucky = (jnp.max(first) > 0.0).astype(jnp.int32)
  trips = jnp.int32(SPIN) * unlucky * heads
  _, acc = lax.while_loop(lambda c: c[0] < trips, lambda c: (c[0] + 1, c[1] * 0.5 + 1.0),
                          (jnp.int32(0), jnp.float32(0.0)))
  pltriton.store(o_ref.at[pl.ds(pl.program_id(0) * BLOCK, BLOCK)],
                 jnp.maximum(x, 0.0) + 0.0 * acc, mask=mask)


def kernel(x, interpret=False):
  flat = x.reshape(-1)
  n = flat.size
  import functools  # pylint: disable=import-outside-toplevel
  out = pl.pallas_call(functools.partial(_body, n=n), grid=(pl.cdiv(n, BLOCK),),
                       out_shape=jax.ShapeDtypeStruct(flat.shape, flat.dtype),
                       compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=1),
                       interpret=interpret)(flat)
  return out.reshape(x.shape)
