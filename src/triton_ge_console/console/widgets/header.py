"""The one-line status header and the disconnected banner."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from triton_ge_console.console import format as fmt
from triton_ge_console.console.session_link import STARTING
from triton_ge_console.console.widgets.textlines import TextLines
from triton_ge_console.sessions.snapshot import ServerSnapshot


@dataclass(frozen=True)
class Connection:
    """What the console knows about reaching the server: the last good snapshot and any current failure."""

    session: str
    interval_s: float
    last_good: ServerSnapshot | None = None
    error: str | None = None
    failed_polls: int = 0
    retry_in_s: float | None = None
    stopped: bool = False  # the operator stopped the server on purpose
    diagnosis: str | None = None  # what happened to the server, when the console knows (it crashed, ...)

    @property
    def stale(self) -> bool:
        """Whether what is on screen is older than the last poll."""
        return self.error is not None


def health_text(snapshot: ServerSnapshot | None, connection: Connection) -> Text:
    """● ready / ● live / ● down, coloured."""
    if connection.stopped:
        return Text("■ stopped", style="bold yellow")
    if connection.error == STARTING:
        return Text("◌ starting", style="bold yellow")
    if connection.stale or snapshot is None:
        return Text("● down", style="bold red")
    if snapshot.ready:
        return Text("● ready", style="bold green")
    return Text("● live", style="bold yellow") if snapshot.live else Text("● down", style="bold red")


def header_text(connection: Connection) -> Text:
    """The header line built only from snapshot fields (no wall clock), so recordings render the same."""
    snap = connection.last_good
    version = snap.version if snap and snap.version else fmt.MISSING
    uptime = fmt.age(snap.uptime_s if snap else None)  # minutes, not seconds: no repaint every refresh
    http = fmt.url_hostport(snap.endpoints.http_url if snap else None)
    grpc = fmt.url_hostport(snap.endpoints.grpc_url if snap else None)
    sep = Text(" ─ ", style="dim")
    parts: list[Text | str] = [
        Text("GE Console", style="bold"), sep, f"session {connection.session}", sep, f"Triton {version}", sep,
        health_text(snap, connection), sep, f"up {uptime}", sep, f"http {http}", sep,
        f"refresh {connection.interval_s:g}s", sep, f"grpc {grpc}",
    ]
    line = Text(" ")
    for part in parts:
        line.append(part if isinstance(part, Text) else Text(part))
    if connection.stale:
        line.stylize("dim", 1)
    return line


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


class StatusHeader(TextLines):
    """Session, version, health, uptime, endpoints, refresh interval."""

    connection: reactive[Connection | None] = reactive(None, repaint=False)

    def watch_connection(self, connection: Connection | None) -> None:
        """Redraw the line."""
        if connection is not None:
            self.show(header_text(connection))  # always one line


class DisconnectedBanner(Static):
    """Shown only while the server is not answering (or stopped)."""

    connection: reactive[Connection | None] = reactive(None, repaint=False)

    def watch_connection(self, connection: Connection | None) -> None:
        """Show the reason, or hide when reconnected."""
        visible = connection is not None and (connection.stale or connection.stopped)
        self.display = visible
        if visible and connection is not None:
            self.update(banner_text(connection))
