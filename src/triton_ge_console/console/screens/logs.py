"""The server log: incremental tail, level filter, search, GE failures highlighted with what to do next."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Input, RichLog, Static

from triton_ge_console.console.format import short_path
from triton_ge_console.sessions.server.server_log import LogLine, LogTail, matches

KEEP_LINES = 5000
LEVELS: tuple[str | None, ...] = (None, "W", "E")
LEVEL_NAMES = {None: "all", "W": "warnings+", "E": "errors+"}
LEVEL_STYLES = {"W": "yellow", "E": "bold red", "F": "bold white on red"}


def render_line(line: LogLine) -> list[Text]:
    """A log line, styled by level; a GE failure gets a second line saying what to do next."""
    if line.failure is None:
        return [Text(line.text, style=LEVEL_STYLES.get(line.level or "", ""))]
    text = Text(line.text, style="bold red")
    text.highlight_words([line.failure.marker], style="bold white on red")
    hint = Text(f"  ↳ {line.failure.title}: {line.failure.advice}", style="bold yellow")
    return [text, hint]


class LogsScreen(Screen[None]):
    """Shows what the log reader it is handed reads, twice a second (the screen opens no file)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back"),
        Binding("f", "cycle_level", "level"),
        Binding("slash", "search", "search", key_display="/"),
    ]

    level: reactive[str | None] = reactive(None, init=False)
    search: reactive[str] = reactive("", init=False)

    def __init__(self, tail: LogTail) -> None:
        super().__init__()
        self.tail = tail
        self.kept: list[LogLine] = []

    def compose(self) -> ComposeResult:
        """Title, failures summary, the log, a search box, footer."""
        yield Static(id="logs-title")
        yield Static(id="logs-failures")
        yield RichLog(id="log-view", max_lines=KEEP_LINES, wrap=True, auto_scroll=True)
        yield Input(placeholder="search the log (enter to keep, esc to close)", id="log-search")
        yield Footer()

    def on_mount(self) -> None:
        """Read the tail and keep reading what is appended."""
        self.query_one("#log-search", Input).display = False
        self.read_more()
        self.set_interval(0.5, self.read_more)
        self.query_one(RichLog).focus()

    def read_more(self) -> None:
        """Append new lines that pass the filters."""
        fresh = self.tail.read_new()
        if not fresh and self.kept:
            return
        self.kept = (self.kept + fresh)[-KEEP_LINES:]
        view = self.query_one(RichLog)
        for line in fresh:
            if matches(line, self.level, self.search):
                for text in render_line(line):
                    view.write(text)
        self._titles()

    def _redraw_all(self) -> None:
        """Re-render everything kept after a filter change."""
        view = self.query_one(RichLog)
        view.clear()
        for line in self.kept:
            if matches(line, self.level, self.search):
                for text in render_line(line):
                    view.write(text)
        self._titles()

    def _titles(self) -> None:
        """Path, filters, and a count of GE failures seen."""
        no_log = "(this session has no log file on this machine)"
        path = short_path(self.tail.path) if self.tail.path else no_log
        search = f" ─ search '{self.search}'" if self.search else ""
        self.query_one("#logs-title", Static).update(
            Text(f" Server log {path} ─ level {LEVEL_NAMES[self.level]}{search} ─ {len(self.kept)} lines",
                 style="bold"))
        failures = Counter(line.failure.title for line in self.kept if line.failure is not None)
        summary = self.query_one("#logs-failures", Static)
        if failures:
            listed = "; ".join(f"{title} ×{count}" for title, count in failures.most_common())
            summary.update(Text(f" GE failures: {listed}", style="bold red"))
        else:
            summary.update(Text(" no GE failures in the log", style="green"))

    def watch_level(self) -> None:
        """Filter changed."""
        self._redraw_all()

    def watch_search(self) -> None:
        """Search changed."""
        self._redraw_all()

    def action_back(self) -> None:
        """Close the search box if open, else leave the screen."""
        box = self.query_one("#log-search", Input)
        if box.display:
            box.display = False
            box.value = ""
            self.query_one(RichLog).focus()
        else:
            self.app.pop_screen()

    def action_cycle_level(self) -> None:
        """all → warnings and worse → errors and worse."""
        self.level = LEVELS[(LEVELS.index(self.level) + 1) % len(LEVELS)]

    def action_search(self) -> None:
        """Open the search box."""
        box = self.query_one("#log-search", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """Search as the operator types."""
        self.search = event.value

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Keep the search, back to the log."""
        event.input.display = False
        self.query_one(RichLog).focus()
