"""The machine a measurement ran on: device, driver, CUDA, versions, commit."""

from __future__ import annotations

import pathlib
import platform as py_platform
import re
import subprocess
from typing import Final

import jax
import jaxlib

from pallasbench_dataset.schema import Environment

# L2 sizes by hardware slug (vendor datasheets); inputs are rotated past 4x this when timing.
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


def _nvidia_smi(field: str) -> str | None:
  try:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True, timeout=20).stdout
  except (OSError, subprocess.SubprocessError):
    return None
  first = out.strip().splitlines()
  return first[0].strip() if first else None


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
      git_commit=commit)


def unmeasured(platform: str, commit: str | None) -> Environment:
  """For a record the driver writes before any judge reported its machine (the judge never
  started): the versions are the driver's, the device is unknown."""
  return Environment(
      platform=platform, device_kind="unknown (no judge reported)", hardware="unknown",
      compute_capability=None, driver=None, cuda=None, jax=jax.__version__,
      jaxlib=jaxlib.__version__, python=py_platform.python_version(), git_commit=commit)


def l2_bytes(env: Environment) -> int:
  return L2_BYTES.get(env.hardware, DEFAULT_L2_BYTES)
