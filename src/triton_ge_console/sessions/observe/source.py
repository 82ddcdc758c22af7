"""What the console and the notebooks talk to: a source of snapshots plus a controller for commands.

A live session (sessions.live.LiveSource) and a recorded one (sessions.observe.recorded.RecordedSource) both
satisfy these protocols, so every view can be tested against a recording.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot


@dataclass(frozen=True)
class CommandResult:
    """What a control command did, verified against the server where possible."""

    action: str  # "load" | "unload" | "reload" | "start" | "stop" | "restart" | ...
    target: str  # model name, or the session name for server actions
    ok: bool
    message: str  # one line an operator can read; on failure, Triton's own message
    duration_s: float | None = None


class Controller(Protocol):
    """Commands an operator sends to one session's server."""

    def load(self, model: str, config: str | None = None) -> CommandResult:
        """Load (or reload) a model, optionally with a JSON config override."""
        ...

    def unload(self, model: str) -> CommandResult:
        """Unload a model."""
        ...

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Reload a loaded model; Triton swaps only once the new one is ready."""
        ...


class Pollable(Protocol):
    """What a follower needs of a source: its name and a blocking poll."""

    name: str

    def poll(self) -> ServerSnapshot:
        """Take one snapshot; an unreachable server gives a snapshot with `error` set, never an exception."""
        ...


class SessionSource(Pollable, Protocol):
    """A session as views see it: blocking polls (run them in a worker), history, commands."""

    history: SnapshotHistory

    @property
    def controller(self) -> Controller:
        """Where commands go."""
        ...

    @property
    def log_path(self) -> Path | None:
        """The server log, when this machine has it."""
        ...

    def close(self) -> None:
        """Release connections (never stops a server it did not start)."""
        ...


def commands_disabled(controller: object) -> str | None:
    """Why a controller takes no model commands at all (a vLLM or MindIE server: EngineControl), None when
    it takes them; views check it before offering load, unload or reload."""
    reason = getattr(controller, "disabled_reason", None)
    return reason if isinstance(reason, str) and reason else None


def session_headers(source: object) -> dict[str, str]:
    """The headers the session's own requests carry (its token), so commands pass a restricted server."""
    inner = getattr(source, "inner", None)  # a PendingSource delegates to its bound live source
    headers = getattr(inner if inner is not None else source, "request_headers", None)
    return dict(headers) if isinstance(headers, dict) else {}
