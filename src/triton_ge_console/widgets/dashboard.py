"""The composite live dashboard: header, device gauges, models table, charts, log tail and load test."""

from __future__ import annotations

import dataclasses
import html
import time
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as w

from triton_ge_console.display import duration, engine_memory_line, memory, percent, restarted_words
from triton_ge_console.session_states import NOT_ANSWERING
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import SessionSource
from triton_ge_console.triton_terms import SERVER_DOWN, SERVER_LIVE, SERVER_READY, host_port
from triton_ge_console.widgets.command_runner import CommandRunner
from triton_ge_console.widgets.devices import DeviceGauges, device_extras
from triton_ge_console.widgets.generation import GenerationPanel
from triton_ge_console.widgets.loadtest import LoadRunner, LoadTestControl, generate_runner, loadgen_runner
from triton_ge_console.widgets.logtail import FilteredLogTail
from triton_ge_console.widgets.model_charts import ModelCharts
from triton_ge_console.widgets.models import COLUMNS, ModelsPanel, cells_for, legend_html, table_lines
from triton_ge_console.widgets.poller import BackgroundPoller

STALE_CLASS = "ge-console-stale"
# the last figures of a server that stopped answering stay on screen, greyed, as the terminal console does
STALE_STYLE = f"<style>.{STALE_CLASS} {{ opacity: 0.45; filter: grayscale(1); }}</style>"


# ServerSnapshot.health -> (label, colour), as the terminal console's header shows it
HEALTH_LOOKS = {SERVER_READY: ("● ready", "green"), SERVER_LIVE: ("● live", "darkorange"),
                SERVER_DOWN: ("○ down", "firebrick"), NOT_ANSWERING: ("○ not answering", "firebrick")}


def header_html(snapshot: ServerSnapshot, interval: float | None = None) -> str:
    """Session, health, version, uptime and endpoints; a red banner when the server is unreadable."""
    health, colour = HEALTH_LOOKS[snapshot.health]
    parts = [f"<b>GE Console</b> ─ session {html.escape(snapshot.session)}",
             html.escape(snapshot.server_name),
             f"<span style='color:{colour}'>{health}</span>"]
    if snapshot.restarts:  # beside health, as the console has it: it serves again after crashing
        parts.append(f"<b style='color:darkorange'>{restarted_words(snapshot.restarts)}</b>")
    parts.append(f"up {duration(snapshot.uptime_s)}")
    if snapshot.endpoints.http_url:
        parts.append(f"http {html.escape(snapshot.endpoints.http_url)}")
    if interval is not None:
        parts.append(f"refresh {interval:g}s")
    line = " ─ ".join(parts)
    if snapshot.error:
        banner = html.escape(snapshot.error)
        line += f"<br><span style='color:white; background:firebrick'>&nbsp;{banner}&nbsp;</span>"
    if snapshot.note:
        line += f"<br><span style='color:darkorange'>{html.escape(snapshot.note)}</span>"
    for worker in snapshot.engine_memory:  # vllm-ascend's NPU memory per worker, as status says it
        line += f"<br><span>{html.escape(engine_memory_line(dataclasses.asdict(worker)))}</span>"
    return line


def static_html(snapshot: ServerSnapshot, closed_at: float, sparklines: Mapping[str, str] | None = None,
                charts: str = "") -> str:
    """The last state as plain HTML (header, devices with their utilization history, models table, the
    charted model's charts as images): what a closed dashboard leaves behind, readable without a kernel."""
    when = time.strftime("%H:%M:%S", time.localtime(closed_at))
    head = table_lines({c: c for c in COLUMNS}, "th")
    rows = "".join(table_lines(cells_for(m)) for m in snapshot.models)
    devices = "".join(
        f"<div style='display:flex; flex-wrap:wrap; align-items:center; gap:0 12px'>"
        f"<span><b>NPU{html.escape(d.id)}</b> <i>{html.escape(d.kind)}</i></span>"
        f"<span>util {percent(d.utilization)}</span>{(sparklines or {}).get(d.id, '')}"
        f"<span>memory {memory(d.memory_used_bytes, d.memory_total_bytes)}</span>"
        f"<span>{html.escape(device_extras(d))}</span></div>"
        for d in snapshot.devices)
    return (f"{header_html(snapshot)}<br><i>dashboard closed at {when}: the last figures it showed</i><br>"
            f"{devices}{legend_html(snapshot.models)}"
            f"<table style='font-size:11px; table-layout:fixed; width:100%'>{head}{rows}</table>"
            f"{charts}")


