"""The selected model's detail: latency and throughput over time, queue vs compute, config, last error."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.strip import Strip
from textual_plotext import PlotextPlot

from triton_ge_console.console import format as fmt
from triton_ge_console.console.widgets.textlines import TextLines
from triton_ge_console.console.widgets.titles import retitle
from triton_ge_console.sessions.snapshot import ModelSnapshot

Series = Sequence[tuple[float, float | None]]
Lines = tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...]  # (label, xs, ys) per plotted line
SGR = re.compile(r"\x1b\[([0-9;]*)m")
CHARTS = ("latency", "throughput")


@dataclass(frozen=True)
class ModelDetail:
    """Everything the pane shows for one model, computed by the app from history and the repository."""

    model: ModelSnapshot
    p50: Series
    p99: Series
    inferences: Series
    requests: Series
    config_summary: str
    last_error: str | None


def _points(series: Series, now: float) -> tuple[list[float], list[float]]:
    """Known points as (minutes relative to now, value)."""
    xs = [(t - now) / 60.0 for t, v in series if v is not None]
    ys = [v for _, v in series if v is not None]
    return xs, ys


def split_text(model: ModelSnapshot) -> Text:
    """Queue vs compute share of a request's time."""
    queue, compute = model.queue_ms, model.compute_ms
    if queue is None or compute is None or queue + compute <= 0:
        return Text(f"queue {fmt.MISSING} │ compute {fmt.MISSING}")
    share = queue / (queue + compute)
    text = Text("queue ")
    text.append(f"{share:.0%}", style="yellow" if share > 0.5 else "")
    text.append(f" ({queue:.2f} ms) │ compute {1 - share:.0%} ({compute:.2f} ms)")
    return text


@functools.lru_cache(maxsize=256)
def sgr_style(codes: str) -> Style:
    """The style an SGR parameter list sets, read by rich's own decoder (cached: a chart uses a handful)."""
    spans = Text.from_ansi(f"\x1b[{codes}m ").spans if codes else []
    style = spans[0].style if spans else Style.null()
    return style if isinstance(style, Style) else Style.parse(style)


def ansi_strips(ansi: str, base: Style) -> list[Strip]:
    """Plotext's output as strips over a base style, without decoding it into a Text first (~5x cheaper)."""
    strips = []
    for line in ansi.split("\n"):
        segments: list[Segment] = []
        codes: list[str] = []  # SGR parameters in force since the last reset
        position = 0
        for match in SGR.finditer(line):
            if match.start() > position:
                segments.append(Segment(line[position:match.start()], base + sgr_style(";".join(codes))))
            code = match.group(1)
            codes = [] if code in ("", "0") else [*codes, code]
            position = match.end()
        if position < len(line):
            segments.append(Segment(line[position:], base + sgr_style(";".join(codes))))
        strips.append(Strip(segments))
    return strips


class SeriesChart(PlotextPlot):
    """A small time chart of one or two series, rebuilt only when what it plots or its size changes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._plotted: tuple[str, Lines] | None = None
        self._staged = False  # plotext holds data not shown yet
        self._drawn = 0  # bumped by every reveal of new data
        self._strips: tuple[object, list[Strip]] | None = None  # (what they were built for, the lines)

    def draw(self, title: str, lines: Sequence[tuple[str, Series]], now: float) -> None:
        """Replace the plotted data and show it; the same data again redraws nothing."""
        self.stage(title, lines, now)
        self.reveal()

    def stage(self, title: str, lines: Sequence[tuple[str, Series]], now: float) -> None:
        """Hand plotext new data without showing it yet: the build, which costs most, waits for reveal()."""
        points = [(label, *_points(series, now)) for label, series in lines]
        plotted = (title, tuple((label, tuple(xs), tuple(ys)) for label, xs, ys in points))
        if plotted == self._plotted:
            return
        self._plotted = plotted
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        plt.xlabel("minutes")
        for label, xs, ys in plotted[1]:
            if xs:
                plt.plot(list(xs), list(ys), label=label, marker="braille")
        self._staged = True

    def reveal(self) -> None:
        """Show the staged data (built on the next render); nothing when none is staged."""
        if self._staged:
            self._staged = False
            self._drawn += 1
            self.refresh()

    def render_line(self, y: int) -> Strip:
        """One line of the chart as built by plotext for the current data, size, theme and style."""
        base = self.rich_style
        width, height = self.size
        key = (self._drawn, width, height, self.app.theme, self.theme, base)
        if self._strips is None or self._strips[0] != key:
            self._strips = (key, ansi_strips(self._build(width, height), base))
        lines = self._strips[1]
        return lines[y].crop(0, width) if y < len(lines) else Strip.blank(width, base)

    def _build(self, width: int, height: int) -> str:
        """Plotext's ANSI text at this size and theme (what PlotextPlot.render decodes into a Text)."""
        self._plot.plotsize(width, height)
        self._plot._set_size(width, height)
        self._plot.theme(self._get_plotext_theme_name(self.app.theme))
        return str(self._plot.build())


class DetailPane(Vertical):
    """Charts on top, facts below."""

    def compose(self) -> ComposeResult:
        """Two charts side by side and an info block."""
        with Horizontal(id="charts"):
            yield SeriesChart(id="latency-chart")
            yield SeriesChart(id="throughput-chart")
        yield TextLines(id="detail-info")

    def show(self, detail: ModelDetail | None, charts: Sequence[str] = CHARTS) -> None:
        """Draw one model's facts and the named charts (they cost most), or a hint if none is selected."""
        info = self.query_one("#detail-info", TextLines)
        if detail is None:
            retitle(self, "No model selected")
            info.show(Text("select a model in the table", style="dim"))
            return
        model = detail.model
        retitle(self, f"{model.name} v{model.version}")
        info.show(self._info(detail))  # a fixed three lines
        self.draw_charts(detail, charts)

    def chart_width(self) -> int:
        """Columns of the narrower chart (0 before layout), the points per line the charts are thinned to.

        A braille plot has 2 x-positions per column, so up to twice as many points could still show:
        one per column is a choice (fewer points to build), not the most a chart can draw."""
        return min(chart.size.width for chart in self.query(SeriesChart))

    def draw_charts(self, detail: ModelDetail, charts: Sequence[str] = CHARTS) -> None:
        """Redraw the named charts from the detail's series."""
        self.stage_charts(detail, charts)
        self.reveal_charts(charts)

    def stage_charts(self, detail: ModelDetail, charts: Sequence[str] = CHARTS) -> None:
        """Hand the named charts the detail's series; reveal_charts shows them."""
        now = max((t for t, _ in detail.p50), default=0.0)
        if "latency" in charts:
            self.query_one("#latency-chart", SeriesChart).stage(
                "latency ms (p50 / p99)", [("p50", detail.p50), ("p99", detail.p99)], now)
        if "throughput" in charts:
            self.query_one("#throughput-chart", SeriesChart).stage(
                "throughput /s", [("inf/s", detail.inferences), ("req/s", detail.requests)], now)

    def reveal_charts(self, charts: Sequence[str] = CHARTS) -> None:
        """Show what the named charts were last handed."""
        for name in charts:
            self.query_one(f"#{name}-chart", SeriesChart).reveal()

    @staticmethod
    def _info(detail: ModelDetail) -> Text:
        """Split, config summary and last error as text lines."""
        text = split_text(detail.model)
        text.append(f"   │ latency source {detail.model.latency.source or fmt.MISSING}\n")
        text.append(f"config: {detail.config_summary}\n")
        text.append("last error: ")
        text.append(detail.last_error or fmt.MISSING, style="bold red" if detail.last_error else "dim")
        return text
