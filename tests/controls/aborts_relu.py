"""Negative control (relu): kills its own process, as a segfaulting kernel would. Expected: error (crash)."""
import os
import signal


def kernel(x, interpret=False):
  os.kill(os.getpid(), signal.SIGSEGV)
