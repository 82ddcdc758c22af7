"""The console, like the CLI, never shows a control character it was handed: it shows it escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.console.conftest import DATA, LOG, REPO, SIZE, THRESHOLDS, recorded_app, replayed
from tests.console.notices import notified, record_notifications
from tests.faults.test_hostile_names import HOSTILE, SHOWN, raw_controls
from tests.waiting import until
from triton_ge_console.console.app import create_app
from triton_ge_console.sessions.observe.recorded import RecordedController, RecordedSource
from triton_ge_console.sessions.observe.source import CommandResult


class _HostileController(RecordedController):
    """A controller whose reload fails with a message quoting a hostile name (as a server's might)."""

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        message = f"reload failed: no model '{HOSTILE}'\nat line 2"
        return CommandResult("reload", model, ok=False, message=message)


async def test_a_notification_shows_control_characters_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    record_notifications(monkeypatch)
    app = recorded_app("healthy", _HostileController())
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("r")
        await until(pilot, lambda: notified(app, text="reload failed"))
        (notice,) = notified(app, text="reload failed")
    assert notice.message.startswith(f"reload failed: no model '{SHOWN}'\nat line 2"), notice.message


async def test_the_dashboard_draws_a_hostile_model_name_escaped(tmp_path: Path) -> None:
    """A model folder named with escapes reaches the tables, the detail title and the FAILING banner
    through the server's own reports: each shows it escaped, so the operator's terminal is never written
    a raw control character."""
    lines = (DATA / "failing.jsonl").read_text(encoding="utf-8").splitlines()
    hostile = json.dumps(HOSTILE)[1:-1]  # the name as JSON writes it inside a string
    recording = tmp_path / "hostile.jsonl"
    renamed = "".join(line.replace("llama_model", hostile) + "\n" for line in lines)
    recording.write_text(renamed, encoding="utf-8")
    source = RecordedSource.from_file(recording, log_path=LOG)
    app = create_app(source, interval_s=0.01, repository=REPO, thresholds=THRESHOLDS, max_polls=len(lines))
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        screen = app.export_screenshot()
    assert "evil" in screen
    raw = [screen[max(0, i - 40):i + 10] for i, c in enumerate(screen) if c in raw_controls(c)]
    assert raw == [], "\n".join(map(repr, raw))

