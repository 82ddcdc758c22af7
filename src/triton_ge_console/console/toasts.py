"""The console's toasts show their text verbatim: it comes from outside (Triton's errors, model names, paths
typed), where square brackets are text, not Textual markup ("expected [1, 3]", a model "m[bold]")."""

from __future__ import annotations

from typing import TypeVar

from textual.app import App
from textual.notifications import SeverityLevel

ReturnT = TypeVar("ReturnT")


class PlainToasts(App[ReturnT]):
    """An app whose every notification, screens' and widgets' included, is plain text."""

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Show a toast; `markup` is ignored (Widget.notify passes Textual's default, True): never markup."""
        del markup
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)
