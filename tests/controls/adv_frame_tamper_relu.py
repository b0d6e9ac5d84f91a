"""Adversarial control, class 1 (forging the verdict), relu.

Attack: a jnp-only relu (no Pallas at all) that, at trace time, walks `sys._getframe()` up to
the exporter's `_export_size` and `run` frames and tampers with their state: it fills the
`reports` dict with a forged jaxpr, forged `pallas_calls` and an empty `input_writes` (so the
exporter's own analysis is skipped), and rewrites the frozen `request` it finds.

Expected: rejected, "no Pallas kernel in the exported module". The forged reports reach the
record only as information (compile.pallas_calls shows "forged_relu"); the verdict comes from
the artifact bytes.
"""
import sys

import jax.numpy as jnp

FORGED_CALL = {"name": "forged_relu", "grid": [8], "block_shapes": ["(64, 512)", "(64, 512)"],
               "num_warps": 4, "num_stages": 1, "max_tensor_elements": 32768, "interpret": False}
_done = []


def _tamper() -> None:
  frame = sys._getframe()  # pylint: disable=protected-access
  while frame is not None:
    local = frame.f_locals
    if frame.f_code.co_name == "_export_size" and isinstance(local.get("reports"), dict):
      local["reports"].update(
          jaxpr="{ lambda ; a:f32[512,512]. let b = pallas_call[name=forged_relu] a in (b,) }",
          pallas_calls=[FORGED_CALL], input_writes=[], triton_ir=["tt.func @forged_relu"])
      _done.append("reports")
    if frame.f_code.co_name == "run" and "request" in local and "reports" in local:
      object.__setattr__(local["request"], "reports", True)
      _done.append("request")
    frame = frame.f_back
  print(f"adv: tampered with {sorted(set(_done))}", flush=True)


def kernel(x, interpret=False):
  if not _done:
    _tamper()
  return jnp.maximum(x, 0.0)
