"""Negative control (relu): never returns. Expected: timeout."""
import time


def kernel(x, interpret=False):
  while True:
    time.sleep(0.1)
