"""The selected model's detail: latency and throughput over time, queue vs compute, config, last error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from triton_ge_console.backend_glue.ledger import human_bytes
from triton_ge_console.console.chart import ChartSeries, Point, chart_runs
from triton_ge_console.console.widgets.models import threshold_style, timed_out_style
from triton_ge_console.console.widgets.titles import retitle
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
    """A small time chart of one or two series (console.chart), drawn again when its data change."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"series-chart--{role}" for role in ROLES}
    DEFAULT_CSS = """
    SeriesChart { width: 1fr; padding: 0 1; }
    SeriesChart > .series-chart--axis { color: $text-muted; }
    SeriesChart > .series-chart--title { text-style: bold; }
    SeriesChart > .series-chart--line0 { color: $success; }
    SeriesChart > .series-chart--line1 { color: $warning; }
    """

    plotted: reactive[tuple[str, tuple[ChartSeries, ...]] | None] = reactive(None)  # title and lines shown

    def draw(self, title: str, lines: Sequence[tuple[str, Series]], now: float) -> None:
        """Plot these series (the same data again draws nothing)."""
        self.plotted = (title, tuple(ChartSeries(label, _points(series, now)) for label, series in lines))

    def render(self) -> Text:
        """The chart at the widget's size, each run in its role's style."""
        if self.plotted is None:
            return Text()
        width, height = self.content_size
        styles = {role: self.get_component_rich_style(f"series-chart--{role}") for role in ROLES}
        lines = (Text.assemble(*((text, styles.get(role, "")) for text, role in row))
                 for row in chart_runs(*self.plotted, width, height))
        return Text("\n").join(lines)


class DetailView(NamedTuple):
    """What the screen feeds the detail pane: a model's facts, and whether to redraw its charts."""

    detail: ModelDetail | None
    charts: bool = True


class DetailPane(Vertical):
    """Charts on top, facts below."""

    view: reactive[DetailView | None] = reactive(None, repaint=False, always_update=True, init=False)

    def compose(self) -> ComposeResult:
        """Two charts side by side and an info block."""
        with Horizontal(id="charts"):
            yield SeriesChart(id="latency-chart")
            yield SeriesChart(id="throughput-chart")
        yield Static(id="detail-info")

    def watch_view(self, view: DetailView | None) -> None:
        """Draw one model's facts and, when told, its charts."""
        detail, charts = view or DetailView(None)
        info = self.query_one("#detail-info", Static)
        if detail is None:
            retitle(self, "No model selected")
            info.update(Text("select a model in the table", style="dim"))
            return
        model = detail.model
        retitle(self, printable(f"{model.name} v{model.version}" if model.version else model.name))
        info.update(self._info(detail), layout=False)  # a fixed three lines: no layout pass
        if charts:
            self._draw_latency(detail)
            self._draw_throughput(detail)

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
