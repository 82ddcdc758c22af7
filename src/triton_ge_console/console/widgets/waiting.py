"""What the dashboard waits for before its first snapshot: drawn with it, so a slow first poll (a server
slow to answer, a loaded host) never leaves it blank; hidden once a snapshot or a failure comes."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import LoadingIndicator, Static


class WaitingNote(Vertical):
    """One line saying what the console waits for, and a spinner."""

    def compose(self) -> ComposeResult:
        """The line (set by `waiting_for`), then the spinner."""
        yield Static("", id="waiting-title")
        yield LoadingIndicator(id="waiting-spinner")

    def waiting_for(self, session: str) -> None:
        """Say whose first figures are awaited."""
        line = f"Connecting to session {session}: waiting for its first figures (health, models, metrics) …"
        self.query_one("#waiting-title", Static).update(Text(line, style="bold"))
