"""Honest control, class 6 (honest but unusual), relu.

Imports warnings, itertools, functools and typing at the top, and `jax.nn` INSIDE the kernel
body, whose `relu` computes each block's relu. Structure, not imports, decides the verdict: the
work is in the kernel. (The project's references, which it once imported there, are not
readable from the exporter: the judge's answers are no candidate's to copy.)
(A module-level dataclass is in adv_pos_dataclass_relu.)

Expected: pass.
"""
import functools
import itertools
import typing
import warnings

import jax
from jax.experimental import pallas as pl

ROWS: typing.Final = 64


def _body(x_ref, o_ref):
  from jax import nn  # pylint: disable=import-outside-toplevel
  o_ref[...] = nn.relu(x_ref[...])


@functools.lru_cache(maxsize=None)
def _grid(n: int) -> tuple[int, ...]:
  return tuple(itertools.repeat(pl.cdiv(n, ROWS), 1))


def kernel(x, interpret=False):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_body, grid=_grid(x.shape[0]), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=interpret)(x)
