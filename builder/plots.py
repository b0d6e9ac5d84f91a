"""The card's plots, rendered with matplotlib's Agg canvas to PNG bytes that carry what they show.

No pyplot (no global figure state) and no `Software` metadata (matplotlib's version). Each PNG
holds, in a text chunk, the content it draws (titles, labels, ticks, every line's and bar's
data, texts, legend): `content_of` reads it back. Pixels may differ by a few between machines
(fonts and SIMD rasterise differently); the content does not, so a release is checked by it.
"""

from __future__ import annotations

import functools
import io
import json
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Final

from pallasbench_dataset.precision import get_precision
from pallasbench_dataset.schema import CandidateRow, EvalRecord, Status, SummaryRow

_DPI = 100
CONTENT_KEY: Final = "pallasbench-content"  # the PNG text chunk holding what the plot shows


def _as_written(draw: Callable[..., bytes]) -> Callable[..., bytes]:
  """`draw` with every text it makes drawn as written, never as mathtext: a row's text (a
  candidate's kind, a task's name) with two dollar signs would otherwise be parsed, and a parse
  error would fail the whole build (red team round 21)."""
  @functools.wraps(draw)
  def drawn(*args, **kwargs) -> bytes:
    import matplotlib  # pylint: disable=import-outside-toplevel
    with matplotlib.rc_context({"text.parse_math": False}):
      return draw(*args, **kwargs)
  return drawn


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
  (label, style, colour, points), bars, texts (with their font size) and legend entries, and
  the figure's own texts; numbers to 6 digits."""
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
        "texts": [_text(t) for t in ax.texts],
        "legend": [t.get_text() for t in legend.get_texts()] if legend else []})
  return {"axes": axes, "texts": [_text(t) for t in fig.texts]}


def _text(t) -> list:
  """A text as drawn: its words, where it is anchored, and its font size in points."""
  return [t.get_text(), *map(_number, getattr(t, "xy", t.get_position())),
          _number(t.get_fontsize())]


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


@_as_written
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
                  precision: str | None = None, *, size: str | None = None,
                  runs: Sequence[str] = ()) -> str:
  """The speedup plot's title: the hardware, and the size and runs its rows come from;
  `precision` named where the plot is not the default config's (float32)."""
  hardware = ", ".join(sorted({r.Target_Hardware for r in rows})) or "no rows"
  at = f" at {precision}" if precision is not None else ""
  title = f"Pallas speedup over the jitted JAX reference{at} ({hardware})"
  where = [f"size {size}"] * (size is not None) + [f"run {', '.join(runs)}"] * bool(runs)
  if where:
    title += "\n" + ", ".join(where)
  return title if comparable else title + "\nCPU interpret-mode timings: not comparable"


def _passed(status: str) -> bool:
  return status == Status.PASS.value


@_as_written
def speedup_png(rows: Sequence[SummaryRow], *, comparable: bool, precision: str | None = None,
                size: str | None = None, runs: Sequence[str] = ()) -> bytes:
  """Speedup (baseline / kernel, log scale) per task: each fixed kernel a bar from 1.0 to its
  speedup (right: faster than the reference, left: slower), green where it passed, red where
  it failed (a red cross at 1.0 where it has no speedup); the originals as dots, and a cross
  at the left edge for each original that failed. The title names the hardware, `size` and
  `runs` (see `speedup_title`); `comparable` from the records' `timing_comparable`."""
  title = speedup_title(rows, comparable, precision, size=size, runs=runs)
  if not any(_positive(r.Pallas_Speedup) or _positive(r.Original_Speedup_Compiled)
             for r in rows):
    return _empty(title, "no timings to plot (not measured, or every kernel failed)")
  fig = _figure(8, max(3.0, 0.25 * len(rows) + 1.6))
  ax = fig.add_subplot()
  ys = list(range(len(rows)))
  timed = [(y, r) for y, r in zip(ys, rows) if _positive(r.Pallas_Speedup)]
  ax.barh([y for y, _ in timed], [r.Pallas_Speedup - 1.0 for _, r in timed], left=1.0,
          color=["tab:green" if _passed(r.Status) else "tab:red" for _, r in timed],
          label="fixed kernel, from 1.0 (green: pass, red: fails)")
  untimed = [y for y, r in zip(ys, rows) if not _positive(r.Pallas_Speedup)]
  if untimed:
    ax.plot([1.0] * len(untimed), untimed, "x", color="tab:red",
            label="fixed kernel fails, no speedup")
  orig = [(y, r.Original_Speedup_Compiled) for y, r in zip(ys, rows)
          if _positive(r.Original_Speedup_Compiled)]
  if orig:
    ax.plot([v for _, v in orig], [y for y, _ in orig], "k.", label="original kernel")
  values = [r.Pallas_Speedup for _, r in timed] + [v for _, v in orig] + [1.0]
  failed = [y for y, r in zip(ys, rows)
            if r.Original_Status not in (Status.PASS.value, "not_measured")
            and not _positive(r.Original_Speedup_Compiled)]
  if failed:
    edge = min(values) / 2
    ax.plot([edge] * len(failed), failed, "x", color="black",
            label="original kernel fails (no speedup)")
  ax.axvline(1.0, color="grey", linewidth=0.8)
  ax.set_xscale("log")
  ax.set_yticks(ys, [f"{r.Task_ID:02d} {r.Op_Name}" for r in rows], fontsize=7)
  ax.invert_yaxis()
  ax.set_xlabel("speedup (baseline / kernel; > 1: the kernel is faster)")
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=7, loc="lower right")
  fig.tight_layout()
  return _png(fig)


