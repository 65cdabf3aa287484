"""Charts as inline SVG drawn in Python: no JavaScript library, nothing fetched, nothing to execute.

Every text in a chart (a run's name in a point's tooltip, a project as a bar's label) goes through
`html.escape`, the same as the templates' autoescaping, so a name like `<script>` is drawn as text. Colours and
fonts come from classes in static/style.css (the Content-Security-Policy allows no inline style).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 640, 280
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 24, 40


@dataclass(frozen=True)
class Point:
    """A point of a scatter or line: where it is, what its tooltip says, and its CSS class."""

    x: float
    y: float
    label: str = ""
    kind: str = "point"


@dataclass(frozen=True)
class Axis:
    """The mapping of data values to pixels along one axis (linear, or log10 for values spanning decades)."""

    low: float
    high: float
    start: float
    end: float
    log: bool = False

    def at(self, value: float) -> float:
        lo, hi, v = (math.log10(self.low), math.log10(self.high), math.log10(value)) if self.log else (
            self.low, self.high, value)
        share = 0.5 if hi == lo else (v - lo) / (hi - lo)
        return self.start + share * (self.end - self.start)

    def ticks(self) -> list[float]:
        if self.log:
            first, last = math.floor(math.log10(self.low)), math.ceil(math.log10(self.high))
            return [10.0 ** e for e in range(first, last + 1) if self.low <= 10.0 ** e <= self.high] or [self.low]
        step = _nice_step((self.high - self.low) / 4) if self.high > self.low else 1.0
        start = math.ceil(self.low / step) * step
        return [start + i * step for i in range(int((self.high - start) / step + 1e-9) + 1)]


def _nice_step(raw: float) -> float:
    exponent = math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if mult * 10 ** exponent >= raw:
            return float(mult * 10 ** exponent)
    return float(10 ** (exponent + 1))


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.3g}"
    return f"{value:.2g}"


def _axis(values: Sequence[float], start: float, end: float, log: bool, zero: bool) -> Axis:
    if log:
        positive = [v for v in values if v > 0] or [1.0]
        return Axis(min(positive) / 1.5, max(positive) * 1.5, start, end, log=True)
    low, high = min(values), max(values)
    if zero:
        low = min(low, 0.0)
    if high == low:
        high = low + (abs(low) or 1.0)
    pad = (high - low) * 0.05
    return Axis(low if zero and low == 0 else low - pad, high + pad, start, end)


def _frame(x: Axis, y: Axis, x_label: str, y_label: str, title: str) -> list[str]:
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    for tick in y.ticks():
        py = y.at(tick)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" y2="{py:.1f}"/>'
                     f'<text class="tick" x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{_fmt(tick)}</text>')
    for tick in x.ticks():
        px = x.at(tick)
        parts.append(f'<text class="tick" x="{px:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
                     f'{_fmt(tick)}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" '
                 f'y2="{HEIGHT - BOTTOM}"/><line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" '
                 f'y2="{HEIGHT - BOTTOM}"/>')
    parts.append(f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 6}" text-anchor="middle">'
                 f'{escape(x_label)}</text><text class="label" x="12" y="{TOP - 8}">{escape(y_label)}</text>')
    return parts


def scatter(points: Sequence[Point], *, x_label: str, y_label: str, title: str, log: bool = False,
            diagonal: bool = False, line_kind: str | None = None) -> Markup:
    """Points with tooltips; `diagonal` draws y = x (estimate = actual); `line_kind` joins the points of that
    kind in x order (the Pareto front)."""
    if not points:
        return Markup('<p class="empty">nothing to draw yet</p>')
    xs, ys = [p.x for p in points], [p.y for p in points]
    both = xs + ys
    x = _axis(both if diagonal else xs, LEFT, WIDTH - RIGHT, log, zero=not log)
    y = _axis(both if diagonal else ys, HEIGHT - BOTTOM, TOP, log, zero=not log)
    parts = _frame(x, y, x_label, y_label, title)
    if diagonal:
        lo, hi = max(x.low, y.low), min(x.high, y.high)
        parts.append(f'<line class="diagonal" x1="{x.at(lo):.1f}" y1="{y.at(lo):.1f}" x2="{x.at(hi):.1f}" '
                     f'y2="{y.at(hi):.1f}"/>')
    if line_kind is not None:
        chain = sorted((p for p in points if p.kind == line_kind), key=lambda p: p.x)
        if len(chain) > 1:
            path = " ".join(f"{x.at(p.x):.1f},{y.at(p.y):.1f}" for p in chain)
            parts.append(f'<polyline class="front" points="{path}"/>')
    for p in sorted(points, key=lambda p: p.kind == line_kind):  # the highlighted kind on top
        if (log and (p.x <= 0 or p.y <= 0)) or not (math.isfinite(p.x) and math.isfinite(p.y)):
            continue
        parts.append(f'<circle class="{escape(p.kind)}" cx="{x.at(p.x):.1f}" cy="{y.at(p.y):.1f}" r="4">'
                     f'<title>{escape(p.label)}</title></circle>')
    parts.append("</svg>")
    return Markup("".join(parts))


def line(points: Sequence[Point], *, x_label: str, y_label: str, title: str) -> Markup:
    """A curve through the points in x order (a run's loss or throughput against its step)."""
    drawn = [p for p in points if math.isfinite(p.x) and math.isfinite(p.y)]
    if len(drawn) < 2:
        return Markup('<p class="empty">not enough metrics yet</p>')
    x = _axis([p.x for p in drawn], LEFT, WIDTH - RIGHT, False, zero=False)
    y = _axis([p.y for p in drawn], HEIGHT - BOTTOM, TOP, False, zero=True)
    parts = _frame(x, y, x_label, y_label, title)
    path = " ".join(f"{x.at(p.x):.1f},{y.at(p.y):.1f}" for p in sorted(drawn, key=lambda p: p.x))
    parts.append(f'<polyline class="curve" points="{path}"/></svg>')
    return Markup("".join(parts))


def bars(rows: Sequence[tuple[str, float]], *, title: str, unit: str = "$") -> Markup:
    """Horizontal bars, one per (label, value), in the order given (a report's rows)."""
    if not rows:
        return Markup('<p class="empty">no spend recorded</p>')
    bar_h, gap, label_w = 22, 6, 180
    height = TOP + len(rows) * (bar_h + gap) + 8
    top = max(v for _, v in rows) or 1.0
    parts = [f'<svg class="chart bars" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    for i, (label, value) in enumerate(rows):
        y = TOP + i * (bar_h + gap)
        width = max((WIDTH - label_w - 110) * (value / top), 1.0)
        parts.append(f'<text class="tick" x="{label_w - 8}" y="{y + 15}" text-anchor="end">{escape(label[:28])}'
                     f'</text><rect class="bar" x="{label_w}" y="{y}" width="{width:.1f}" height="{bar_h}">'
                     f'<title>{escape(label)}: {unit}{value:,.2f}</title></rect>'
                     f'<text class="tick" x="{label_w + width + 6:.1f}" y="{y + 15}">{unit}{value:,.2f}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
