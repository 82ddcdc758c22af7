"""Charts as static SVG images: what a stopped dashboard and a finished comparison leave in a notebook.

A widget saved without its state reopens as "Error displaying widget: model not found"; an image in the
output does not need a kernel. Drawn here from the numbers (no browser, no plotting library), in the live
charts' colours.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import bqplot

COLOURS = bqplot.CATEGORY10  # the live charts' colours, in the same order
MARGIN = {"top": 28, "bottom": 34, "left": 52, "right": 12}
TICKS = 4


@dataclass(frozen=True)
class Frame:
    """The plotting area of a chart in pixels, and the data ranges it maps."""

    width: int
    height: int
    x_min: float
    x_max: float
    y_top: float
    margin: Mapping[str, int] = field(default_factory=lambda: MARGIN)

    def x(self, value: float) -> float:
        """A data x in pixels."""
        span = (self.x_max - self.x_min) or 1.0
        inner = self.width - self.margin["left"] - self.margin["right"]
        return self.margin["left"] + (value - self.x_min) / span * inner

    def y(self, value: float) -> float:
        """A data y (0 at the bottom) in pixels."""
        inner = self.height - self.margin["top"] - self.margin["bottom"]
        return self.margin["top"] + inner * (1.0 - min(max(value, 0.0), self.y_top) / self.y_top)


def nice_top(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k at or above `value` (1 when nothing is known)."""
    if not math.isfinite(value) or value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value)


def label(value: float) -> str:
    """A tick's text: at most three significant digits."""
    return f"{value:.3g}"


def known(values: Sequence[float | None]) -> list[float]:
    """The finite values, missing ones left out."""
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def text(x: float, y: float, content: str, anchor: str = "middle", extra: str = "") -> str:
    """One SVG text element, escaped."""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>'
            f"{html.escape(content)}</text>")


