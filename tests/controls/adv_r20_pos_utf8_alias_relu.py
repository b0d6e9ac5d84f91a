# -*- coding: utf8 -*-
"""Honest control, class 6 (honest but unusual), relu: a UTF-8 file whose coding declaration
spells the codec `utf8` (red team round 20, a false positive).

Python reads this file (codecs know `utf8`, `UTF8`, `u8` and `cp65001` as UTF-8), and it is
UTF-8 text that reads back as itself. `kernels.read_source` (round 19's fix for utf-7) asks
`tokenize.detect_encoding`, which normalises only the spellings `utf-8` and `utf_8` (and
`utf-8-...`), and refuses every other name: "declares the utf8 encoding: a kernel is UTF-8
text". The emacs-style `-*- coding: utf8 -*-` line is common in older Python code.

Expected: pass (now: the evaluate CLI exits 2 without judging it; in a population folder the
whole population is refused).
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 64


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], ROWS),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
