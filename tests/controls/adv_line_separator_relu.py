"""Attack control, class 17 (the population's text), relu. Red team round 16.

An honest relu whose source holds a U+2028 LINE SEPARATOR and a U+0085 NEXT LINE in a comment
(Python's tokenizer ends lines only at \\n and \\r, so both are inert here: the kernel is
right and passes, as it should). The harm is outside the judge: a population run writes its
candidates to candidates.jsonl with `json.dumps(..., ensure_ascii=False)`, which leaves both
characters raw, and `read_candidates` reads that file back with `str.splitlines()`, which
splits at both. The line of this candidate becomes fragments that are not JSON, so the run's
summary, `--resume` and the dataset build (builder.candidates.read_population) all raise
PopulationError, for every candidate of the run, not only this one.

Expected: pass (the kernel is right); the run's candidates.jsonl must still read back.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# separator here: [ ] and next line here: [] (both inert in Python source)


def _relu(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def kernel(x, interpret=False):
  spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_relu, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)
