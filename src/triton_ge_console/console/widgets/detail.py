"""The selected model's detail: latency and throughput over time, queue vs compute, config, last error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from triton_ge_console.backend_glue.ledger import human_bytes
from triton_ge_console.console.chart import ChartSeries, Point, Run, chart_runs
from triton_ge_console.console.widgets.models import threshold_style, timed_out_style
from triton_ge_console.console.widgets.paint import changed_lines, repaint_lines, retitle
from triton_ge_console.console.widgets.textlines import TextLines
from triton_ge_console.display import MISSING, generation_parts, number, printable
from triton_ge_console.sessions.observe.generation import generation_row
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot

Series = Sequence[Point]  # (epoch seconds, value) per chart point


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
    limits: Mapping[str, float] = field(default_factory=dict)  # the spec's console thresholds
    ttft: Series = ()  # a generate model's TTFT p99 (peak per point), ITL p99 (peak) and output tokens/s
    itl: Series = ()
    tokens: Series = ()


def _points(series: Series, now: float) -> tuple[Point, ...]:
    """Points as (minutes relative to now, value); None values stay, as gaps."""
    return tuple(((t - now) / 60.0, v) for t, v in series)


def _newest(detail: ModelDetail) -> float:
    """The time of the detail's newest point: the charts' "now"."""
    return max((t for t, _ in detail.p50), default=0.0)


def npu_text(model: ModelSnapshot) -> str:
    """The NPUs the model runs on, with what it holds on each where the glue says."""
    if not model.devices:
        return f"NPUs {MISSING}"
    memory = dict(model.memory_by_device)
    held = [f"NPU{d}" + (f" {human_bytes(memory[d])}" if d in memory else "") for d in model.devices]
    return "on " + ", ".join(held)


def split_text(model: ModelSnapshot) -> Text:
    """Queue vs compute share of a request's time."""
    share, queue, compute = model.queue_share, model.queue_ms, model.compute_ms
    if share is None or queue is None or compute is None:
        return Text(f"queue {MISSING} │ compute {MISSING}")
    text = Text("queue ")
    text.append(f"{share:.0%}", style="yellow" if share > 0.5 else "")
    text.append(f" ({queue:.2f} ms) │ compute {1 - share:.0%} ({compute:.2f} ms)")
    return text


ROLES = ("axis", "title", "line0", "line1")  # what chart runs are drawn as, each a component class


