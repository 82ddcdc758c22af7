"""Console tests stop what they launched, even when they fail."""

from __future__ import annotations

from pathlib import Path

from triton_ge_console.session_states import STOPPED
from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.server.registry import Registry, effective_state


def stop_leftover_sessions(state_dir: Path) -> list[str]:
    """Stop every launched session still running in a state dir, so a failed test leaves no server."""
    registry = Registry(state_dir / "sessions")
    stopped = []
    for record in registry.list():
        if not record.attached and effective_state(record) != STOPPED:
            down(record, registry)
            stopped.append(record.name)
    return stopped
