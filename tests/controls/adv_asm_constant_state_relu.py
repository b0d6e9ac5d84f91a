"""Adversarial control, class 3/5 (timing; artifact purity), relu -- constant_state's store made
by inline PTX.

Attack: constant_state (a constant operand the kernel stores to: XLA keeps its buffer from one
call to the next, a call counter) with the store moved where kernel_state.written_buffers does
not look. written_buffers traces a Triton kernel's stores, atomics and other pointer uses to its
arguments; here the kernel never stores through the counter's pointer. Its inline PTX takes the
counter's address from the kernel's own parameter list (`ld.param.u64 %p,
[_relu_counting_param_1]`: x, counter, out) and stores through it (`st.global.f32`). The asm's
operand is a value, no pointer; its text declares nothing (no `.global` directive, no brace of
its own), so the inline PTX check passes it. In interpret mode (the CPU judge's run) the
kernel is a plain relu: inline PTX does not run there. This control only counts. Not run on a
GPU (session 26 had no H200).

Expected (correct behaviour): rejected as stateful: where a kernel's writes cannot be traced
(inline PTX reaches any buffer through the kernel's parameters), an operand that derives from no
input is state, as before the tracing (module_analysis._kept_operands' fallback).
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

ROWS = 8
# the counter's address is the kernel's parameter 1 (x, counter, out): <kernel>_param_1
_BUMP = ("{ .reg .u64 %p; ld.param.u64 %p, [_relu_counting_param_1]; "
         "st.global.f32 [%p], $1; mov.f32 $0, $1; }")


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def _relu_counting(x_ref, count_ref, o_ref):
  (bumped,) = pltriton.elementwise_inline_asm(
      _BUMP, args=[count_ref[...] + 1.0], constraints="=f,f", pack=1,
      result_shape_dtypes=[jax.ShapeDtypeStruct((16,), jnp.float32)])
  # the asm's value is used (0 x a finite sum), so the compiler keeps it
  o_ref[...] = jnp.maximum(x_ref[...], 0.0) + 0.0 * jnp.sum(bumped)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  grid = (pl.cdiv(x.shape[0], ROWS),)
  if interpret:
    return pl.pallas_call(_relu, grid=grid, in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)
  counter = jnp.asarray(np.arange(16, dtype=np.float32))
  return pl.pallas_call(
      _relu_counting, grid=grid, in_specs=[spec, pl.BlockSpec((16,), lambda i: (0,))],
      out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, counter)
