"""The GPU-fixed Pallas kernels for the Triton backend (one self-contained module per task)."""
