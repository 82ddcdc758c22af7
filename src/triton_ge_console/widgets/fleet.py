"""The fleet in a notebook: one row per server, each model across the servers, a rolling reload button;
refreshed by one background follower over every server (the same rows as `status --all` and the fleet
screen)."""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as w

from triton_ge_console.display import MISSING, memory, number, percent
from triton_ge_console.fleet.figures import FleetFigures
from triton_ge_console.fleet.members import FleetSource
from triton_ge_console.fleet.models import FleetModelRow, token_texts, versions_text
from triton_ge_console.fleet.rolling import RollingResult
from triton_ge_console.fleet.status import NO_ANSWER, FleetRow
from triton_ge_console.session_states import NOT_ANSWERING
from triton_ge_console.sessions.observe.follow import Follower
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.triton_terms import SERVER_LIVE, SERVER_READY, SERVER_UNREACHABLE

SERVER_COLUMNS = ("NAME", "WHERE", "HEALTH", "SERVER", "MODELS r/f/t", "REQ/S", "P99 ms", "NPU mean",
                  "NPU max", "NPU memory")
MODEL_COLUMNS = ("MODEL", "REPLICAS", "REQ/S", "WORST P99 ms", "RUN/WAIT", "TTFT/ITL p99 ms", "TOK/S", "KV",
                 "VERSIONS")
HEALTH_COLOURS = {SERVER_READY: "green", SERVER_LIVE: "darkorange", SERVER_UNREACHABLE: "firebrick",
                  NOT_ANSWERING: "firebrick", NO_ANSWER: "firebrick"}


def server_values(row: FleetRow) -> dict[str, str]:
    """A server's row as column -> text; a missing figure reads as the missing mark."""
    models = "/".join(number(n) for n in (row.models_ready, row.models_failing, row.models_total))
    values = (row.name, row.where, row.health, row.server or MISSING, models, number(row.requests_per_s),
              number(row.worst_p99_ms, 2), percent(row.npu_util_mean), percent(row.npu_util_max),
              memory(row.npu_memory_used_bytes, row.npu_memory_total_bytes))
    return dict(zip(SERVER_COLUMNS, values, strict=True))


def model_values(row: FleetModelRow) -> dict[str, str]:
    """A model's row across the fleet as column -> text."""
    values = (row.name, f"{row.replicas}/{row.servers}", number(row.requests_per_s),
              number(row.worst_p99_ms, 2), *token_texts(row), versions_text(row))
    return dict(zip(MODEL_COLUMNS, values, strict=True))


def table_html(columns: Sequence[str], rows: Sequence[dict[str, str]],
               styles: Sequence[dict[str, str]]) -> str:
    """A monospace HTML table; `styles` gives a cell's CSS by column, row by row."""
    head = "".join(f"<th style='padding:0 8px; text-align:left'>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td style='padding:0 8px; {style.get(c, '')}'>{html.escape(row[c])}</td>"
                         for c in columns) + "</tr>"
        for row, style in zip(rows, styles, strict=True))
    return f"<table style='font-family:monospace'><tr>{head}</tr>{body}</table>"


def servers_html(rows: Sequence[FleetRow]) -> str:
    """The servers table, health coloured, failing models in red."""
    styles = [{"HEALTH": f"color:{HEALTH_COLOURS.get(r.health, 'grey')}; font-weight:bold",
               "MODELS r/f/t": "color:firebrick" if r.models_failing else ""} for r in rows]
    return table_html(SERVER_COLUMNS, [server_values(r) for r in rows], styles)


def models_html(rows: Sequence[FleetModelRow]) -> str:
    """The models-across-servers table; missing replicas and differing versions stand out."""
    styles = [{"REPLICAS": "" if r.replicas == r.servers else "color:firebrick",
               "VERSIONS": "color:darkorange; font-weight:bold" if r.versions_differ else ""} for r in rows]
    return table_html(MODEL_COLUMNS, [model_values(r) for r in rows], styles)


def roll_html(result: RollingResult) -> str:
    """How a rolling reload ended and who serves which versions now."""
    lines = [html.escape(line) for line in result.server_lines()]
    colour, verdict = ("green", "done") if result.ok else ("firebrick", "stopped at the first failure")
    return (f"<span style='color:{colour}'><b>{html.escape(result.model)}</b> {verdict}</span><br>"
            + "<br>".join(lines))


