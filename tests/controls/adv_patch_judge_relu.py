"""Adversarial control, class 1 (forging the verdict), relu.

Attack: at import, monkeypatch everything a judge in this process would use to reach and
time its verdict -- `pallasbench_dataset.tolerance.compare` (and the name bound in checks),
`pallasbench_dataset.evaluation.judge.checks.judge_outputs`, `judge.speedup`, `jax.numpy.sum` and
`time.perf_counter` -- so that a WRONG kernel (relu(x) * 1.5, in Pallas) would look right.

Expected: incorrect ("not allclose"). The patches live only in the sandboxed exporter; the
judge is another process that never imports this file and only runs the exported artifact.
"""
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallasbench_dataset.tolerance as tolerance
from pallasbench_dataset.evaluation.judge import checks
from pallasbench_dataset.evaluation.judge import core as judge


def _always_passes(out, ref, tol):
  return tolerance.Comparison(passed=True, max_abs_error=0.0, max_rel_error=0.0, rel_l2_error=0.0)


def _perfect_verdict(runs, spec, dims, edge_dims):
  return checks.Verdict(comparisons=tuple(_always_passes(None, None, None) for _ in runs.seeds),
                        filters=(), rejections=(), general_shapes=True, edge_error=None)


tolerance.compare = _always_passes
checks.compare = _always_passes
checks.judge_outputs = _perfect_verdict
judge.compare = _always_passes
judge.speedup = lambda kernel_ms, baseline_ms: 1000.0
jnp.sum = lambda *args, **kwargs: 0.0
time.perf_counter = lambda: 0.0
print("adv: judge functions patched in the exporter")


def _body(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0) * 1.5


def kernel(x, interpret=False):
  spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(_body, grid=(pl.cdiv(x.shape[0], 64),), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)