_STATUS_COLORS = {Status.PASS: "tab:green", Status.INCORRECT: "tab:orange",
                  Status.REJECTED: "tab:red", Status.ERROR: "tab:grey", Status.TIMEOUT: "tab:purple"}


@_as_written
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


def _off_axes(records: Sequence[EvalRecord]) -> list[str]:
  """The timed fixed kernels a log-log roofline cannot place (no FLOPs, or no bytes), as
  `task (size)`."""
  return [f"{r.task} ({r.size})" for r in records
          if r.variant == "gpu" and r.timing_comparable and r.roofline is not None
          and _positive(r.roofline.achieved_gbps or r.roofline.achieved_tflops)
          and not (r.roofline.bytes > 0 and _positive(r.roofline.achieved_tflops))]


_SIZE_MARKERS: Final = {"small": "^", "medium": "o", "large": "s"}
_ROOFLINE_INCHES: Final = (12.0, 9.0)
_LABEL_POINTS: Final = 7.0
_LADDER: Final = 41  # rungs of offsets a label may take above and below its point


def _label_offsets(labels: Sequence[tuple[str, float, float]]) -> list[tuple[float, float]]:
  """Offsets (in points) that keep the labels of a log-log plot from covering each other:
  each label, in order of height, takes the first of a ladder of offsets above and below its
  point whose box (estimated from its length and the font size, on the axes' approximate
  scale) meets no label placed before it; where none is free, the last rung is kept."""
  lx = [math.log10(x) for _, x, _ in labels]
  ly = [math.log10(y) for _, _, y in labels]
  span_x = max(max(lx) - min(lx) + 2 * math.log10(4), 1.0)  # the roof spans x/4 .. 4x
  span_y = max(max(ly) - min(ly), 1.0) * 1.1
  per_x = _ROOFLINE_INCHES[0] * 72 * 0.8 / span_x  # points per decade, the axes ~80% wide
  per_y = _ROOFLINE_INCHES[1] * 72 * 0.8 / span_y
  height, char = _LABEL_POINTS * 1.3, _LABEL_POINTS * 0.55
  steps = [(k + 1) // 2 * (-1) ** k for k in range(_LADDER)]  # 0, 1, -1, 2, -2, ...
  placed: list[tuple[float, float, float, float]] = []
  offsets: list[tuple[float, float]] = [(3.0, 2.0)] * len(labels)
  for i in sorted(range(len(labels)), key=lambda i: (ly[i], lx[i])):
    px, py = lx[i] * per_x, ly[i] * per_y
    width = char * len(labels[i][0])
    ladder = [(dx, 2.0 + step * height) for step in steps for dx in (3.0, -3.0 - width)]
    for dx, dy in ladder:
      box = (px + dx, py + dy, px + dx + width, py + dy + height)
      if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                 for b in placed):
        break
    placed.append(box)
    offsets[i] = (dx, dy)
  return offsets


