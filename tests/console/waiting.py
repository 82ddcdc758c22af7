"""Shared waits for console tests: poll the UI until a condition holds, instead of sleeping."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.server.registry import STOPPED, Registry, effective_state


async def until(pilot: Pilot[None], check: Callable[[], object], timeout: float = 20.0, what: str = "",
                step: float = 0.05) -> None:
    """Let the app run until check() is true; fail naming `what` after `timeout` seconds."""
    waited = 0.0
    while not check() and waited < timeout:
        await pilot.pause(step)
        waited += step
    assert check(), f"not within {timeout}s: {what or 'condition'}"


def stop_leftover_sessions(state_dir: Path) -> list[str]:
    """Stop every launched session still running in a state dir, so a failed test leaves no server."""
    registry = Registry(state_dir / "sessions")
    stopped = []
    for record in registry.list():
        if not record.attached and effective_state(record) != STOPPED:
            down(record, registry)
            stopped.append(record.name)
    return stopped
