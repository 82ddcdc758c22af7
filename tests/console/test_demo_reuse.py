"""The demo reuses a running demo session but stops only a server it launched itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from triton_ge_console.console.demo import DEMO_NAME, new_demo_session
from triton_ge_console.session_states import READY, STOPPED
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, effective_state

from .leftovers import stop_leftover_sessions

pytestmark = pytest.mark.server  # every test here starts a tritonserver


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private state dir; whatever session is left running in it is stopped afterwards."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    try:
        yield tmp_path / "state"
    finally:
        stop_leftover_sessions(tmp_path / "state")


def test_quitting_a_demo_that_reused_a_session_leaves_it_running(state_dir: Path) -> None:
    registry = Registry(state_dir / "sessions")
    first = new_demo_session()
    first.start(lambda _line: None, rate_per_s=1.0)
    assert first.launched_here
    second = new_demo_session()
    lines: list[str] = []
    second.start(lines.append, rate_per_s=1.0)
    assert not second.launched_here and any("reusing" in line for line in lines)
    message = second.close(keep=False)
    assert message is not None and "left session" in message
    assert effective_state(registry.load(DEMO_NAME)) == READY
    stopped = first.close(keep=False)
    assert stopped is not None and effective_state(registry.load(DEMO_NAME)) == STOPPED
