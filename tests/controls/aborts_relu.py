"""Negative control (relu): its process dies of a segmentation fault while being traced, as a
crashing native extension would. Expected: error (crash)."""
import faulthandler


def kernel(x, interpret=False):
  faulthandler._sigsegv()  # pylint: disable=protected-access
