"""A small braille line chart laid out as styled runs of text: a refresh can afford to draw two of them.

plotext drew these charts before at a large part of a frame's budget, for a chart that only needs a y
scale from zero, time ticks and up to two lines. This draws the same far more cheaply (figures in
benchmarks/results/NOTES.md), and the widget that shows it only turns the runs into strips.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Point = tuple[float, float | None]  # (x, y); y None is a gap in the line
Run = tuple[str, str]  # text and its role: "axis", "title", or "line0" / "line1" (a series)

BRAILLE_BASE = 0x2800
# braille dot bits by (column 0-1, row 0-3 from the top of the cell)
DOT_BITS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
# the dots of rows a..b (from the top of a cell) in one of its two columns: RANGE_BITS[column][a][b]
RANGE_BITS = tuple(tuple(tuple(sum(side[a:b + 1]) for b in range(4)) for a in range(4)) for side in DOT_BITS)
DOT_ROWS = 4  # per cell (and 2 dot columns)
NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
HEADROOM = 1.05  # the top of the y scale clears the highest point, so a flat line at its peak still shows


@dataclass(frozen=True)
class ChartSeries:
    """One line: its legend label and its points in x order."""

    label: str
    points: Sequence[Point]


@dataclass(frozen=True)
class Scale:
    """Where the plot area maps x and y: x from x0 to x1, y from 0 to top."""

    x0: float
    x1: float
    top: float


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above value (1 for nothing to show)."""
    if not value > 0 or math.isinf(value):
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in NICE_STEPS if step * power >= value * (1 - 1e-9))


def scale_of(series: Sequence[ChartSeries]) -> Scale | None:
    """The x span of every known point and a y scale from zero; None when there is nothing to draw."""
    known = [(x, y) for line in series for x, y in line.points if y is not None and math.isfinite(y)]
    if not known:
        return None
    xs = [x for x, _ in known]
    oldest, newest = min(xs), max(xs)
    oldest = oldest if oldest < newest else newest - 1.0  # a single instant: at the right edge
    return Scale(oldest, newest, nice_ceiling(HEADROOM * max(y for _, y in known)))


def y_label(value: float) -> str:
    """A tick value in at most 5 characters, thousands and millions as k and M (never 2.5e+03)."""
    for unit, factor in (("M", 1e6), ("k", 1e3)):
        if value >= factor:
            return f"{value / factor:.3g}{unit}"
    return f"{value:.3g}"


