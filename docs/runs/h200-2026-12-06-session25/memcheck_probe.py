"""Why memcheck reports peek_past_end's read clean on the H200 (#36). Each case runs one child
process under compute-sanitizer memcheck (or bare), with the judge's environment for it
(platform allocator, no preallocation) or XLA's default, and prints one JSON line: exit status,
memcheck's first error lines, and the device pointers the child saw (the input x, the output, a
second array allocated right after x), so the gap between allocations shows whether --padding
put red zones between them.

    PYTHONPATH=. python3 docs/runs/h200-2026-12-06-session22/memcheck_probe.py
(PEEK_CONTROL names the control file where the checkout has no tests/, as on a release commit.)
"""
import json
import os
import subprocess
import sys

ROWS, COLS = 64, 1024


def child(variant: str) -> None:
  import functools
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import triton as pltriton

  offset = {"end": ROWS, "far": 1 << 22, "negative": -(1 << 22)}[variant]

  def peek(x_ref, o_ref):
    total = jnp.sum(pltriton.load(x_ref.at[pl.ds(0, 16), pl.ds(0, 16)]))
    start = offset + pl.program_id(0) * 16  # dynamic: a static start out of bounds is refused
    beyond = pltriton.load(x_ref.at[pl.ds(start, 16), pl.ds(0, 16)])
    o_ref[...] = jnp.full((16,), jnp.where(jnp.sum(beyond) == 12345.5, 0.0, total))

  @functools.partial(jax.jit)
  def kernel(x):
    return pl.pallas_call(peek, grid=(1,), out_shape=jax.ShapeDtypeStruct((16,), x.dtype))(x)

  x = jax.device_put(jnp.ones((ROWS, COLS), jnp.float32))
  y = jax.device_put(jnp.full((ROWS, COLS), 2.0, jnp.float32))
  out = jax.block_until_ready(kernel(x))
  pointers = {"x": x.unsafe_buffer_pointer(), "y": y.unsafe_buffer_pointer(),
              "out": out.unsafe_buffer_pointer()}
  print("POINTERS " + json.dumps({**pointers, "x_bytes": ROWS * COLS * 4,
                                  "y_minus_x": pointers["y"] - pointers["x"],
                                  "out0": float(out[0])}), flush=True)


def case(variant: str, allocator: str, sanitizer: str | None, padding: int | None) -> dict:
  env = {**os.environ, "JAX_PLATFORMS": "cuda", "CUDA_MODULE_LOADING": "LAZY"}
  if allocator == "platform":
    env |= {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
  command = [sys.executable, __file__, "--child", variant]
  if sanitizer:
    command = [sanitizer, "--tool", "memcheck", "--error-exitcode", "86", "--print-limit", "5",
               "--report-api-errors", "no", *(["--padding", str(padding)] if padding else []),
               *command]
  try:
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
  except subprocess.TimeoutExpired:
    return {"variant": variant, "allocator": allocator, "memcheck": bool(sanitizer),
            "padding": padding, "error": "timeout"}
  output = done.stdout + done.stderr
  lines = [l for l in output.splitlines() if l.startswith("=========")]
  pointers = next((json.loads(l.split(" ", 1)[1]) for l in output.splitlines()
                   if l.startswith("POINTERS ")), None)
  return {"variant": variant, "allocator": allocator, "memcheck": bool(sanitizer),
          "padding": padding, "rc": done.returncode, "pointers": pointers,
          "memcheck_lines": lines[:8], "tail": None if pointers else output[-600:]}


def judge_path() -> dict:
  """The attack control itself through the judge's own memcheck.check, as the judge calls it."""
  import importlib.util
  import jax
  from pallasbench_dataset.evaluation.judge import memcheck
  from pallasbench_dataset.lowering import export_for
  from pallasbench_dataset.tasks import get_task
  path = os.environ.get("PEEK_CONTROL", "tests/controls/adv_peek_past_end_reduce_sum.py")
  module_spec = importlib.util.spec_from_file_location("peek", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  spec = get_task("reduce_sum").at_precision("float32")
  out = {}
  for size in ("small", "medium"):
    structs = spec.input_structs(spec.dims(size))
    blob = export_for("cuda", module.kernel, *structs).serialize()
    found = memcheck.check(bytes(blob), task="reduce_sum", size=size, precision="float32",
                           seed=1, padding_bytes=spec.io_bytes(size))
    out[size] = {"shapes": [list(s.shape) for s in structs], "io_bytes": spec.io_bytes(size),
                 "outcome": str(found.outcome), "detail": found.detail[:400]}
  return out


def main() -> None:
  from pallasbench_dataset.evaluation.judge import memcheck
  tool = memcheck.sanitizer()
  print(json.dumps({"sanitizer": tool}), flush=True)
  if tool:
    print(json.dumps({"judge_path": judge_path()}), flush=True)
  cases = [("end", "platform", None, None), ("end", "default", None, None),
           ("end", "platform", tool, 16 << 20), ("end", "platform", tool, None),
           ("far", "platform", tool, 16 << 20), ("negative", "platform", tool, 16 << 20),
           ("end", "default", tool, 16 << 20)]
  for variant, allocator, sanitizer, padding in cases:
    if sanitizer is None and tool is None and padding:
      continue
    print(json.dumps(case(variant, allocator, sanitizer, padding)), flush=True)


if __name__ == "__main__":
  if sys.argv[1:2] == ["--child"]:
    child(sys.argv[2])
  else:
    main()