def frontend_session() -> str | None:
    """The client session (one per open notebook page) of the request the kernel runs now; None outside
    a kernel."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return None
    session = kernel.get_parent("shell").get("header", {}).get("session")
    return str(session) if session else None


def follow(dropdown: w.Dropdown, value: object) -> None:
    """Choose `value` in a dropdown that offers it (and is not already on it)."""
    if value is not None and value in dropdown.options and dropdown.value != value:
        dropdown.value = value


class Dashboard:
    """Everything about one session, refreshed by a background poller; `close()` stops it (idempotent)."""

    def __init__(self, source: SessionSource, interval: float = 1.0, load_runner: LoadRunner | None = None,
                 autostart: bool = True, background: bool = True, history_seconds: float = 300.0,
                 owns_source: bool = False, generate_load_runner: LoadRunner | None = None,
                 thresholds: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.source = source
        self.owns_source = owns_source
        self.header = w.HTML(f"<b>GE Console</b> ─ session {html.escape(source.name)} ─ waiting")
        self.problem = w.HTML("")
        self.devices = DeviceGauges(history_seconds)
        self.models = ModelsPanel(source.controller, CommandRunner(background=background))
        self.generation = GenerationPanel(thresholds)
        self.charts = ModelCharts(history_seconds=history_seconds)
        self.logs = FilteredLogTail(source.log_path)
        self.loadtest = LoadTestControl(load_runner, background=background,
                                        generate_runner=generate_load_runner)
        self.snapshot: ServerSnapshot | None = None
        self.last_good: ServerSnapshot | None = None  # the newest snapshot read without an error
        self.stale = False
        self.poller = BackgroundPoller(source, self.show, interval, on_error=self._report)
        # one model at a time: the charts show the model the load test drives, whichever was chosen last
        self.charts.picker.observe(lambda change: follow(self.loadtest.model, change.new), names="value")
        self.loadtest.model.observe(lambda change: follow(self.charts.picker, change.new), names="value")
        extras = w.Tab([self.loadtest.box, self.logs.box], titles=("load test", "server log"))
        self.views = w.VBox([self.devices.box, self.models.box, self.generation.box, self.charts.box, extras])
        self.box = w.VBox([w.HTML(STALE_STYLE), self.header, self.problem, self.views])
        self.closed = False
        # IPython display handles of where the dashboard is shown, with the page (client session) showing it
        self.displays: list[tuple[Any, str | None]] = []
        if autostart:
            self.start()

    @classmethod
    def for_session(cls, name: str | None = None, interval: float = 1.0,
                    shapes: dict[str, tuple[int, ...]] | None = None, **kwargs: Any) -> Dashboard:
        """A dashboard on a registered session (by name, or the only one), with its load generator."""
        from triton_ge_console.sessions.live import LiveSource
        from triton_ge_console.sessions.observe.thresholds import thresholds_of
        from triton_ge_console.sessions.server.access import token_headers
        from triton_ge_console.sessions.server.registry import Registry

        record = Registry().resolve(name)
        url, protocol = (record.grpc_url, "grpc") if record.grpc_url else (record.http_url, "http")
        address, headers = host_port(url), token_headers(record, protocol)
        runner = loadgen_runner(address, protocol, shapes, headers)
        kwargs.setdefault("generate_load_runner", generate_runner(address, protocol, headers))
        kwargs.setdefault("thresholds", thresholds_of(record))  # the spec's, as the console colours by
        return cls(LiveSource.from_record(record), interval, runner, owns_source=True, **kwargs)

    def start(self) -> None:
        """Start live updates."""
        if not self.closed:
            self.poller.start()

    def refresh(self) -> ServerSnapshot | None:
        """Poll once now, in this thread, and show it."""
        return self.poller.poll_once()

    def show(self, snapshot: ServerSnapshot) -> None:
        """Render one snapshot in every view."""
        history = self.source.history
        if history.latest is not snapshot:
            history.append(snapshot)
        self.header.value = header_html(snapshot, self.poller.interval)
        if snapshot.error is None:
            self.last_good = snapshot
        stale = snapshot.error is not None and self.last_good is not None
        shown = self.last_good if stale and self.last_good is not None else snapshot
        self.stale = stale
        (self.views.add_class if stale else self.views.remove_class)(STALE_CLASS)
        self.devices.update(shown, history)
        self.models.update(shown, server_up=not stale and snapshot.error is None)
        self.generation.update(shown)
        self.charts.update(shown, history)
        self.loadtest.set_models(sorted({m.name for m in shown.models}), set(self.generation.rows))
        follow(self.loadtest.model, self.charts.model)
        self.logs.refresh()
        self.problem.value = ""
        self.snapshot = snapshot  # last: wait_for sees a snapshot only once every view shows it

    def wait_for(self, condition: Callable[[ServerSnapshot], bool], timeout: float = 60.0,
                 what: str = "the condition") -> ServerSnapshot:
        """Block until a shown snapshot satisfies condition (polling inline when no poller runs)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            snapshot = self.snapshot if self.poller.running else self.refresh()
            if snapshot is not None and condition(snapshot):
                return snapshot
            time.sleep(min(self.poller.interval, 0.1))
        raise TimeoutError(f"session {self.source.name}: {what} not seen within {timeout:.0f}s")

    def _report(self, exc: BaseException) -> None:
        """Show a view or poll failure in the widget instead of raising into the kernel."""
        self.problem.value = (f"<span style='color:firebrick'>update failed: "
                              f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</span>")

    def state(self) -> dict[str, Any]:
        """What the dashboard shows, as plain data (for notebooks to print and tests to check)."""
        snap = self.snapshot
        return {
            "session": self.source.name,
            "live": None if snap is None else snap.live,
            "ready": None if snap is None else snap.ready,
            "stale": self.stale,  # the last figures of a silent server, greyed
            "polls": self.poller.polls,
            "models": {f"{row.name}:{row.version}": row.values for row in self.models.rows.values()},
            "buttons": {f"{row.name}:{row.version}": row.enabled for row in self.models.rows.values()},
            "devices": {i: {"utilization": r.utilization_label.value, "memory": r.memory_label.value}
                        for i, r in self.devices.rows.items()},
            "generation": dict(self.generation.rows),  # each generate model's token figures as shown
            "generation_levels": dict(self.generation.levels),  # and those past or near a threshold
            "status": self.models.runner.results[-1].message if self.models.runner.results else None,
        }

    def close(self) -> None:
        """Stop the poller and close the live widgets (and a source it opened), leaving a static copy of
        the last state in their place; the server is left running."""
        if self.closed:
            return
        self.closed = True
        self.poller.close()
        self.models.runner.wait(60)
        self.loadtest.wait(60)
        if self.owns_source:
            self.source.close()
        last = self.snapshot
        if last is None:
            self.box.close()
            return
        live_views = list(self.box.children)
        sparklines = {device_id: row.sparkline_html() for device_id, row in self.devices.rows.items()}
        static = static_html(last, time.time(), sparklines,
                             self.generation.static_html() + self.charts.static_html())
        self.box.children = [w.HTML(static)]  # the last figures stay on screen
        for view in live_views:
            view.close()
        self._leave_html(static)

    def _leave_html(self, static: str) -> None:
        """Replace each displayed dashboard with plain HTML: a saved notebook keeps the last figures,
        readable without a kernel (a widget output saved without its state reopens as "model not
        found")."""
        if not self.displays:
            return
        from IPython.display import HTML, display

        here = frontend_session()
        for handle, session in self.displays:
            if session == here:
                handle.update(HTML(static))
        if any(session != here for _handle, session in self.displays):
            # a page that showed it was closed or reloaded since: JupyterLab routes an update only to the
            # page that ran the display, so the copy goes here, and the dashboard's own cell (restored
            # from the kernel in the page open now) keeps showing it as a widget
            display(HTML(static))
            return
        for view in (*self.box.children, self.box):
            view.close()

    def _ipython_display_(self) -> None:
        """Display the composite widget under a display id, which `close()` updates, noting the page."""
        from IPython.display import display

        handle = display(self.box, display_id=True)
        if handle is not None:
            self.displays.append((handle, frontend_session()))

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Display as the composite widget in Jupyter."""
        return self.box._repr_mimebundle_(**kwargs)
