"""Adversarial control, class 1 (forging the verdict), relu -- an answer whose pre-scan eats memory.

Attack: at import, write to the sandbox's result pipe a well-formed answer whose `load_error` is
one string of 120 million `\\n` escapes (240 MiB, under MAX_RESULT_BYTES) and `os._exit(0)`.
protocol._bound_structure blanks strings with the regex `"[^"\\\\]*(?:\\\\.[^"\\\\]*)*"`: Python's
re engine keeps a backtracking record for every repetition of the `(?:\\\\.[^"\\\\]*)*` group,
some 70 bytes per two-character escape (measured with tracemalloc: 72 times the answer), so
the scan alone asks the trusted parent (the driver, or a cluster's worker, under no sandbox
memory limit) for about 17 GiB. The bound of round 6 (the parse within 8 times the answer's
size) is broken by the very scan added to keep it.

Expected (correct behaviour): rejected or parsed within a small multiple of the answer's size
(a scan that keeps no per-character state).

DO NOT run this control end to end on a shared machine: its decode alone needs ~17 GiB.
tests/judge/test_attacks.py checks the same scan on a 4 MiB answer.
"""
import os

os.write(int(os.environ["PALLASBENCH_SANDBOX_RESULT_FD"]),
         b'{"load_error": "' + b"\\n" * 120_000_000 + b'", "exports": [], "pallas_calls": []}')
os._exit(0)  # pylint: disable=protected-access