@_as_written
def roofline_png(records: Sequence[EvalRecord], precision: str | None = None) -> bytes:
  """Achieved TFLOP/s against arithmetic intensity for the fixed kernels (marker by size,
  colour by verdict), under the ceilings of the runs their records come from, as the card's
  ceilings table gives them (see `_roofs`); the kernels with no FLOPs, which log axes cannot
  place, are named under the axes. `precision` in the title of a plot that is not the default
  config's."""
  points = list(_roofline_points(records))
  hardware = ", ".join(sorted({r.environment.device_kind for r, _, _ in points})) or "no GPU rows"
  at = f" at {precision}" if precision is not None else ""
  title = f"Roofline of the fixed kernels{at} ({hardware})"
  if not points:
    return _empty(title, "no comparable GPU timings (a CPU run, or nothing measured)")
  fig = _figure(*_ROOFLINE_INCHES)
  ax = fig.add_subplot()
  xs = [x for _, x, _ in points]
  groups: dict[tuple[bool, str], list[tuple[float, float]]] = {}
  labels = [(f"{r.task} ({r.size})", x, y) for r, x, y in points]
  for (r, x, y), (text, _, _), offset in zip(points, labels, _label_offsets(labels)):
    groups.setdefault((r.status == Status.PASS, r.size), []).append((x, y))
    ax.annotate(text, (x, y), fontsize=_LABEL_POINTS, xytext=offset, textcoords="offset points",
                arrowprops={"arrowstyle": "-", "color": "lightgrey", "linewidth": 0.5})
  for (passed, size), xy in sorted(groups.items(), key=lambda item: (not item[0][0], item[0][1])):
    ax.plot([x for x, _ in xy], [y for _, y in xy], _SIZE_MARKERS.get(size, "o"),
            color="tab:green" if passed else "tab:red", markersize=5,
            label=f"{'passed' if passed else 'failed'}, size {size}")
  for label, (bandwidth, peak) in _roofs([r for r, _, _ in points]).items():
    _roof(ax, min(xs), max(xs), bandwidth, peak, label)
  off = _off_axes(records)
  if off:
    fig.text(0.01, 0.005, "not on the log axes (0 FLOP or 0 bytes): " + ", ".join(off),
             fontsize=8, va="bottom")
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("arithmetic intensity (FLOP / byte)", fontsize=9)
  ax.set_ylabel("achieved TFLOP/s", fontsize=9)
  ax.set_title(title, fontsize=10)
  ax.legend(fontsize=8, loc="lower right")
  fig.tight_layout(rect=(0, 0.03 if off else 0, 1, 1))
  return _png(fig)


def _rates(bandwidth: float | None, peak: float | None) -> str:
  return (f"{bandwidth:.1f} GB/s (larger of copy and read)" if _positive(bandwidth)
          else "no bandwidth") + ", " + (f"{peak:.1f} TFLOP/s (matmul)" if _positive(peak)
                                         else "no matmul ceiling")


def _roofs(records: Sequence[EvalRecord]) -> dict[str, tuple[float | None, float | None]]:
  """The ceilings the card's table lists for the runs and GPUs of `records`, one roof per
  distinct (run, GPU): bandwidth the larger of copy and read, compute the matmul rate of the
  records' precision. Records that do not name their run's ceilings (from before `run` was
  noted) give the ceilings their roofline holds, one roof per distinct pair."""
  roofs: dict[str, tuple[float | None, float | None]] = {}
  for r in records:
    info = r.run
    if info is not None and (info.ceiling_copy_gbps or info.ceiling_read_gbps):
      peak = getattr(info, f"ceiling_{get_precision(r.precision).ceiling}")
      bandwidth = max(v for v in (info.ceiling_copy_gbps, info.ceiling_read_gbps) if v)
      label = f"ceilings of run {info.run_id}, GPU {info.gpu_index} (the card's table): "
    else:
      bandwidth, peak = r.roofline.ceiling_gbps, r.roofline.ceiling_tflops
      label = "ceilings the records hold (their run not noted): "
    if _positive(bandwidth) or _positive(peak):
      roofs[label + _rates(bandwidth, peak)] = (bandwidth, peak)
  return dict(sorted(roofs.items()))


def _roof(ax, x_min: float, x_max: float, bandwidth: float | None, peak: float | None,
          label: str) -> None:
  lo, hi = x_min / 4, x_max * 4
  xs = [lo * (hi / lo) ** (i / 63) for i in range(64)]
  bw = bandwidth if _positive(bandwidth) else math.inf
  top = peak if _positive(peak) else math.inf
  ys = [min(top, bw * x / 1000.0) for x in xs]  # GB/s * FLOP/B = GFLOP/s
  ax.plot(xs, ys, "--", linewidth=1, label=label)
