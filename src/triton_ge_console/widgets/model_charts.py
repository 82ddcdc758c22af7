"""Live latency, throughput and queue-depth charts for one selected model, drawn from the snapshot history."""

from __future__ import annotations

import html
import threading

import ipywidgets as w

from triton_ge_console.display import MISSING, number
from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot, ServerSnapshot
from triton_ge_console.widgets.charts import TimeChart, relative_times, values, window
from triton_ge_console.widgets.static_charts import image_html, images_row

# each chart's lines: label -> the figure's name in the history (sessions.observe.history.MODEL_FIGURES)
LATENCY = {"p50": "p50_ms", "p90": "p90_ms", "p99": "p99_ms", "avg": "avg_ms"}
# tok/s: a generate model's output tokens per second (no line for a model that generates nothing)
THROUGHPUT = {"req/s": "request_rate", "inf/s": "inference_rate", "tok/s": "output_tokens_per_s"}
QUEUE = {"queue depth": "queue_depth"}


class ModelCharts:
    """Latency (p50/p90/p99/avg), throughput (a generate model's tokens/s too) and queue depth over the last
    minutes for one model."""

    def __init__(self, model: str | None = None, history_seconds: float = 300.0) -> None:
        self.history_seconds = history_seconds
        self.picker = w.Dropdown(options=[model] if model else [], value=model, description="model")
        self.latency = TimeChart("latency", tuple(LATENCY), "ms")
        self.throughput = TimeChart("throughput", tuple(THROUGHPUT), "per second")
        self.queue = TimeChart("queue depth", tuple(QUEUE), "requests", height="160px", counts=True)
        self.caption = w.HTML("")
        self._history: SnapshotHistory | None = None
        self._now = 0.0
        self._lock = threading.RLock()  # the poller thread and a picker change may both redraw
        self.picker.observe(lambda _change: self.redraw(), names="value")
        wrap = w.Layout(flex_flow="row wrap", align_items="center")
        self.box = w.VBox([w.HBox([self.picker, self.caption], layout=wrap),
                           w.HBox([self.latency.box, self.throughput.box], layout=wrap),
                           w.HBox([self.queue.box])])  # in a box as the others: no wider than the output

    @property
    def model(self) -> str | None:
        """The model being charted."""
        return self.picker.value

    def update(self, snapshot: ServerSnapshot, history: SnapshotHistory) -> None:
        """Follow the snapshot's model list (keeping the choice) and redraw from history."""
        names = sorted({m.name for m in snapshot.models})
        with self._lock:
            self._history, self._now = history, snapshot.taken_at
            if list(self.picker.options) != names:
                keep = self.picker.value if self.picker.value in names else (names[0] if names else None)
                self.picker.options = names
                self.picker.value = keep
            self.redraw()

    def redraw(self) -> None:
        """Plot the chosen model's series and caption its latest figures."""
        with self._lock:
            self._redraw()

    def _redraw(self) -> None:
        """redraw() under the lock."""
        model, history = self.picker.value, self._history
        if model is None or history is None:
            return
        for chart, figures in ((self.latency, LATENCY), (self.throughput, THROUGHPUT), (self.queue, QUEUE)):
            series = [window(s, self._now, self.history_seconds)
                      for s in history.model_series_set(model, list(figures.values()))]
            chart.plot(relative_times(series[0], self._now), [values(s) for s in series])
        latest = history.latest.model(model) if history.latest else None
        self.caption.value = caption(latest)


    def static_html(self) -> str:
        """The charted model's charts as images, with their caption (what a closed dashboard leaves)."""
        with self._lock:
            if self.picker.value is None:
                return ""
            charts = (self.latency, self.throughput, self.queue)
            images = [image_html(chart.svg(), f"{chart.title} of {self.picker.value}") for chart in charts]
            return (f"<b>{html.escape(self.picker.value)}</b> {self.caption.value}"
                    f"{images_row(images)}")


def caption(model: ModelSnapshot | None) -> str:
    """Queue vs compute split, batch size and where latency came from, for the latest snapshot."""
    if model is None:
        return "<i>model not in the latest snapshot</i>"
    share = model.queue_share
    split = MISSING if share is None else f"queue {share:.0%} │ compute {1 - share:.0%}"
    source = model.latency.source or MISSING
    return html.escape(f"{split} │ avg batch {number(model.avg_batch)} │ latency from {source}")
