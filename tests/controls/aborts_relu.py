"""Negative control (relu): its process dies of a segmentation fault while being traced, as a
crashing native extension would. Expected: error (runtime_error): the exporter ended itself,
a verdict on the text the cache keeps (red team round 18); only a SIGKILL is a `crash`."""
import faulthandler


def kernel(x, interpret=False):
  faulthandler._sigsegv()  # pylint: disable=protected-access
