"""What the console is given besides its source: repository, thresholds, server lifecycle, load tester."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from triton_ge_console.sessions.observe.source import CommandResult


class ServerLifecycle(Protocol):
    """Start/stop of the session's server, when the console may control it."""

    def start(self, env: Mapping[str, str]) -> CommandResult:
        """Start the server with extra environment (diagnostics); blocks until live."""
        ...

    def stop(self) -> CommandResult:
        """Stop the server and everything in its process group."""
        ...

    def diagnose(self) -> str | None:
        """Why the server stopped answering (it exited, with what code and log cause), if known."""
        ...


@dataclass(frozen=True)
class ConsoleOptions:
    """Everything the app needs besides the session source."""

    interval_s: float = 1.0
    max_backoff_s: float = 10.0
    repository: Path | None = None
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    server: ServerLifecycle | None = None
    max_polls: int | None = None  # stop polling after this many (recordings in tests)
    diagnostics_dir: Path | None = None
    startup: Callable[[Callable[[str], None]], object] | None = None  # launches the server, with progress
    locate_repository: Callable[[], Path | None] | None = None  # when only known after launch
    reload_changed: Callable[[], list[CommandResult]] | None = None  # the session's own change detection


@dataclass(frozen=True)
class FleetOptions:
    """How the fleet is polled."""

    interval_s: float = 1.0
    backoff_s: float = 5.0  # a member that did not answer is asked again after this long
    max_workers: int = 8
    max_polls: int | None = None  # per member (recordings in tests)
    rescan_s: float | None = None  # how often the fleet's members are looked up again (None: never)
