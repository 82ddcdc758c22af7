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
# a generate model's latency chart (Triton's request duration ends when execute returns, before any token)
TOKEN_LATENCY = {"TTFT p50": "ttft_p50_ms", "TTFT p99": "ttft_p99_ms", "ITL p50": "itl_p50_ms",
                 "ITL p99": "itl_p99_ms"}
# tok/s: a generate model's output tokens per second (no line for a model that generates nothing)
THROUGHPUT = {"req/s": "request_rate", "inf/s": "inference_rate", "tok/s": "output_tokens_per_s"}
QUEUE = {"queue depth": "queue_depth"}


class ModelCharts:
    """Latency (p50/p90/p99/avg; a generate model's TTFT and ITL instead), throughput (a generate model's
    tokens/s too) and queue depth over the last minutes for one model."""

    def __init__(self, model: str | None = None, history_seconds: float = 300.0) -> None:
        self.history_seconds = history_seconds
        self.picker = w.Dropdown(options=[model] if model else [], value=model, description="model")
        self.latency = TimeChart("latency", tuple(LATENCY), "ms")
        self.token_latency = TimeChart("token latency", tuple(TOKEN_LATENCY), "ms")
        self._shown = self.latency  # which of the two latency charts the row holds
        self.throughput = TimeChart("throughput", tuple(THROUGHPUT), "per second")
        self.queue = TimeChart("queue depth", tuple(QUEUE), "requests", height="160px", counts=True)
        self.caption = w.HTML("")
        self._history: SnapshotHistory | None = None
        self._now = 0.0
        self._lock = threading.RLock()  # the poller thread and a picker change may both redraw
        self.picker.observe(lambda _change: self.redraw(), names="value")
        wrap = w.Layout(flex_flow="row wrap", align_items="center")
        self._latency_row = w.HBox([self.latency.box, self.throughput.box], layout=wrap)
        self.box = w.VBox([w.HBox([self.picker, self.caption], layout=wrap),
                           self._latency_row,
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
        latest = history.latest.model(model) if history.latest else None
        latency = self.shown_latency(latest)
        if latency is not self._shown:
            self._shown, self._latency_row.children = latency, (latency.box, self.throughput.box)
        figures = TOKEN_LATENCY if latency is self.token_latency else LATENCY
        for chart, names in ((latency, figures), (self.throughput, THROUGHPUT), (self.queue, QUEUE)):
            series = [window(s, self._now, self.history_seconds)
                      for s in history.model_series_set(model, list(names.values()))]
            chart.plot(relative_times(series[0], self._now), [values(s) for s in series])
        self.caption.value = caption(latest)

    def shown_latency(self, model: ModelSnapshot | None) -> TimeChart:
        """The latency chart the model's figures fit: a generate model's token latency, else Triton's."""
        return self.token_latency if model is not None and model.generation is not None else self.latency


    def static_html(self) -> str:
        """The charted model's charts as images, with their caption (what a closed dashboard leaves)."""
        with self._lock:
            if self.picker.value is None:
                return ""
            charts = (self._shown, self.throughput, self.queue)
            images = [image_html(chart.svg(), f"{chart.title} of {self.picker.value}") for chart in charts]
            return (f"<b>{html.escape(self.picker.value)}</b> {self.caption.value}"
                    f"{images_row(images)}")


def caption(model: ModelSnapshot | None) -> str:
    """Queue vs compute split, batch size and where latency came from, for the latest snapshot."""
    if model is None:
        return "<i>model not in the latest snapshot</i>"
    share = model.queue_share
    split = MISSING if share is None else f"queue {share:.0%} │ compute {1 - share:.0%}"
    source = "token figures (TTFT, ITL)" if model.generation is not None else model.latency.source or MISSING
    return html.escape(f"{split} │ avg batch {number(model.avg_batch)} │ latency from {source}")
