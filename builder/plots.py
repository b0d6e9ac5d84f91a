"""The card's plots, rendered with matplotlib's Agg canvas to PNG bytes that carry what they show.

No pyplot (no global figure state) and no `Software` metadata (matplotlib's version). Each PNG
holds, in a text chunk, the content it draws (titles, labels, ticks, every line's and bar's
data, texts, legend): `content_of` reads it back. Pixels may differ by a few between machines
(fonts and SIMD rasterise differently); the content does not, so a release is checked by it.
"""

from __future__ import annotations

import io
import json
import math
import struct
import zlib
from collections.abc import Sequence
from typing import Any, Final

from pallasbench_dataset.schema import CandidateRow, EvalRecord, Status, SummaryRow

_DPI = 100
CONTENT_KEY: Final = "pallasbench-content"  # the PNG text chunk holding what the plot shows


def _figure(width: float, height: float):
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  fig = Figure(figsize=(width, height), dpi=_DPI)
  FigureCanvasAgg(fig)
  return fig


def _png(fig) -> bytes:
  fig.canvas.draw()  # ticks and legends exist once drawn
  shown = json.dumps(content(fig), sort_keys=True, separators=(",", ":"))
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None, CONTENT_KEY: shown})
  return buf.getvalue()


def _number(v: float) -> float | str:
  v = float(v)
  return float(f"{v:.6g}") if math.isfinite(v) else str(v)


def content(fig) -> dict[str, Any]:
  """What a drawn figure shows, as data: per axes its title, labels, scales, tick labels, lines
  (label, style, colour, points), bars, texts and legend entries; numbers to 6 digits."""
  from matplotlib.colors import to_hex  # pylint: disable=import-outside-toplevel
  axes = []
  for ax in fig.axes:
    legend = ax.get_legend()
    axes.append({
        "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
        "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
        "xticks": [t.get_text() for t in ax.get_xticklabels()],
        "yticks": [t.get_text() for t in ax.get_yticklabels()],
        "lines": [{"label": ln.get_label(), "style": f"{ln.get_linestyle()}{ln.get_marker()}",
                   "color": to_hex(ln.get_color()), "x": [_number(v) for v in ln.get_xdata()],
                   "y": [_number(v) for v in ln.get_ydata()]} for ln in ax.get_lines()],
        "bars": [[_number(b.get_x()), _number(b.get_y()), _number(b.get_width()),
                  _number(b.get_height()), to_hex(b.get_facecolor())] for b in ax.patches],
        "texts": [[t.get_text(), *map(_number, getattr(t, "xy", t.get_position()))]
                  for t in ax.texts],
        "legend": [t.get_text() for t in legend.get_texts()] if legend else []})
  return {"axes": axes}


def content_of(png: bytes) -> dict[str, Any] | None:
  """The content a plot of this module carries (see `content`); None for a PNG without it."""
  pos = 8  # after the PNG signature
  while pos + 8 <= len(png):
    length, kind = struct.unpack(">I4s", png[pos:pos + 8])
    data = png[pos + 8:pos + 8 + length]
    if kind in (b"tEXt", b"zTXt", b"iTXt"):
      key, _, value = data.partition(b"\0")
      if key == CONTENT_KEY.encode():
        if kind == b"zTXt":
          value = zlib.decompress(value[1:])
        elif kind == b"iTXt":  # compression flag, method, language and keyword, then the text
          flag, rest = value[0], value[2:].split(b"\0", 2)[2]
          value = zlib.decompress(rest) if flag else rest
        return json.loads(value.decode("latin-1"))
    pos += 12 + length
  return None


def _empty(title: str, message: str) -> bytes:
  fig = _figure(6, 2.5)
  ax = fig.add_subplot()
  ax.set_axis_off()
  ax.set_title(title)
  ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
  return _png(fig)


def _positive(value: float | None) -> bool:
  return value is not None and math.isfinite(value) and value > 0


def comparable(records: Sequence[EvalRecord], size: str) -> bool:
  """Whether every timed record at `size` (the plot's) says its timing is comparable
  (`timing_comparable`: timed on a GPU), whatever Pallas backend its kernel uses."""
  return all(r.timing_comparable for r in records if r.size == size and r.runtime_ms is not None)


def speedup_title(rows: Sequence[SummaryRow], comparable: bool,
                  precision: str | None = None) -> str:
  """The speedup plot's title; `precision` named where the plot is not the default config's
  (float32's title names no precision)."""
  hardware = ", ".join(sorted({r.Target_Hardware for r in rows})) or "no rows"
  at = f" at {precision}" if precision is not None else ""
  title = f"Pallas speedup over the jitted JAX reference{at} ({hardware})"
  return title if comparable else title + "\nCPU interpret-mode timings: not comparable"


