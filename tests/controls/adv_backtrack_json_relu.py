"""Adversarial control, class 1 (forging the verdict), relu -- an answer whose pre-scan is quadratic.

Attack: at import, write to the sandbox's result pipe 8 MiB of `"\\"\\"\\"...` (a quote, then
escaped quotes, never closed) and `os._exit(0)`. protocol._bound_structure blanks the answer's
strings with `re.sub('"[^"\\\\]*(?:\\\\.[^"\\\\]*)*"', ...)` before json reads it. Every `"`
here opens a string that runs, escape by escape, to the end of the answer and never closes, so
the match fails there; re.sub then tries again from the next `"`, two characters on. The scan is
quadratic: 32 KB take 3 s, this answer some 50000 s. It runs in the driver (or a cluster's
worker), the trusted side, after the sandbox has exited, under no time limit: the evaluation,
and every evaluation queued behind it on that worker, hangs. MAX_RESULT_BYTES (256 MiB) allows
an answer 32 times this one.

Expected (correct behaviour): rejected, "the exporter gave no usable answer", in time linear in
the answer (a scan that never restarts: one pass, as json's own reading of where strings are).
"""
import os

os.write(int(os.environ["PALLASBENCH_SANDBOX_RESULT_FD"]), b'"' + b'\\"' * (4 << 20))
os._exit(0)  # pylint: disable=protected-access
