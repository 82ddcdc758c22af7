"""What screens and the palette may ask of the app that hosts them: protocols, so they never import the
app (which imports them) and each screen names the little it needs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from triton_ge_console.console.connection import Connection
from triton_ge_console.console.options import ConsoleOptions, FleetOptions
from triton_ge_console.fleet.models import FleetModelRow
from triton_ge_console.fleet.status import FleetRow
from triton_ge_console.repository.inventory import ConfigSummaries
from triton_ge_console.sessions.observe.source import SessionSource


class ActionRunner(Protocol):
    """Runs a registered action through the app's dispatcher (destructive ones ask first)."""

    def action_run(self, action_id: str) -> None:
        """Run the registered action with this id."""
        ...


class ConsoleHost(ActionRunner, Protocol):
    """The single-server app as its screens see it: the connection state, the selection, the session."""

    connection: Connection
    selected_model: str | None
    source: SessionSource
    options: ConsoleOptions
    last_errors: Mapping[str, str]
    config_summaries: ConfigSummaries  # each model's config.pbtxt in one line (the screen reads no file)

    def repository_path(self) -> Path | None:
        """The session's repository, when known."""
        ...

    def running_line(self) -> str:
        """The commands under way for a while, and for how long ("" when none)."""
        ...

    def run_command(self, verb: str, model: str) -> None:
        """Send one controller command (load, unload, reload) to a model."""
        ...


class FleetHost(ActionRunner, Protocol):
    """The fleet app as the fleet screens see it: its rows and options; closing a member's dashboard."""

    fleet_rows: tuple[FleetRow, ...]
    fleet_models: tuple[FleetModelRow, ...]
    fleet_options: FleetOptions

    def close_member(self) -> None:
        """Back from a member's dashboard to the fleet screen."""
        ...