def speedup_png(rows: Sequence[SummaryRow], *, comparable: bool,
                precision: str | None = None) -> bytes:
  """Speedup (baseline / kernel, log scale) per task: fixed kernels as bars, originals as dots;
  `comparable` from the records' `timing_comparable` (see `comparable`); `precision` in the
  title of a plot that is not the default config's (the `bf16` config's)."""
  title = speedup_title(rows, comparable, precision)
  if not any(_positive(r.Pallas_Speedup) or _positive(r.Original_Speedup_Compiled)
             for r in rows):
    return _empty(title, "no timings to plot (not measured, or every kernel failed)")
  fig = _figure(8, max(3.0, 0.25 * len(rows) + 1.2))
  ax = fig.add_subplot()
  ys = range(len(rows))
  values = [r.Pallas_Speedup if _positive(r.Pallas_Speedup) else 0.0 for r in rows]
  colors = ["tab:green" if r.Status == "pass" else "tab:red" for r in rows]
  ax.barh(list(ys), values, color=colors, label="fixed kernel (green: pass, red: fails)")
  orig = [(y, r.Original_Speedup_Compiled) for y, r in zip(ys, rows)
          if _positive(r.Original_Speedup_Compiled)]
  if orig:
    ax.plot([v for _, v in orig], [y for y, _ in orig], "k.", label="original kernel")
  ax.axvline(1.0, color="grey", linewidth=0.8)
  ax.set_xscale("log")
  ax.set_yticks(list(ys), [f"{r.Task_ID:02d} {r.Op_Name}" for r in rows], fontsize=7)
  ax.invert_yaxis()
  ax.set_xlabel("speedup (baseline / kernel; > 1: the kernel is faster)")
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=7, loc="lower right")
  fig.tight_layout()
  return _png(fig)


_STATUS_COLORS = {Status.PASS: "tab:green", Status.INCORRECT: "tab:orange",
                  Status.REJECTED: "tab:red", Status.ERROR: "tab:grey", Status.TIMEOUT: "tab:purple"}


def candidates_png(rows: Sequence[CandidateRow]) -> bytes:
  """Verdicts of the candidates by kind: one bar per kind, split by status."""
  title = "Verdicts on the population's candidates, by kind"
  if not rows:
    return _empty(title, "no candidate was judged")
  kinds = sorted({r.kind or "unknown" for r in rows})
  fig = _figure(8, 0.5 * len(kinds) + 1.6)
  ax = fig.add_subplot()
  left = [0] * len(kinds)
  for status, color in _STATUS_COLORS.items():
    counts = [sum(1 for r in rows if (r.kind or "unknown") == k and r.status == status.value)
              for k in kinds]
    if any(counts):
      ax.barh(kinds, counts, left=left, color=color, label=status.value)
      left = [a + b for a, b in zip(left, counts)]
  ax.invert_yaxis()
  ax.set_xlabel("candidates")
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
  fig.tight_layout()
  return _png(fig)


def _roofline_points(records: Sequence[EvalRecord]):
  for r in records:
    roof = r.roofline
    if (r.variant == "gpu" and r.timing_comparable and roof is not None and roof.bytes > 0
        and _positive(roof.achieved_tflops)):
      yield r, roof.flops / roof.bytes, roof.achieved_tflops


def roofline_png(records: Sequence[EvalRecord], precision: str | None = None) -> bytes:
  """Achieved TFLOP/s against arithmetic intensity for the fixed kernels, under the ceilings
  (each record's own: a bfloat16 record's compute ceiling is the bfloat16 matmul rate);
  `precision` in the title of a plot that is not the default config's."""
  points = list(_roofline_points(records))
  hardware = ", ".join(sorted({r.environment.device_kind for r, _, _ in points})) or "no GPU rows"
  at = f" at {precision}" if precision is not None else ""
  title = f"Roofline of the fixed kernels{at} ({hardware})"
  if not points:
    return _empty(title, "no comparable GPU timings (a CPU run, or nothing measured)")
  fig = _figure(8, 5.5)
  ax = fig.add_subplot()
  xs = [x for _, x, _ in points]
  for r, x, y in points:
    ax.plot([x], [y], "o", color="tab:green" if r.status == "pass" else "tab:red", markersize=4)
    ax.annotate(f"{r.task} ({r.size})", (x, y), fontsize=5, xytext=(3, 2),
                textcoords="offset points")
  _ceilings(ax, [r for r, _, _ in points], min(xs), max(xs))
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("arithmetic intensity (FLOP / byte)")
  ax.set_ylabel("achieved TFLOP/s")
  ax.set_title(title, fontsize=9)
  fig.tight_layout()
  return _png(fig)


def _ceilings(ax, records: Sequence[EvalRecord], x_min: float, x_max: float) -> None:
  gbps = [r.roofline.ceiling_gbps for r in records if _positive(r.roofline.ceiling_gbps)]
  tflops = [r.roofline.ceiling_tflops for r in records if _positive(r.roofline.ceiling_tflops)]
  if not gbps and not tflops:
    return
  lo, hi = x_min / 4, x_max * 4
  xs = [lo * (hi / lo) ** (i / 63) for i in range(64)]
  bandwidth = max(gbps) if gbps else math.inf
  peak = max(tflops) if tflops else math.inf
  ys = [min(peak, bandwidth * x / 1000.0) for x in xs]  # GB/s * FLOP/B = GFLOP/s
  label = ("highest ceilings measured (per run and GPU: see the card): "
           f"{f'{bandwidth:.1f} GB/s (larger of copy and read)' if gbps else 'no bandwidth'}, "
           f"{f'{peak:.1f} TFLOP/s' if tflops else 'no matmul ceiling'}")
  ax.plot(xs, ys, "--", color="grey", linewidth=1, label=label)
  ax.legend(fontsize=7, loc="lower right")