class SeriesChart(Widget):
    """A small time chart of one or two series (console.chart), redrawn only when its data or size change."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"series-chart--{role}" for role in ROLES}
    DEFAULT_CSS = """
    SeriesChart { width: 1fr; padding: 0 1; }
    SeriesChart > .series-chart--axis { color: $text-muted; }
    SeriesChart > .series-chart--title { text-style: bold; }
    SeriesChart > .series-chart--line0 { color: $success; }
    SeriesChart > .series-chart--line1 { color: $warning; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plotted: tuple[str, tuple[ChartSeries, ...]] | None = None  # title and lines shown
        self.drawn = 0  # bumped by every draw of new data
        self._strips: tuple[object, list[Strip]] | None = None  # (what they were built for, the lines)
        self._styles: tuple[Style, dict[str, Style]] | None = None  # the widget's style, each role's over it

    def draw(self, title: str, lines: Sequence[tuple[str, Series]], now: float) -> None:
        """Replace the plotted data and repaint the lines it changed; the same data again redraws nothing."""
        plotted = (title, tuple(ChartSeries(label, _points(series, now)) for label, series in lines))
        if plotted == self.plotted:
            return
        self.plotted = plotted
        self.drawn += 1
        if not self.is_mounted or not self.size.area:  # no styles or size yet: the first render builds it
            self.refresh()
            return
        before = self._strips[1] if self._strips else None
        after = self._built()[1]
        if before is None or len(before) != len(after):
            self.refresh()
            return
        repaint_lines(self, changed_lines(before, after))  # the legend, and often the axes, stay as they were

    def render_lines(self, crop: Region) -> list[Strip]:
        """Make sure the strips are up to date for this render pass (the size or style may have changed)."""
        self._built()
        return super().render_lines(crop)

    def _built(self) -> tuple[object, list[Strip]]:
        """The chart's lines, rebuilt when the data, the size or the widget's style changed."""
        width, height = self.size
        base = self.rich_style
        key = (self.drawn, width, height, base)
        if self._strips is None or self._strips[0] != key:
            rows = chart_runs(*self.plotted, width, height) if self.plotted else []
            self._strips = (key, [_strip(row, base, self._role_styles(base), width) for row in rows])
        return self._strips

    def _role_styles(self, base: Style) -> dict[str, Style]:
        """Each role's style, looked up (a CSS walk) again only when the widget's style or theme changes."""
        if self._styles is None or self._styles[0] != base:
            styles = {role: self.get_component_rich_style(f"series-chart--{role}") for role in ROLES}
            self._styles = (base, styles)
        return self._styles[1]

    def notify_style_update(self) -> None:
        """The theme or the CSS changed: the line colours may have too."""
        super().notify_style_update()
        self._strips = None
        self._styles = None

    def render_line(self, y: int) -> Strip:
        """One line of the chart as render_lines built it."""
        lines = self._strips[1] if self._strips else []
        return lines[y] if y < len(lines) else Strip.blank(self.size.width, self.rich_style)


def _strip(runs: list[Run], base: Style, styles: dict[str, Style], width: int) -> Strip:
    """A row of runs as a strip of exactly `width` cells over the widget's style."""
    segments = [Segment(text, base + styles.get(role, Style.null())) for text, role in runs]
    return Strip(segments).crop_extend(0, width, base)


class DetailView(NamedTuple):
    """What the screen feeds the detail pane: a model's facts, whether to redraw its charts, and whether
    to spread the two charts over two refreshes."""

    detail: ModelDetail | None
    charts: bool = True
    spread: bool = False


class DetailPane(Vertical):
    """Charts on top, facts below."""

    view: reactive[DetailView | None] = reactive(None, repaint=False, always_update=True, init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pending: ModelDetail | None = None  # series the throughput chart draws at the next view

    def compose(self) -> ComposeResult:
        """Two charts side by side and an info block."""
        with Horizontal(id="charts"):
            yield SeriesChart(id="latency-chart")
            yield SeriesChart(id="throughput-chart")
        yield TextLines(id="detail-info")

    def watch_view(self, view: DetailView | None) -> None:
        """Draw one model's facts and, when told, its charts (spread: the second one at the next view)."""
        detail, charts, spread = view or DetailView(None)
        info = self.query_one("#detail-info", TextLines)
        pending, self._pending = self._pending, None
        if detail is None:
            retitle(self, "No model selected")
            info.show(Text("select a model in the table", style="dim"))
            return
        model = detail.model
        retitle(self, printable(f"{model.name} v{model.version}"))
        info.show(self._info(detail))  # a fixed three lines
        if charts:
            self._draw_latency(detail)
            if spread and pending is None:
                self._pending = detail
            else:  # not spread, or redraws come faster than the spread finishes: both at once
                self._draw_throughput(detail)
        elif pending is not None and pending.model.name == model.name:
            self._draw_throughput(pending)

    def _draw_latency(self, detail: ModelDetail) -> None:
        """The latency chart, in minutes before the detail's newest point (as the throughput chart); a
        generate model's is its token latency: time to first token and between tokens."""
        chart = self.query_one("#latency-chart", SeriesChart)
        if detail.model.generation is not None:
            lines = [("TTFT p99", detail.ttft), ("ITL p99", detail.itl)]
            chart.draw("token latency ms", lines, _newest(detail))
        else:
            chart.draw("latency ms", [("p50", detail.p50), ("p99", detail.p99)], _newest(detail))

    def _draw_throughput(self, detail: ModelDetail) -> None:
        """The throughput chart, on the latency chart's time axis; a generate model's in output tokens."""
        generate = detail.model.generation is not None
        first = ("tok/s", detail.tokens) if generate else ("inf/s", detail.inferences)
        self.query_one("#throughput-chart", SeriesChart).draw(
            "throughput /s", [first, ("req/s", detail.requests)], _newest(detail))

    @staticmethod
    def _info(detail: ModelDetail) -> Text:
        """Split, config summary and last error as text lines."""
        model = detail.model
        text = split_text(model)
        text.append(f"   │ latency source {model.latency.source or MISSING}   │ timed out in queue ")
        timed_out = model.timed_out_total
        text.append(number(timed_out), style=timed_out_style(timed_out, detail.limits))
        text.append(f"   │ {npu_text(model)}\n")
        if model.generation is not None:  # a generate model: its token figures, config and error share a line
            for piece, key, value in generation_parts(generation_row(model.generation) or {}):
                text.append(piece, style=threshold_style(value, detail.limits.get(key)) if key else "")
            text.append("\n")
            text.append(f"config: {detail.config_summary}   │ ")
        else:
            text.append(f"config: {detail.config_summary}\n")
        text.append("last error: ")
        error = detail.last_error
        text.append(printable(error or MISSING), style="bold red" if error else "dim")
        return text
