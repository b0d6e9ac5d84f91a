"""The task as the LLM reads it: OpenEvolve's `prompt.system_message`, Shinka's `task_sys_msg`,
and the user's request of the fine-tuning configs (`task_prompt`, `repair_prompt`).

One text for every use, written from the registry (inputs, sizes, output, tolerance, the
corrections to the public suite) and the reference source, with the judge's rules in the
words of docs/design.md and the README, so that what the LLM is told is what the judge checks.
"""

from __future__ import annotations

from typing import Final

from pallasbench_dataset.kernels import Variant
from pallasbench_dataset.tasks import Size, TaskSpec
from pallasbench_dataset.tolerance import AtolScale

_STARTS = {
    Variant.GPU: ("The starting program is the project's GPU kernel for this task "
                  "(kernels_gpu/{name}.py): it passes the judge; make it faster."),
    Variant.TPU: ("The starting program is the original TPU-oriented kernel "
                  "(kernels_tpu/{name}.py): large blocks, no edge masking, whole K strips. On a "
                  "GPU it may not lower: Triton takes power-of-two tensors of at most 2^20 "
                  "elements, no batched dots and no automatic edge masking. Make it pass the "
                  "judge first, then make it fast."),
}


def describe(spec: TaskSpec, variant: Variant | str) -> str:
  """The system message for evolving `variant`'s kernel of `spec`."""
  return "\n\n".join([_intro(spec, Variant(variant)), _reference(spec), _signature(spec),
                      _judging(spec)]) + "\n"


def _intro(spec: TaskSpec, variant: Variant) -> str:
  return (f"You are an expert in JAX Pallas kernels for NVIDIA GPUs. Improve the kernel of "
          f"PallasBench-Robust task {spec.task_id}, `{spec.name}` (level {spec.level}, "
          f"{spec.category}). A sealed judge runs and times it: on an NVIDIA GPU Pallas lowers "
          "it through Triton, on a CPU it runs in Pallas interpret mode (CPU timings are not "
          "comparable and only check that the loop works). The score to maximize is the "
          "kernel's speedup over the jitted JAX reference (baseline time / kernel time); it "
          "counts only when the judge passes the kernel, and is 0 otherwise.\n"
          + _STARTS[variant].format(name=spec.name))


def _reference(spec: TaskSpec) -> str:
  return ("What the kernel computes: the reference below, which is also the baseline it is "
          "timed against (under jax.jit, default precision). Outputs are compared with the "
          "same function at the highest matmul precision.\n\n"
          f"```python\n{spec.reference_source.rstrip()}\n```")


def _signature(spec: TaskSpec) -> str:
  names = ", ".join(item.name for item in spec.inputs)
  inputs = "\n".join(f"- {item.name}: {item.dtype} ({', '.join(map(str, item.shape))}), "
                     f"{item.dist.describe()}" for item in spec.inputs)
  sizes = "\n".join(
      f"- {size.value}: {', '.join(f'{k}={v}' for k, v in spec.dims(size).items())} -> output "
      f"{spec.output_shape(size)}" for size in Size)
  tol = spec.tolerance
  atol = f"{tol.atol:g}" if tol.atol_scale is AtolScale.ABSOLUTE else f"{tol.atol:g} x RMS(reference)"
  check = f"allclose(rtol={tol.rtol:g}, atol={atol})"
  if tol.max_rel_l2 is not None:
    check += f" and relative Frobenius error <= {tol.max_rel_l2:g}"
  text = (f"Entry point: `kernel({names}, *, interpret: bool = False)`, the inputs in this "
          f"order:\n{inputs}\nThe output is {spec.output_dtype}. Registered sizes (the judge "
          "evaluates one of them, and also the edge size, whose dimensions are multiples of no "
          f"block size: the kernel must accept any shape of the family):\n{sizes}\n"
          f"Tolerance class `{tol.kind.value}`: {check} against the reference; NaN or Inf where "
          "the reference is finite always fails.")
  if spec.families:
    text += ("\nBesides the nominal inputs, the judge checks these input families, at the same "
             f"tolerance: {'; '.join(f.description for f in spec.families)}.")
  return text + (f"\nAbout this task: {spec.notes}" if spec.notes else "")


