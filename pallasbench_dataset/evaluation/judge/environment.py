"""The machine a measurement ran on: device, driver, CUDA, versions, commit, L2 size, clocks."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import pathlib
import platform as py_platform
import re
import subprocess
from typing import Final

import jax
import jaxlib

from pallasbench_dataset.schema import Environment, GpuState

# L2 sizes by hardware slug (vendor datasheets), where CUDA cannot be asked; the timing's
# inputs are rotated past a multiple of the L2 size.
L2_BYTES: Final = {"h200": 60 << 20, "h100": 50 << 20, "a100": 40 << 20, "l4": 48 << 20}
DEFAULT_L2_BYTES: Final = 64 << 20


def hardware_slug(device_kind: str, platform: str) -> str:
  """'NVIDIA H200' -> 'h200', 'NVIDIA A100-SXM4-80GB' -> 'a100'; 'cpu' for the CPU backend."""
  if platform != "gpu":
    return "cpu"
  match = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", device_kind.upper().replace("NVIDIA", ""))
  return match.group(1).lower() if match else re.sub(r"[^a-z0-9]+", "-", device_kind.lower())


def git_commit(repo: pathlib.Path | None = None) -> str | None:
  """The checkout's HEAD commit, with '+dirty' when tracked files differ; None outside git."""
  cwd = repo or pathlib.Path(__file__).resolve().parents[2]
  try:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                          check=True, timeout=10).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                           capture_output=True, text=True, check=True, timeout=10).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return None
  return head + ("+dirty" if dirty else "")


def _nvidia_smi(field: str, gpu: str | None = None) -> str | None:
  """One line of `nvidia-smi --query-gpu=FIELD` (for GPU `gpu`, else the first); None when
  nvidia-smi is absent or fails."""
  select = ["-i", gpu] if gpu else []
  try:
    out = subprocess.run(["nvidia-smi", *select, f"--query-gpu={field}",
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=20).stdout
  except (OSError, subprocess.SubprocessError):
    return None
  first = out.strip().splitlines()
  return first[0].strip() if first else None


_GPU_FIELDS: Final = (("uuid", "uuid", str), ("sm_clock_mhz", "clocks.sm", float),
                      ("max_sm_clock_mhz", "clocks.max.sm", float),
                      ("memory_clock_mhz", "clocks.mem", float), ("pstate", "pstate", str),
                      ("power_draw_w", "power.draw", float),
                      ("power_limit_w", "power.limit", float),
                      ("throttle_reasons", "clocks_event_reasons.active", str))


def _value(text: str | None, kind: type):
  if text is None or text.strip() in ("", "[N/A]", "N/A", "[Not Supported]"):
    return None
  try:
    return kind(text.strip())
  except ValueError:
    return None


def gpu_state(gpu: str | None = None) -> GpuState | None:
  """The GPU's identity, clocks, performance state and power as nvidia-smi reports them now
  (GPU `gpu`: an index or UUID, default CUDA_VISIBLE_DEVICES's first, else GPU 0); a field it
  does not answer is None, and None when nvidia-smi answers nothing."""
  gpu = gpu or (os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or None)
  together = _nvidia_smi(",".join(field for _, field, _ in _GPU_FIELDS), gpu)
  answers = together.split(", ") if together is not None else []
  if len(answers) != len(_GPU_FIELDS):  # a field this driver does not know fails the query
    answers = [_nvidia_smi(field, gpu) for _, field, _ in _GPU_FIELDS]
  values = {name: _value(text, kind) for (name, _, kind), text in zip(_GPU_FIELDS, answers)}
  return GpuState(**values) if any(v is not None for v in values.values()) else None


_L2_ATTRIBUTE: Final = 38  # CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE


def cuda_l2_bytes() -> int | None:
  """The L2 size of CUDA device 0 (the judge's only visible GPU) as the driver reports it;
  None without libcuda or on any failure."""
  try:
    cuda = ctypes.CDLL("libcuda.so.1")
    device, value = ctypes.c_int(), ctypes.c_int()
    if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), 0):
      return None
    if cuda.cuDeviceGetAttribute(ctypes.byref(value), _L2_ATTRIBUTE, device):
      return None
  except (OSError, AttributeError):
    return None
  return value.value if value.value > 0 else None


def gpu_name() -> str | None:
  """The first GPU's name as nvidia-smi reports it, read without starting CUDA here."""
  return _nvidia_smi("name")


def _cuda_version() -> str | None:
  try:
    out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=True,
                         timeout=20).stdout
  except (OSError, subprocess.SubprocessError):
    return None
  match = re.search(r"CUDA Version:\s*([\d.]+)", out)
  return match.group(1) if match else None


def capture(commit: str | None) -> Environment:
  """Reads the default JAX device; call in the measuring process after choosing the platform."""
  device = jax.devices()[0]
  platform = device.platform
  kind = device.device_kind if platform == "gpu" else py_platform.processor() or "cpu"
  capability = getattr(device, "compute_capability", None)
  return Environment(
      platform=platform, device_kind=kind, hardware=hardware_slug(kind, platform),
      compute_capability=str(capability) if capability else None,
      driver=_nvidia_smi("driver_version") if platform == "gpu" else None,
      cuda=_cuda_version() if platform == "gpu" else None,
      jax=jax.__version__, jaxlib=jaxlib.__version__, python=py_platform.python_version(),
      git_commit=commit, **_l2(platform, hardware_slug(kind, platform)))


def _l2(platform: str, hardware: str) -> dict:
  if platform != "gpu":
    return {}
  measured = cuda_l2_bytes()
  if measured is not None:
    return {"l2_bytes": measured, "l2_source": "cuda"}
  return {"l2_bytes": L2_BYTES.get(hardware, DEFAULT_L2_BYTES), "l2_source": "datasheet"}


def with_gpu_state(env: Environment) -> Environment:
  """`env` with the GPU's clocks and power state read now (a GPU judge calls it after
  measuring the ceilings, so the clocks are those of a loaded GPU)."""
  if env.platform != "gpu":
    return env
  return dataclasses.replace(env, gpu=gpu_state())


def unmeasured(platform: str, commit: str | None) -> Environment:
  """For a record the driver writes before any judge reported its machine (the judge never
  started): the versions are the driver's, the device is unknown."""
  return Environment(
      platform=platform, device_kind="unknown (no judge reported)", hardware="unknown",
      compute_capability=None, driver=None, cuda=None, jax=jax.__version__,
      jaxlib=jaxlib.__version__, python=py_platform.python_version(), git_commit=commit)


def l2_bytes(env: Environment) -> int:
  """The L2 size the judge rotates its timing inputs past: the one recorded, else the table's."""
  return env.l2_bytes or L2_BYTES.get(env.hardware, DEFAULT_L2_BYTES)
