"""Negative control (relu): raises when called. Expected: error (runtime_error)."""


def kernel(x, interpret=False):
  raise ValueError("this kernel always fails")
