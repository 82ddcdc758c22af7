"""Small bqplot building blocks: time-series line charts fed from the snapshot history."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import bqplot
import ipywidgets as w
import numpy as np

from triton_ge_console.widgets.static_charts import line_chart_svg

Series = Sequence[tuple[float, float | None]]
MIN_POINTS = 2  # bqplot squeezes a one-point line to a scalar and rejects it


def relative_times(series: Series, now: float) -> np.ndarray:
    """Seconds before `now` (negative), the x axis every chart uses."""
    return np.array([t - now for t, _ in series], dtype=float)


def values(series: Series, scale: float = 1.0) -> np.ndarray:
    """The y values of a series, NaN where missing (a gap in the line)."""
    return np.array([math.nan if v is None else float(v) * scale for _, v in series], dtype=float)


def window(series: Series, now: float, seconds: float) -> list[tuple[float, float | None]]:
    """The points of a series taken within the last `seconds` before `now`."""
    return [(t, v) for t, v in series if now - t <= seconds]

def legend_html(labels: Sequence[str], colours: Sequence[str]) -> str:
    """One coloured swatch and name per line, in a row that wraps."""
    return " ".join(f"<span style='white-space:nowrap; font-size:11px'>"
                    f"<span style='color:{colours[i % len(colours)]}'>━━</span> {html.escape(label)}</span>"
                    for i, label in enumerate(labels))


COUNT_TICKS = 4  # a short chart of whole numbers has room for about this many labels


class TimeChart:
    """A bqplot figure with one line per labelled series over relative time.

    Each series is its own Lines mark holding only its span of known points: bqplot puts a line's label at
    its last point (a missing one made `translate(x, undefined)` in the browser console) and draws an empty
    line as a `null` path, so a line with fewer than two known points is hidden instead. Missing points
    inside the span stay gaps (bqplot leaves non-finite values undrawn).
    """

    def __init__(self, title: str, labels: Sequence[str], y_label: str, height: str = "220px",
                 y_min: float | None = 0.0, y_max: float | None = None, counts: bool = False) -> None:
        self.labels = tuple(labels)
        self.title, self.y_label = title, y_label
        self.counts = counts  # whole numbers (a queue depth): whole ticks, at most COUNT_TICKS + 1 of them
        self.x_scale = bqplot.LinearScale()
        self.y_scale = bqplot.LinearScale(min=y_min, max=y_max)
        colours = bqplot.CATEGORY10
        self.marks = [
            bqplot.Lines(x=np.zeros(0), y=np.zeros(0), labels=[label], colors=[colours[i % len(colours)]],
                         scales={"x": self.x_scale, "y": self.y_scale}, visible=False)
            for i, label in enumerate(self.labels)
        ]
        self._plotted: dict[str, list[float]] = {label: [] for label in self.labels}
        self._x: list[float] = []
        axes = [
            bqplot.Axis(scale=self.x_scale, label="seconds ago", num_ticks=5),
            bqplot.Axis(scale=self.y_scale, side="left", label=y_label, tick_format="d" if counts else ".3~g",
                        num_ticks=COUNT_TICKS if counts else None),
        ]
        self.figure = bqplot.Figure(marks=self.marks, axes=axes, title=title, animation_duration=0,
                                    fig_margin={"top": 40, "bottom": 40, "left": 55, "right": 20},
                                    layout=w.Layout(height=height, width="auto"))
        # the legend above the plot, not over its lines; charts side by side wrap under each other
        self.legend = w.HTML(legend_html(self.labels, colours) if len(self.labels) > 1 else "")
        self.box = w.VBox([self.legend, self.figure], layout=w.Layout(flex="1 1 300px", min_width="0"))

    def plot(self, x: np.ndarray, ys: Sequence[np.ndarray]) -> None:
        """Replace the plotted data (one y array per label, NaN where missing)."""
        if len(x) < MIN_POINTS:
            x, ys = np.zeros(0), [np.zeros(0) for _ in self.labels]
        self._plotted = {label: [float(v) for v in y] for label, y in zip(self.labels, ys, strict=False)}
        self._x = [float(v) for v in x]
        if self.counts:  # a top of at least COUNT_TICKS keeps every tick a whole number, no label repeated
            peak = max((v for y in ys for v in y if np.isfinite(v)), default=0.0)
            self.y_scale.max = float(max(COUNT_TICKS, math.ceil(peak)))
        with self.figure.hold_sync():
            for mark, y in zip(self.marks, ys, strict=False):
                plot_line(mark, x, y)

    @property
    def plotted(self) -> dict[str, list[float]]:
        """The plotted values per label (NaN kept), for tests and notebooks."""
        return dict(self._plotted)

    def svg(self) -> str:
        """What the chart shows now, as a static image (for what a closed dashboard leaves)."""
        return line_chart_svg(self.title, self._x, self._plotted, self.y_label, counts=self.counts)


def known_span(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The points from the first to the last known value (None with fewer than two known)."""
    known = np.flatnonzero(np.isfinite(y)) if len(y) == len(x) else np.zeros(0, dtype=int)
    if len(known) < MIN_POINTS:
        return None
    first, last = int(known[0]), int(known[-1]) + 1
    return x[first:last], y[first:last]


def plot_line(line: bqplot.Lines, x: np.ndarray, y: np.ndarray) -> None:
    """Replace a single line's data with its span of known points; hidden while it has fewer than two."""
    span = known_span(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    with line.hold_sync():
        if span is None:
            line.visible = False
            line.x, line.y = np.zeros(0), np.zeros(0)
        else:
            line.x, line.y = span
            line.visible = True


def sparkline(height: str = "48px", width: str = "220px") -> tuple[bqplot.Figure, bqplot.Lines]:
    """A tiny axis-less 0..1 line chart for utilization history."""
    x_scale, y_scale = bqplot.LinearScale(), bqplot.LinearScale(min=0.0, max=1.0)
    line = bqplot.Lines(x=np.zeros(0), y=np.zeros(0), scales={"x": x_scale, "y": y_scale}, fill="bottom",
                        fill_opacities=[0.3])
    figure = bqplot.Figure(marks=[line], axes=[], animation_duration=0,
                           fig_margin={"top": 2, "bottom": 2, "left": 2, "right": 2},
                           layout=w.Layout(height=height, width=width))
    return figure, line
