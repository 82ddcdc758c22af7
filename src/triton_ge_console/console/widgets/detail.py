"""The selected model's detail: latency and throughput over time, queue vs compute, config, last error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from triton_ge_console.console import format as fmt
from triton_ge_console.console.widgets.titles import retitle
from triton_ge_console.sessions.snapshot import ModelSnapshot

Series = Sequence[tuple[float, float | None]]


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


class SeriesChart(PlotextPlot):
    """A small time chart of one or two series."""

    def draw(self, title: str, lines: Sequence[tuple[str, Series]], now: float) -> None:
        """Replace the plotted data."""
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        plt.xlabel("minutes")
        for label, series in lines:
            xs, ys = _points(series, now)
            if xs:
                plt.plot(xs, ys, label=label, marker="braille")
        self.refresh()


class DetailPane(Vertical):
    """Charts on top, facts below."""

    def compose(self) -> ComposeResult:
        """Two charts side by side and an info block."""
        with Horizontal(id="charts"):
            yield SeriesChart(id="latency-chart")
            yield SeriesChart(id="throughput-chart")
        yield Static(id="detail-info")

    def show(self, detail: ModelDetail | None, draw_charts: bool = True) -> None:
        """Draw one model's detail (charts only when asked: they cost most), or a hint if none is selected."""
        info = self.query_one("#detail-info", Static)
        if detail is None:
            retitle(self, "No model selected")
            info.update(Text("select a model in the table", style="dim"))
            return
        model = detail.model
        retitle(self, f"{model.name} v{model.version}")
        info.update(self._info(detail), layout=False)  # a fixed three lines
        if not draw_charts:
            return
        now = max((t for t, _ in detail.p50), default=0.0)
        self.query_one("#latency-chart", SeriesChart).draw(
            "latency ms (p50 / p99)", [("p50", detail.p50), ("p99", detail.p99)], now)
        self.query_one("#throughput-chart", SeriesChart).draw(
            "throughput /s", [("inf/s", detail.inferences), ("req/s", detail.requests)], now)

    @staticmethod
    def _info(detail: ModelDetail) -> Text:
        """Split, config summary and last error as text lines."""
        text = split_text(detail.model)
        text.append(f"   │ latency source {detail.model.latency.source or fmt.MISSING}\n")
        text.append(f"config: {detail.config_summary}\n")
        text.append("last error: ")
        text.append(detail.last_error or fmt.MISSING, style="bold red" if detail.last_error else "dim")
        return text
