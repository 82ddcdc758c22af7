"""What the console waits for before its first snapshot: drawn at once, so a slow first poll (or a server
slow to answer) never leaves the terminal blank; the app dismisses it when the first snapshot comes."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import LoadingIndicator, Static


class WaitingScreen(ModalScreen[None]):
    """A spinner and one line saying what the console waits for."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q,escape", "app.quit", "quit")]

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what
        self.done = False

    def compose(self) -> ComposeResult:
        """The line, then the spinner."""
        with Vertical(id="waiting-box"):
            yield Static(Text(self.what, style="bold"), id="waiting-title")
            yield LoadingIndicator(id="waiting-spinner")

    def finish(self) -> None:
        """Go now when in front, else as soon as the screen over it (help, the palette) closes."""
        self.done = True
        if self.app.screen is self:
            self.dismiss()

    def on_screen_resume(self) -> None:
        """Back in front after the screen over it closed: go, if the wait is over."""
        if self.done:
            self.dismiss()
