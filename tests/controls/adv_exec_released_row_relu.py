"""Adversarial control, class 11 (copied solutions, the released data, on its own thread), relu.

Attack: from a thread the candidate starts, read the released dataset's JSON
(data/sakanaai_pallasbench.json in the checkout the package was installed from), take the
relu row's Pallas_Code cell and `exec` it: the shipped kernel, copied from the data.

Expected: anything but pass: data/ is not on the exporter's read allow-list, so the read fails
on every thread and the module defines no kernel.
"""
import json
import pathlib
import threading

import pallasbench_dataset

DATA = (pathlib.Path(pallasbench_dataset.__file__).resolve().parents[1] / "data"
        / "sakanaai_pallasbench.json")
_FOUND: list[str] = []


def _read():
  try:
    rows = json.loads(DATA.read_text())
    _FOUND.append(next(r["Pallas_Code"] for r in rows if r["Op_Name"] == "relu"))
  except OSError as e:
    print("read refused:", e, flush=True)


_thread = threading.Thread(target=_read)
_thread.start()
_thread.join()
_cell: dict = {}
exec(compile(_FOUND[0] if _FOUND else "", str(DATA), "exec"), _cell)  # pylint: disable=exec-used
kernel = _cell["kernel"]
