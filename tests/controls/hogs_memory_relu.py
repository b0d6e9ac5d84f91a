"""Negative control (relu): grows host memory without bound. Expected: error (out_of_memory)."""
import numpy as np

_HOARD = []


def kernel(x, interpret=False):
  while True:
    _HOARD.append(np.ones(1 << 27, np.float32))  # 512 MiB a step
