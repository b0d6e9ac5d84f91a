"""Adversarial control, class 11 (copied solutions), matmul.

Attack: the candidate writes no kernel at all; it imports the project's own GPU-fixed kernel
(`from kernels_gpu.matmul import kernel`), which passes with the shipped kernel's speed: for a
search loop or an RL trainer, the easiest reward there is.

Expected: anything but pass: the exporter's read allow-list holds neither kernel tree, so the
import fails (no module named kernels_gpu, or permission denied) and the candidate has no
kernel.
"""
from kernels_gpu.matmul import kernel  # noqa: F401  pylint: disable=unused-import
