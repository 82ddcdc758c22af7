"""The fleet app over a registry's running sessions, each member's dashboard with its record's options."""

from __future__ import annotations

from triton_ge_console.console.fleet_app import FleetConsoleApp
from triton_ge_console.console.launch_session import record_options
from triton_ge_console.console.options import ConsoleOptions, FleetOptions
from triton_ge_console.fleet.members import FleetMember, LiveFleet
from triton_ge_console.fleet.status import running_records
from triton_ge_console.sessions.pending import RecordLifecycle
from triton_ge_console.sessions.server.registry import Registry


def live_fleet_app(registry: Registry, interval_s: float) -> tuple[FleetConsoleApp, LiveFleet]:
    """The app and its live fleet (close the fleet when done)."""

    def options_for(member: FleetMember) -> ConsoleOptions:
        assert member.record is not None
        return record_options(member.record, RecordLifecycle(registry, member.record), interval_s)

    live = LiveFleet(running_records(registry))
    return FleetConsoleApp(live, options_for, FleetOptions(interval_s=interval_s, backoff_s=5.0)), live
