"""The original, TPU-oriented Pallas kernels (one self-contained module per task)."""
