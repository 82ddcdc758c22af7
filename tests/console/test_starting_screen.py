"""The console draws at once: the dashboard says what it waits for until the first snapshot comes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from textual.widgets import Static

from tests.console.test_terminal_lifeline import ALT_SCREEN_ON, drain_until, in_a_terminal
from tests.waiting import until
from triton_ge_console.console.app import GEConsoleApp, create_app
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.widgets.models import ModelsTable
from triton_ge_console.console.widgets.waiting import WaitingNote
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.server.process import free_port
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

from .conftest import DATA, LOG, SIZE, replayed


class SlowSource(RecordedSource):
    """A recording whose first poll waits until the test lets it go (a server slow to answer)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.gate = threading.Event()
        self.answered = 0

    def poll(self) -> ServerSnapshot:
        self.gate.wait(60)
        snapshot = super().poll()
        self.answered += 1
        return snapshot


def _shown(app: GEConsoleApp) -> str:
    """The text of every Static on the screen in front."""
    return " ".join(str(static.render()) for static in app.screen.query(Static))


async def test_the_console_draws_a_starting_screen_before_its_first_snapshot() -> None:
    snapshots = RecordedSource.from_file(DATA / "healthy.jsonl")._snapshots
    source = SlowSource(snapshots, log_path=LOG)
    app = create_app(source, interval_s=0.01, max_polls=len(snapshots))
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "waiting for its first figures" in _shown(app),
                        what="a starting screen saying what it waits for")
            assert source.answered == 0  # drawn before the source's first snapshot
            assert f"session {source.name}" in _shown(app)
            source.gate.set()
            await replayed(pilot)
            assert isinstance(app.screen, DashboardScreen)
            assert app.screen.query_one(ModelsTable).row_keys
            assert not app.screen.query_one(WaitingNote).display
    finally:
        source.gate.set()  # a poll still waiting would keep its worker thread


def test_the_console_says_what_it_opens_before_it_loads_and_draws(tmp_path: Path) -> None:
    """Its imports take seconds on a loaded host: a line on the terminal says what is coming before then."""
    state = tmp_path / "state"
    Registry(state / "sessions").save(SessionRecord(
        name="ghost", pid=None, started_at=time.time(), http_url=f"http://127.0.0.1:{free_port()}",
        grpc_url=None, metrics_url=None, repository=None, spec=None, backend_dir=None, log_path=None,
        token_ref=None, attached=True, session_dir=None, state="ready"))
    seen = bytearray()
    with in_a_terminal(state, "console", "--session", "ghost") as terminal:
        assert drain_until(terminal, lambda: ALT_SCREEN_ON in seen, 120.0, seen), bytes(seen)
    before = bytes(seen).split(ALT_SCREEN_ON, 1)[0].decode(errors="replace")
    assert "opening the console on session 'ghost' …" in before
