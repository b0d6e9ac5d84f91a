"""Negative control: not valid Python. Expected: error (load_error)."""
def kernel(x, interpret=False)
  return x
