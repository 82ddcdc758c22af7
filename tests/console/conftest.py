"""Console test helpers: recordings under data/, and waiting for an app to take its polls."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from triton_ge_console.console.app import GEConsoleApp, create_app
from triton_ge_console.sessions.observe.recorded import RecordedController, RecordedSource

from .notices import record_notifications

DATA = Path(__file__).resolve().parent / "data"
REPO = DATA / "repo"
LOG = DATA / "server.log"
THRESHOLDS = {"llama_model": {"queue_depth": 4.0, "p99_ms": 50.0},
              "bert_model": {"p99_ms": 6.0, "timed_out": 2.0}}
SIZE = (160, 45)


@pytest.fixture(autouse=True)
def _notifications_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every console test can read what its app notified (tests/console/notices.py)."""
    record_notifications(monkeypatch)


def recorded_app(name: str, controller: RecordedController | None = None,
                 repository: Path | None = REPO) -> GEConsoleApp:
    """An app replaying data/<name>.jsonl once, fast, with the test repository and log."""
    source = RecordedSource.from_file(DATA / f"{name}.jsonl", log_path=LOG, controller=controller)
    count = len((DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines())
    return create_app(source, interval_s=0.01, repository=repository, thresholds=THRESHOLDS, max_polls=count)


async def replayed(pilot: Pilot[None], timeout: float = 30.0) -> None:
    """Wait until the app has taken every recorded poll and settled."""
    app = pilot.app
    assert isinstance(app, GEConsoleApp)
    limit = app.options.max_polls or 1
    waited = 0.0
    while app.polls_done < limit and waited < timeout:
        await pilot.pause(0.02)
        waited += 0.02
    assert app.polls_done >= limit, f"only {app.polls_done}/{limit} polls after {timeout}s"
    await pilot.pause()


def rounded(series: dict[str, list[float | None]], digits: int = 9) -> dict[str, list[float | None]]:
    """Sparkline cells to `digits` places: running totals and a rescan differ in the last bits."""
    return {key: [None if value is None else round(value, digits) for value in cells]
            for key, cells in series.items()}