def chart_runs(title: str, series: Sequence[ChartSeries], width: int, height: int) -> list[list[Run]]:
    """The chart as `height` rows of runs: legend row, plot rows with a y axis, then the x labels."""
    if width < 12 or height < 4:
        return [[(title[:width], "title")]] + [[] for _ in range(height - 1)]
    scale = scale_of(series)
    rows: list[list[Run]] = [legend(title, series)]
    if scale is None:
        rows.append([("no data yet", "axis")])
        return rows + [[] for _ in range(height - 2)]
    plot_height = height - 2
    tick_rows = {0: scale.top, plot_height // 2: scale.top / 2, plot_height - 1: 0.0}
    gutter = max(len(y_label(value)) for value in tick_rows.values())
    plot_width = width - gutter - 1
    grid = Grid(plot_width, plot_height)
    for index, line in enumerate(series):
        grid.draw(line.points, scale, f"line{index}")
    for row in range(plot_height):
        tick = tick_rows.get(row)
        axis = (y_label(tick).rjust(gutter) + "┤") if tick is not None else " " * gutter + "│"
        rows.append([(axis, "axis"), *grid.runs(row)])
    rows.append([(" " * (gutter + 1) + x_labels(scale, plot_width), "axis")])
    return rows


def legend(title: str, series: Sequence[ChartSeries]) -> list[Run]:
    """The title, then each series' label after a marker in its colour."""
    runs: list[Run] = [(title, "title")]
    for index, line in enumerate(series):
        runs += [("  ", "axis"), ("━━ ", f"line{index}"), (line.label, "axis")]
    return runs


def x_labels(scale: Scale, width: int) -> str:
    """Times at the start, middle (where it fits) and end of the x span, no two alike; an end at 0 is "now".

    Under a minute of history the ticks are seconds, else minutes (tenths under three minutes), so a short
    span does not read "0.0 min … 0.0 … now".
    """
    span = scale.x1 - scale.x0
    unit, factor, decimals = ("s", 60.0, 0) if span < 1 else ("min", 1.0, 0 if span >= 3 else 1)
    ticks = (scale.x0, (scale.x0 + scale.x1) / 2, scale.x1)
    first, middle, last = (_tick(value * factor, decimals) for value in ticks)
    if middle in (first, last):
        middle = ""
    last_text = "now" if float(last) == 0 else last
    if first == last:
        return last_text.rjust(width)[:width]
    first = f"{first} {unit}"
    start = max(0, (width - 1) // 2 - len(middle) // 2)
    if middle and start >= len(first) + 2 and start + len(middle) + 2 <= width - len(last_text):
        line = first.ljust(start) + middle
    else:
        line = first
    return (line.ljust(width - len(last_text)) + last_text)[:width]


def _tick(value: float, decimals: int) -> str:
    """A tick value, never "-0"."""
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


class Grid:
    """The plot area as braille cells of 2 x 4 dots, each cell owned by the last series drawn in it."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.bits = [[0] * width for _ in range(height)]
        self.owner = [[""] * width for _ in range(height)]

    def draw(self, points: Sequence[Point], scale: Scale, role: str) -> None:
        """Connect consecutive known points; a None breaks the line."""
        previous: tuple[int, int] | None = None
        for dot in self._dots(points, scale):
            if dot is not None:
                self._segment(previous or dot, dot, role)
            previous = dot

    def _dots(self, points: Sequence[Point], scale: Scale) -> list[tuple[int, int] | None]:
        """Each point's dot column and dot row (0 at the bottom); None for a missing figure."""
        columns, rows = 2 * self.width - 1, DOT_ROWS * self.height - 1
        span = (scale.x1 - scale.x0) or 1.0  # a single instant: at the right edge
        x_start, x_factor, y_factor = scale.x1 - span, columns / span, rows / scale.top
        return [None if y is None or not math.isfinite(y)
                else (round((x - x_start) * x_factor), round(min(max(y, 0.0), scale.top) * y_factor))
                for x, y in points]

    def _segment(self, start: tuple[int, int], end: tuple[int, int], role: str) -> None:
        """Every dot column from start to end gets a vertical run reaching the interpolated height."""
        (c0, r0), (c1, r1) = (start, end) if start[0] <= end[0] else (end, start)  # should a clock step back
        if c0 == c1:
            self._light(c0, min(r0, r1), max(r0, r1), role)
            return
        last = r0
        slope = (r1 - r0) / (c1 - c0)
        # the start dot ends the segment before (or is lit alone, after a gap): begin a column later
        for column in range(c0 + 1 if start[0] < end[0] else c0, c1 + 1):
            row = round(r0 + slope * (column - c0))
            self._light(column, min(last, row), max(last, row), role)
            last = row

    def _light(self, column: int, low: int, high: int, role: str) -> None:
        """Light dot rows low..high (counted from the bottom) of one dot column, a cell at a time."""
        top = DOT_ROWS * self.height - 1
        first, last = top - high, top - low  # the same rows counted from the top
        side, cell_column = RANGE_BITS[column % 2], column // 2
        bits, owner = self.bits, self.owner
        for cell_row in range(first // DOT_ROWS, last // DOT_ROWS + 1):
            offset = cell_row * DOT_ROWS
            bits[cell_row][cell_column] |= side[max(first - offset, 0)][min(last - offset, DOT_ROWS - 1)]
            owner[cell_row][cell_column] = role

    def runs(self, row: int) -> list[Run]:
        """One row of cells as runs of the same owner (blank cells are spaces)."""
        runs: list[Run] = []
        text: list[str] = []
        current = ""
        for bits, owner in zip(self.bits[row], self.owner[row], strict=True):
            role = owner if bits else "axis"
            if role != current and text:
                runs.append(("".join(text), current))
                text = []
            current = role
            text.append(chr(BRAILLE_BASE + bits) if bits else " ")
        if text:
            runs.append(("".join(text), current))
        return runs
