"""What the console told its user: every App.notify call, recorded per app (no private Textual state read)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import pytest
from textual.app import App
from textual.notifications import SeverityLevel

from triton_ge_console.console.app import GEConsoleApp


@dataclass(frozen=True)
class Notice:
    """One notification as the user saw it."""

    message: str
    title: str
    severity: str


_SHOWN: weakref.WeakKeyDictionary[App[object], list[Notice]] = weakref.WeakKeyDictionary()


def record_notifications(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record every notification a console app shows, through Textual's public notify (thread-safe)."""
    show = GEConsoleApp.notify

    def notify(self: GEConsoleApp, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        _SHOWN.setdefault(self, []).append(Notice(message, title, severity))
        show(self, message, title=title, severity=severity, timeout=timeout, markup=markup)

    monkeypatch.setattr(GEConsoleApp, "notify", notify)


def notified(app: App[object], title: str | None = None, text: str = "") -> list[Notice]:
    """The notifications app showed so far (expired ones too), with this title and containing text."""
    return [n for n in list(_SHOWN.get(app, ())) if (title is None or n.title == title) and text in n.message]


def toasts_shown(app: App[object]) -> list[str]:
    """The text of the toasts on the current screen as the user reads it (run_test(notifications=True))."""
    return [toast.render().plain for toast in app.screen.query("Toast")]
