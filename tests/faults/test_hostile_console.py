"""The console, like the CLI, never shows a control character it was handed: it shows it escaped."""

from __future__ import annotations

import pytest

from tests.console.conftest import SIZE, recorded_app, replayed
from tests.console.notices import notified, record_notifications
from tests.console.waiting import until
from tests.faults.test_hostile_names import HOSTILE, SHOWN
from triton_ge_console.sessions.recorded import RecordedController
from triton_ge_console.sessions.source import CommandResult


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
