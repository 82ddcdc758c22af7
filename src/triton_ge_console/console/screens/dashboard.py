"""The home screen: header, devices, models table, and the selected model's detail."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Input

from triton_ge_console.console.host import ConsoleHost
from triton_ge_console.console.series import ModelSeriesCache, UtilizationCache
from triton_ge_console.console.widgets.detail import DetailPane, DetailView, ModelDetail
from triton_ge_console.console.widgets.devices import SPARK_WIDTH, DevicesPanel
from triton_ge_console.console.widgets.header import (
    Connection,
    DisconnectedBanner,
    FailingBanner,
    StatusHeader,
)
from triton_ge_console.console.widgets.models import ModelsTable
from triton_ge_console.console.widgets.titles import retitle
from triton_ge_console.console.widgets.waiting import WaitingNote
from triton_ge_console.display import token_latency_legend
from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot
from triton_ge_console.triton_terms import HELD_STATES

CHART_EVERY_S = 5.0  # charts span 15 minutes: redrawing them every 5 s of snapshots loses nothing visible


def chart_slot(taken_at: float) -> int:
    """Which CHART_EVERY_S slot of snapshot time a snapshot falls in: charts redraw when it changes, so
    what they show depends on the snapshots, not on when the console happened to select the model."""
    return math.floor(taken_at / CHART_EVERY_S)
MAX_BUCKET = 10  # snapshots per sparkline cell at most: 30 cells x 10 s = the last 5 minutes at 1 s refresh


def utilization_series(history: SnapshotHistory, device_ids: Sequence[str],
                       cache: UtilizationCache | None = None) -> dict[str, list[float | None]]:
    """Each device's recent utilization averaged into sparkline cells (the cache reads only new snapshots)."""
    cache = cache if cache is not None else UtilizationCache(SPARK_WIDTH, MAX_BUCKET)
    cache.update(history)
    return cache.series(device_ids)


def last_error(model: ModelSnapshot, command_errors: Mapping[str, str]) -> str | None:
    """Why the model is not serving (not ready, or FAILING), else the last failed command, else its
    failure reasons."""
    if (model.failing or model.state not in HELD_STATES) and model.reason:
        return f"FAILING: {model.reason}" if model.failing else model.reason
    if model.name in command_errors:
        return command_errors[model.name]
    if model.failures_by_reason:
        return ", ".join(f"{reason}: {count}" for reason, count in model.failures_by_reason)
    return None


