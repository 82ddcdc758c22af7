"""The one-line status header and the banners: disconnected, and models failing."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from triton_ge_console.console import format as fmt
from triton_ge_console.console.connection import Connection
from triton_ge_console.display import MISSING, age, engine_memory_short, printable, restarted_words
from triton_ge_console.sessions.observe.snapshot import STARTING_MESSAGE, ModelSnapshot, ServerSnapshot

HEALTH_LOOKS = {  # health -> its mark and colour in the header
    "stopped": ("■ stopped", "bold yellow"),
    "starting": ("◌ starting", "bold yellow"),
    "down": ("● down", "bold red"),
    "ready": ("● ready", "bold green"),
    "live": ("● live", "bold yellow"),
    "not answering": ("● not answering", "bold red"),
}


def health_of(snapshot: ServerSnapshot | None, connection: Connection) -> str:
    """stopped / starting / down / not answering / ready / live (a HEALTH_LOOKS key)."""
    if connection.stopped:
        return "stopped"
    if connection.error == STARTING_MESSAGE:
        return "starting"
    if connection.stale and connection.no_reply:
        return "not answering"
    if connection.stale or snapshot is None:
        return "down"
    return snapshot.health


class HeaderFacts(NamedTuple):
    """What the header line shows, as plain values: equal facts draw the same line."""

    session: str
    server: str  # "Triton 2.51.0", "vLLM", "MindIE"
    health: str
    uptime: str
    http: str
    grpc: str
    interval_s: float
    stale: bool
    width: int | None = None  # the terminal's columns (None: no limit)
    restarts: int = 0  # how often the supervisor restarted the server after a crash
    npu_memory: tuple[str, ...] = ()  # vllm-ascend's NPU memory per worker, in words (none: not reported)


def header_facts(connection: Connection, width: int | None = None) -> HeaderFacts:
    """The header's facts, built only from snapshot fields (no wall clock), so recordings render the same."""
    snap = connection.last_good
    return HeaderFacts(
        session=connection.session,
        server=snap.server_name if snap and (snap.version or snap.engine) else f"Triton {MISSING}",
        health=health_of(snap, connection),
        uptime=age(snap.uptime_s if snap else None),  # minutes, not seconds: no repaint every refresh
        http=fmt.url_hostport(snap.endpoints.http_url if snap else None),
        grpc=fmt.url_hostport(snap.endpoints.grpc_url if snap else None),
        interval_s=connection.interval_s,
        stale=connection.stale,
        width=width,
        restarts=snap.restarts or 0 if snap else 0,
        npu_memory=tuple(engine_memory_short(dataclasses.asdict(worker))
                         for worker in (snap.engine_memory if snap else ())),
    )


# left out in this order while the line is wider than the terminal
DROPPABLE = ("title", "grpc", "refresh", "npu memory")


def header_line(facts: HeaderFacts) -> Text:
    """The header line for these facts, dimmed when stale; on a narrow terminal the least telling parts go."""
    # beside health: a server that serves again after crashing says so (its supervisor restarted it)
    restarted = {"restarts": Text(restarted_words(facts.restarts), style="bold yellow")
                 } if facts.restarts else {}
    parts = {
        "title": Text("GE Console", style="bold"), "session": Text(f"session {facts.session}"),
        "version": Text(facts.server), "health": Text(*HEALTH_LOOKS[facts.health]), **restarted,
        "uptime": Text(f"up {facts.uptime}"), "http": Text(f"http {facts.http}"),
        "refresh": Text(f"refresh {facts.interval_s:g}s"), "grpc": Text(f"grpc {facts.grpc}"),
    }
    if facts.npu_memory:
        parts["npu memory"] = Text(", ".join(facts.npu_memory))
    for dropped in range(len(DROPPABLE) + 1):
        line = _joined([part for name, part in parts.items() if name not in DROPPABLE[:dropped]], facts.stale)
        if facts.width is None or line.cell_len <= facts.width:
            break
    return line


def _joined(parts: list[Text], stale: bool) -> Text:
    """Parts separated by dim dashes after a space, all dimmed when stale."""
    line = Text(" ")
    for index, part in enumerate(parts):
        if index:
            line.append(" ─ ", style="dim")
        line.append(part)
    if stale:
        line.stylize("dim", 1)
    return line


def header_text(connection: Connection) -> Text:
    """The header line for a connection."""
    return header_line(header_facts(connection))


def banner_text(connection: Connection) -> Text:
    """Why the numbers are stale and when the next attempt is."""
    if connection.stopped:
        return Text(" Server stopped. Start it from the command palette (ctrl+p → start).")
    retry = "" if connection.retry_in_s is None else f" — reconnecting in {connection.retry_in_s:g}s"
    attempts = f" (attempt {connection.failed_polls})" if connection.failed_polls else ""
    text = Text(f" ⚠ Server not answering: {connection.error}{retry}{attempts}. Figures shown are stale.")
    if connection.diagnosis:
        text.append(f"\n   {connection.diagnosis}")
    return text


class StatusHeader(Static):
    """Session, version, health, uptime, endpoints, refresh interval."""

    connection: reactive[Connection | None] = reactive(None, repaint=False)
    facts: reactive[HeaderFacts | None] = reactive(None, repaint=False)

    def watch_connection(self, connection: Connection | None) -> None:
        """Take the connection's facts: most refreshes change none of them."""
        if connection is not None:
            self.facts = header_facts(connection, self.size.width or None)

    def on_resize(self) -> None:
        """Fit the line to the new width at once, not at the next poll."""
        self.watch_connection(self.connection)

    def watch_facts(self, facts: HeaderFacts | None) -> None:
        """Redraw the line (called only when a fact changed)."""
        if facts is not None:
            self.update(header_line(facts), layout=False)  # always one line: no layout pass


class DisconnectedBanner(Static):
    """Shown only while the server is not answering (or stopped)."""

    connection: reactive[Connection | None] = reactive(None, repaint=False)

    def watch_connection(self, connection: Connection | None) -> None:
        """Show the reason, or hide when reconnected."""
        visible = connection is not None and (connection.stale or connection.stopped)
        self.display = visible
        if visible and connection is not None:
            self.update(banner_text(connection))


def failing_text(models: tuple[ModelSnapshot, ...]) -> Text | None:
    """One line per FAILING model and what recovers it; None when every model serves."""
    failing = [m for m in models if m.failing]
    if not failing:
        return None
    text = Text()
    for index, model in enumerate(failing):
        line = printable(f" ✗ {model.name} v{model.version} FAILING: {model.reason}")
        text.append(("\n" if index else "") + line)
    text.append(" — select it and press r to reload")
    return text


class FailingBanner(Static):
    """Shown while a model is READY in Triton's index but not serving (see `sessions.observe.health`)."""

    models: reactive[tuple[ModelSnapshot, ...]] = reactive((), repaint=False)

    def watch_models(self, models: tuple[ModelSnapshot, ...]) -> None:
        """Name the failing models, or hide."""
        text = failing_text(models)
        self.display = text is not None
        if text is not None:
            self.update(text)