class FleetDashboard:
    """Every server of a fleet, refreshed by a background follower; `close()` stops it (idempotent)."""

    def __init__(self, fleet: FleetSource, interval: float = 1.0, autostart: bool = True,
                 background: bool = True, max_workers: int = 8, owns_fleet: bool = False) -> None:
        if interval <= 0:
            raise ValueError(f"poll interval must be > 0 seconds, got {interval}")
        self.fleet = fleet
        self.interval = interval
        self.max_workers = max_workers
        self.background = background
        self.owns_fleet = owns_fleet
        self.figures = FleetFigures(fleet.members)
        self.header = w.HTML(f"<b>GE Console</b> ─ fleet of {len(fleet.members)} servers ─ waiting")
        self.servers_table = w.HTML(servers_html(self.figures.rows))
        self.models_table = w.HTML(models_html(()))
        self.picker = w.Dropdown(options=[], description="model")
        self.roll_button = w.Button(description="rolling reload", button_style="warning",
                                    tooltip="reload the model on one server at a time, stopping at a failure")
        self.roll_status = w.HTML("")
        self.roll_button.on_click(lambda _button: self.roll())
        self.last_roll: RollingResult | None = None
        roll_box = w.VBox([w.HBox([self.picker, self.roll_button]), self.roll_status])
        self.box = w.VBox([self.header, self.servers_table, w.HTML("<b>Models across servers</b>"),
                           self.models_table, roll_box])
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._roller: threading.Thread | None = None
        self.closed = False
        if autostart:
            self.start()

    @classmethod
    def for_fleet(cls, interval: float = 1.0, **kwargs: Any) -> FleetDashboard:
        """Every running session of the registry (launched, attached, found in Kubernetes)."""
        from triton_ge_console.fleet.members import LiveFleet
        from triton_ge_console.fleet.status import running_records
        from triton_ge_console.sessions.server.registry import Registry

        records = running_records(Registry())
        if not records:
            raise ValueError("no running sessions (start one with: ge-console up SPEC)")
        return cls(LiveFleet(records), interval, owns_fleet=True, **kwargs)

    def _follower(self, max_polls: int | None) -> Follower:
        """One follower over every member's source."""
        return Follower([m.source for m in self.fleet.members], interval_s=self.interval,
                             backoff_s=max(5.0, self.interval), max_workers=self.max_workers,
                             max_polls=max_polls)

    def start(self) -> None:
        """Follow every server in the background (a no-op when already following or closed)."""
        if self.closed or (self._thread is not None and self._thread.is_alive()):
            return
        self._stop.clear()
        follower = self._follower(None)
        self._thread = threading.Thread(target=follower.run, args=(self.show, self._stop),
                                        name="ge-fleet-dashboard", daemon=True)
        self._thread.start()

    def refresh(self) -> None:
        """Poll every server once now, concurrently, in this thread, and show each answer as it comes."""
        self._follower(1).run(self.show, threading.Event())

    def show(self, member: str, snapshot: ServerSnapshot) -> None:
        """One member's snapshot into its row, the models across servers, the model picker."""
        with self._lock:  # the follower's pool delivers from several threads
            self.figures.take(member, snapshot)
            rows, models = self.figures.rows, self.figures.models
        self.header.value = self._header(rows)
        self._set(self.servers_table, servers_html(rows))
        self._set(self.models_table, models_html(models))
        names = [m.name for m in models]
        if list(self.picker.options) != names:
            self.picker.options = names

    @staticmethod
    def _set(widget: w.HTML, value: str) -> None:
        """Send only a changed table to the front end."""
        if widget.value != value:
            widget.value = value

    def _header(self, rows: Sequence[FleetRow]) -> str:
        """How many servers, how many in each health."""
        counts: dict[str, int] = {}
        for row in rows:
            counts[row.health] = counts.get(row.health, 0) + 1
        parts = [f"<span style='color:{HEALTH_COLOURS.get(h, 'grey')}'>{n} {html.escape(h)}</span>"
                 for h, n in sorted(counts.items())]
        return (f"<b>GE Console</b> ─ fleet of {len(rows)} servers ─ " + " ─ ".join(parts)
                + f" ─ refresh {self.interval:g}s")

    def roll(self, model: str | None = None) -> None:
        """Rolling reload of the picked model (in the background unless built with background=False)."""
        chosen = model or self.picker.value
        if not chosen:
            self.roll_status.value = "<span style='color:firebrick'>pick a model first</span>"
            return
        if self._roller is not None and self._roller.is_alive():
            self.roll_status.value += "<br>a rolling reload is already under way"
            return
        self.roll_button.disabled = True
        self.roll_status.value = f"rolling reload of {html.escape(chosen)}: one server at a time…"
        if not self.background:
            self._roll(chosen)
            return
        self._roller = threading.Thread(target=self._roll, args=(chosen,), name="ge-fleet-roll", daemon=True)
        self._roller.start()

    def _roll(self, model: str) -> None:
        """The blocking roll, each server's step shown as it happens; errors show, never raise."""
        def say(line: str) -> None:
            """One server's step, as it happens."""
            self.roll_status.value += f"<br>{html.escape(line)}"

        try:
            self.last_roll = self.fleet.roll(model, say)
            self.roll_status.value = roll_html(self.last_roll)
        except Exception as exc:  # the widget reports; the kernel keeps running
            self.roll_status.value = (f"<span style='color:firebrick'>rolling reload failed: "
                                      f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</span>")
        finally:
            self.roll_button.disabled = False

    def wait_for(self, condition: Callable[[Sequence[FleetRow]], bool], timeout: float = 60.0,
                 what: str = "the condition") -> tuple[FleetRow, ...]:
        """Block until the shown rows satisfy condition (polling inline when not following)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._thread is None or not self._thread.is_alive():
                self.refresh()
            if condition(self.figures.rows):
                return self.figures.rows
            time.sleep(min(self.interval, 0.1))
        raise TimeoutError(f"fleet: {what} not seen within {timeout:.0f}s")

    def state(self) -> dict[str, Any]:
        """What the dashboard shows, as plain data (for notebooks to print and tests to check)."""
        return {
            "servers": {row.name: server_values(row) for row in self.figures.rows},
            "models": {row.name: model_values(row) for row in self.figures.models},
            "polls": dict(self.figures.polls),
            "roll": None if self.last_roll is None else
            {s.session: (s.outcome, s.ready_versions) for s in self.last_roll.servers},
        }

    def close(self, timeout: float = 10.0) -> None:
        """Stop following (and close a fleet it opened), leaving the last tables in place; servers keep
        running."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        for thread in (self._thread, self._roller):
            if thread is not None:
                thread.join(timeout)
        if self.owns_fleet:
            self.fleet.close()
        when = time.strftime("%H:%M:%S", time.localtime())
        closed = w.HTML(f"<i>fleet dashboard closed at {when}: its last figures</i>")
        self.box.children = [self.header, closed, self.servers_table, self.models_table, self.roll_status]

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Display as the composite widget in Jupyter."""
        return self.box._repr_mimebundle_(**kwargs)