class DashboardScreen(Screen[None]):
    """Redraws from the app's connection state; the table's cursor picks the detail pane's model."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close_filter", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.series = ModelSeriesCache()
        self.utilization = UtilizationCache(SPARK_WIDTH, MAX_BUCKET)
        self._charts_drawn: tuple[str, float] | None = None  # (model, snapshot time) of the last chart draw

    @property
    def console(self) -> ConsoleHost:
        """The app, as far as this screen needs it."""
        return cast(ConsoleHost, self.app)

    # the panels, looked up once: a refresh would otherwise query the DOM for each of them
    @cached_property
    def header(self) -> StatusHeader:
        """The one-line status header."""
        return self.query_one(StatusHeader)

    @cached_property
    def banner(self) -> DisconnectedBanner:
        """The banner shown while the server does not answer."""
        return self.query_one(DisconnectedBanner)

    @cached_property
    def failing_banner(self) -> FailingBanner:
        """The banner naming models that are READY but not serving."""
        return self.query_one(FailingBanner)

    @cached_property
    def devices(self) -> DevicesPanel:
        """The devices box."""
        return self.query_one(DevicesPanel)

    @cached_property
    def table(self) -> ModelsTable:
        """The models table."""
        return self.query_one(ModelsTable)

    @cached_property
    def detail(self) -> DetailPane:
        """The selected model's pane."""
        return self.query_one(DetailPane)

    def compose(self) -> ComposeResult:
        """Header, banner, devices, models (with its filter box), detail, footer."""
        yield StatusHeader(id="status")
        yield DisconnectedBanner(id="banner")
        yield FailingBanner(id="failing-banner")
        yield WaitingNote(id="waiting")
        yield DevicesPanel(id="devices")
        with Vertical(id="models-box"):
            yield ModelsTable(id="models")
            yield Input(placeholder="filter models by name (enter to keep, esc to clear)", id="filter")
        yield DetailPane(id="detail")
        yield Footer()

    def on_mount(self) -> None:
        """Follow the app's connection and selection."""
        table = self.table
        table.thresholds = self.console.options.thresholds
        self.query_one("#filter", Input).display = False
        self._title_models(0)
        self.query_one(WaitingNote).waiting_for(self.console.connection.session)
        self.watch(self.app, "connection", self.redraw)
        self.watch(self.app, "selected_model", self.redraw_detail, init=False)

    def redraw(self, connection: Connection) -> None:
        """Push the newest figures into every panel; dim them when stale."""
        self.header.connection = connection
        self.banner.connection = connection
        models = connection.last_good.models if connection.last_good else ()
        self.failing_banner.models = tuple(m for m in models if m.failing)
        self.set_class(connection.stale or connection.stopped, "-stale")
        self.query_one(WaitingNote).display = (connection.last_good is None and connection.error is None
                                               and not connection.stopped)  # before the first snapshot
        snapshot = connection.last_good
        if snapshot is None:
            return
        history = self.console.source.history
        series = utilization_series(history, [d.id for d in snapshot.devices], self.utilization)
        self.devices.frame = (snapshot, series)
        self.table.models = snapshot.models
        self._title_models(len(snapshot.models))
        self._select_from_cursor()
        self.redraw_detail(self.console.selected_model)

    def _title_models(self, count: int) -> None:
        """The models box title: how many are shown (of how many, under a filter), the filter, the sort."""
        table = self.table
        shown = f"{len(table.row_keys)} of {count}" if table.needle else str(count)
        needle = f" ─ filter '{table.needle}'" if table.needle else " ─ / filter"
        sort = table.sort_key.label
        generating = next((m.generation for m in table.models if m.generation is not None), None)
        legend = "" if generating is None else f" ─ {token_latency_legend(generating.window_s)}"
        retitle(self.query_one("#models-box"), f"Models ({shown}){needle} ─ s sort: {sort}{legend}")

    def _select_from_cursor(self) -> None:
        """Make the model under the cursor the app's selected model."""
        key = self.table.selected_key
        model = key.split("/", 1)[0] if key else None
        if model is not None and self.console.selected_model != model:
            self.console.selected_model = model

    def on_models_table_row_highlighted(self, event: ModelsTable.RowHighlighted) -> None:
        """Cursor moved: follow it."""
        self._select_from_cursor()

    def redraw_detail(self, model_name: str | None) -> None:
        """The selected model's facts; its charts on selection, then every CHART_EVERY_S of snapshots."""
        pane = self.detail
        snapshot = self.console.connection.last_good
        model = snapshot.model(model_name) if snapshot and model_name else None
        if model is None or snapshot is None:
            pane.view = DetailView(None)
            return
        drawn = self._charts_drawn
        selected = drawn is None or drawn[0] != model.name
        due = selected or (drawn is not None and chart_slot(snapshot.taken_at) != chart_slot(drawn[1]))
        if due:
            self._charts_drawn = (model.name, snapshot.taken_at)
        pane.view = DetailView(self._detail(model, due), charts=due)

    def _detail(self, model: ModelSnapshot, with_series: bool) -> ModelDetail:
        """Facts for one model, and its chart series when the charts are due."""
        if not with_series:
            errors = self.console.last_errors
            return ModelDetail(model, (), (), (), (), self._config_summary(model), last_error(model, errors),
                               self._limits(model))
        snapshot = self.console.connection.last_good
        self.series.update(model.name, self.console.source.history, snapshot.taken_at if snapshot else None)
        summary = self._config_summary(model)
        return ModelDetail(
            model=model,
            p50=self.series.series("p50"),
            p99=self.series.series("p99", peak=True),
            inferences=self.series.series("inferences"),
            requests=self.series.series("requests"),
            config_summary=summary,
            last_error=last_error(model, self.console.last_errors),
            limits=self._limits(model),
            ttft=self.series.series("ttft", peak=True),
            itl=self.series.series("itl", peak=True),
            tokens=self.series.series("tokens"),
        )

    def _limits(self, model: ModelSnapshot) -> Mapping[str, float]:
        """The spec's console thresholds for this model (none without a spec)."""
        return self.console.options.thresholds.get(model.name, {})

    def _config_summary(self, model: ModelSnapshot) -> str:
        """The model's config.pbtxt in one line, from the reader the app hands its screens."""
        return self.console.config_summaries.summary(model.name)

    def open_filter(self) -> None:
        """Show and focus the filter box."""
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter as the operator types."""
        if event.input.id == "filter":
            self.table.set_filter(event.value)
            self._after_table_change()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Keep the filter, go back to the table."""
        if event.input.id == "filter":
            event.input.display = False
            self.table.focus()

    def action_close_filter(self) -> None:
        """Clear and hide the filter."""
        box = self.query_one("#filter", Input)
        if box.display:
            box.value = ""
            box.display = False
            self.table.set_filter("")
            self._after_table_change()
            self.table.focus()

    def sort_models(self) -> None:
        """Sort by the next column."""
        sort = self.table.next_sort()
        self._after_table_change()
        self.notify(f"sorted by {sort.label}", timeout=1.5)

    def _after_table_change(self) -> None:
        """Titles and selection follow a filter or sort change."""
        snapshot = self.console.connection.last_good
        self._title_models(len(snapshot.models) if snapshot else 0)
        self._select_from_cursor()