def svg_document(width: int, height: int, body: Sequence[str]) -> str:
    """A standalone SVG of the given size."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
            f'<rect width="{width}" height="{height}" fill="white"/>{"".join(body)}</svg>')


def y_axis(frame: Frame, y_label: str, whole: bool = False) -> list[str]:
    """Grid lines with their values on the left, and the axis' label."""
    parts = []
    for i in range(TICKS + 1):
        value = frame.y_top * i / TICKS
        if whole and value != int(value):
            continue
        y = frame.y(value)
        parts.append(f'<line x1="{MARGIN["left"]}" x2="{frame.width - MARGIN["right"]}" y1="{y:.1f}" '
                     f'y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(text(MARGIN["left"] - 4, y + 4, label(value), anchor="end"))
    if y_label:
        parts.append(text(12, frame.height / 2, y_label,
                          extra=f' transform="rotate(-90 12 {frame.height / 2:.1f})"'))
    return parts


def title_and_legend(width: int, title: str, names: Sequence[str]) -> list[str]:
    """The chart's title at the top left, one coloured entry per series at the top right."""
    parts = [text(MARGIN["left"], 16, title, anchor="start", extra=' font-weight="bold" class="title"')]
    if len(names) > 1:
        right = width - MARGIN["right"]
        for i, name in reversed(list(enumerate(names))):
            right -= 7 * len(name) + 18
            colour = COLOURS[i % len(COLOURS)]
            parts.append(f'<rect x="{right:.1f}" y="8" width="10" height="10" fill="{colour}"/>')
            parts.append(text(right + 13, 17, name, anchor="start"))
    return parts


def segments(xs: Sequence[float], ys: Sequence[float]) -> Iterator[list[tuple[float, float]]]:
    """The runs of known points of a line (a missing value is a gap)."""
    run: list[tuple[float, float]] = []
    for x, y in zip(xs, ys, strict=False):
        if math.isfinite(y):
            run.append((x, y))
        elif run:
            yield run
            run = []
    if run:
        yield run


def line_chart_svg(title: str, x: Sequence[float], series: Mapping[str, Sequence[float]], y_label: str,
                   x_label: str = "seconds ago", width: int = 420, height: int = 220,
                   counts: bool = False) -> str:
    """Lines over x (NaN gaps kept), y from 0; "no figures yet" with fewer than two points."""
    names = list(series)
    values = [v for ys in series.values() for v in known(ys)]
    peak = max(values, default=0.0)
    top = float(max(TICKS, math.ceil(peak))) if counts else nice_top(peak)
    frame = Frame(width, height, min(x, default=0.0), max(x, default=0.0), top)
    parts = title_and_legend(width, title, names) + y_axis(frame, y_label, whole=counts)
    if len(x) < 2 or not values:
        parts.append(text(width / 2, height / 2, "no figures yet", extra=' fill="gray"'))
        return svg_document(width, height, parts)
    for i in range(5):
        value = frame.x_min + (frame.x_max - frame.x_min) * i / 4
        parts.append(text(frame.x(value), height - MARGIN["bottom"] + 14, label(round(value, 1))))
    parts.append(text(width / 2, height - 6, x_label))
    for i, ys in enumerate(series.values()):
        for run in segments(x, ys):
            points = " ".join(f"{frame.x(px):.1f},{frame.y(py):.1f}" for px, py in run)
            parts.append(f'<polyline class="line" points="{points}" fill="none" '
                         f'stroke="{COLOURS[i % len(COLOURS)]}" stroke-width="1.5"/>')
    return svg_document(width, height, parts)


def bar_chart_svg(title: str, categories: Sequence[str], groups: Mapping[str, Sequence[float | None]],
                  y_label: str = "", width: int = 420, height: int = 300) -> str:
    """Grouped bars, one group per category; a missing figure draws no bar."""
    names = list(groups)
    frame = Frame(width, height, 0.0, 1.0, nice_top(max(known([v for g in groups.values() for v in g]),
                                                        default=0.0)))
    parts = title_and_legend(width, title, names) + y_axis(frame, y_label)
    slot = (width - MARGIN["left"] - MARGIN["right"]) / max(len(categories), 1)
    bar = slot * 0.7 / max(len(names), 1)
    bottom = frame.y(0.0)
    for c, category in enumerate(categories):
        left = MARGIN["left"] + c * slot + slot * 0.15
        parts.append(text(left + slot * 0.35, height - MARGIN["bottom"] + 14, category))
        for g, values in enumerate(groups.values()):
            value = values[c] if c < len(values) else None
            if value is None or not math.isfinite(value):
                continue
            top = frame.y(value)
            parts.append(f'<rect class="bar" x="{left + g * bar:.1f}" y="{top:.1f}" width="{bar:.1f}" '
                         f'height="{bottom - top:.1f}" fill="{COLOURS[g % len(COLOURS)]}">'
                         f"<title>{html.escape(f'{names[g]} {category}: {value:.4g}')}</title></rect>")
    return svg_document(width, height, parts)


def sparkline_svg(x: Sequence[float], y: Sequence[float], width: int = 220, height: int = 48) -> str:
    """A 0..1 history without axes, as the device gauges' sparkline."""
    edge = {"top": 2, "bottom": 2, "left": 2, "right": 2}
    frame = Frame(width, height, min(x, default=0.0), max(x, default=0.0), 1.0, edge)
    parts = []
    for run in segments(x, y):
        points = " ".join(f"{frame.x(px):.1f},{frame.y(py):.1f}" for px, py in run)
        parts.append(f'<polyline class="line" points="{points}" fill="none" stroke="{COLOURS[0]}"/>')
    return svg_document(width, height, parts)


def image_html(svg: str, alt: str) -> str:
    """An SVG as an <img> with its data inline: it keeps its size, and a saved notebook keeps it."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return (f'<img class="ge-static-chart" src="data:image/svg+xml;base64,{data}" alt="{html.escape(alt)}" '
            f'style="max-width:100%; height:auto">')


def images_row(images: Sequence[str]) -> str:
    """Images side by side, wrapping onto the next line when the output is narrow."""
    return f"<div style='display:flex; flex-wrap:wrap; gap:8px'>{''.join(images)}</div>"