def _judging(spec: TaskSpec) -> str:
  return (_JUDGE + "\n"
          "Rules: change only the code between the EVOLVE-BLOCK markers; keep "
          f"`kernel(*inputs, interpret: bool = False)` for `{spec.name}` and pass "
          "`interpret=interpret` to every `pl.pallas_call`; keep the module self-contained "
          "(jax, numpy, functools, math and typing imports only).")


_JUDGE: Final = ("How the judge decides (status pass, incorrect, rejected, error or timeout): it "
          "imports the module only in a sandbox (no processes, sockets, native code or writes "
          "outside its folder), exports it with jax.export, runs it on fresh random inputs and "
          "compares with the reference, then times kernel and baseline interleaved. A kernel "
          "is rejected when it is not a real Pallas kernel for the task: no Pallas kernel in "
          "the exported module, the real work done in XLA ops around a trivial kernel, host "
          "callbacks, cached, degenerate or timing-dependent output, inputs written, an input "
          "that does not matter, or a timing above the hardware's limit. The feedback of each "
          "evaluation gives the verdict with the judge's reasons and errors.")


# What Pallas on an NVIDIA H200 (Triton backend, jax 0.11.2) accepts: research/pallas_gpu.md.
GPU_RULES: Final = (
    "GPU rules (Pallas lowers to Triton on an NVIDIA H200, jax 0.11.2): every block and every "
    "value inside the kernel has a power-of-two number of elements, at most 2^20 (1,048,576) "
    "per tensor, and tiles held in registers are best kept to 16K-64K elements (shared memory "
    "is at most 227 KB per block); `jnp.dot` takes 2-D operands only (no batched dots), every "
    "dot dimension at least 16, accumulating in float32 (`preferred_element_type=jnp.float32`); "
    "there is no scratch memory and no scalar prefetch, and all grid axes are parallel, so a "
    "reduction runs inside the kernel as a `jax.lax.fori_loop`; dimensions that are not "
    "multiples of a block need masked loads and stores (`pltriton.load/store(..., mask=..., "
    "other=...)` from `jax.experimental.pallas.triton`), which the judge's edge size checks; "
    "value slices (`x[:k]`), `jnp.take`, `sort`, `round`, `prod`, exact `erf` GELU and most "
    "`concatenate`s do not lower (read slices from refs, gather by ref indexing, use the tanh "
    "GELU); `num_warps` and `num_stages` are set with `pltriton.CompilerParams`.")
ANSWER: Final = ("Answer with the complete Python module in one fenced ```python code block "
                 "(the last such block of the answer is what the judge evaluates).")


def _request(spec: TaskSpec) -> str:
  return (f"Write a JAX Pallas kernel for NVIDIA GPUs for PallasBench-Robust task "
          f"{spec.task_id}, `{spec.name}` (level {spec.level}, {spec.category}). A sealed judge "
          "runs and times it on an NVIDIA H200 against the jitted JAX reference; it counts only "
          "when the judge passes it, and then the faster the better. The module must define "
          f"`kernel(*inputs, interpret: bool = False)`, pass `interpret=interpret` to every "
          "`pl.pallas_call`, and be self-contained (jax, numpy, functools, math and typing "
          "imports only).")


def _body(spec: TaskSpec) -> list[str]:
  return [_reference(spec), _signature(spec), GPU_RULES, _JUDGE, ANSWER]


def task_prompt(spec: TaskSpec) -> str:
  """The request for a kernel of `spec`, written from scratch."""
  return "\n\n".join([_request(spec), *_body(spec)]) + "\n"


def repair_prompt(spec: TaskSpec, original: str, fate: str) -> str:
  """The request for a kernel of `spec`, given a kernel written for TPUs (`original`) and
  what the judge said of it on a GPU (`fate`)."""
  given = ("Here is a kernel for this task written for TPUs, and the judge's verdict on it on "
           f"the GPU:\n\n```python\n{original.rstrip()}\n```\n\n{fate.rstrip()}\n\nWrite "
           "a version that passes the judge on the GPU and is fast.")
  return "\n\n".join([_request(spec), given, *_body(spec)]) + "\n"
