"""The console draws at once: a starting screen says what it waits for until the first snapshot comes."""

from __future__ import annotations

import threading

from textual.widgets import Static

from tests.waiting import until
from triton_ge_console.console.app import GEConsoleApp, create_app
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.widgets.models import ModelsTable
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot

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
    finally:
        source.gate.set()  # a poll still waiting would keep its worker thread
