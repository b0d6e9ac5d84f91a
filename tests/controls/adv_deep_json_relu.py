"""Adversarial control, class 1 (forging the verdict), relu -- an answer nested too deep to parse.

Attack: at import, write to the sandbox's result pipe an answer of 200000 nested JSON arrays
(400 KB, far below MAX_RESULT_BYTES) and `os._exit(0)`. The driver parses the exporter's
answer with `json.loads`, whose C scanner raises RecursionError at that depth; `protocol.decode`
turns only UnicodeDecodeError and JSONDecodeError into a ProtocolError, and `driver.export` only
ProtocolError and ValueError into a `malformed` outcome. RecursionError is neither: it leaves
`driver.export` as an exception. `evaluate()` (and the CLI: "error: maximum recursion depth
exceeded while decoding a JSON array", exit status 2, no record) raises instead of returning a
record, and on a Dask cluster the stage's exception becomes a `harness` error record, which
blames the harness, is never cached and is measured again by every resumed run.

Expected (correct behaviour): rejected, "the exporter gave no usable answer": a malformed answer
is the candidate's fault, whatever exception its parse raises.
"""
import os

os.write(int(os.environ["PALLASBENCH_SANDBOX_RESULT_FD"]), b"[" * 200000 + b"]" * 200000)
os._exit(0)  # pylint: disable=protected-access
