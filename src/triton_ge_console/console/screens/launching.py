"""Progress while the console starts its server (the demo, or a spec given on the command line)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import LoadingIndicator, Log, Static

from triton_ge_console.repository.progress import Feed, LineProgress

Startup = Callable[[Callable[[str], None]], object]  # handed a Feed: step lines, file progress, elapsed time


class LaunchingScreen(ModalScreen[bool]):
    """Runs the startup in a worker, showing each step; dismissed with True once the server is up."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q,escape", "app.quit", "quit")]

    def __init__(self, startup: Startup, title: str) -> None:
        super().__init__()
        self.startup = startup
        self.title_text = title
        self.failed: str | None = None

    def compose(self) -> ComposeResult:
        """Title, spinner, the steps so far."""
        with Vertical(id="launch-box"):
            yield Static(Text(self.title_text, style="bold"), id="launch-title")
            yield LoadingIndicator(id="launch-spinner")
            yield Log(id="launch-log", auto_scroll=True)
            yield Static("", id="launch-progress")

    def on_mount(self) -> None:
        """Start the launch."""
        self._run()

    @work(thread=True, exclusive=True, group="launch", exit_on_error=False)
    def _run(self) -> None:
        """The blocking startup; each step line is shown as it comes, long work on one progress line."""
        lines = LineProgress(lambda line: self.app.call_from_thread(self._progress, line))
        try:
            self.startup(Feed(lambda line: self.app.call_from_thread(self._step, line), lines, lines.elapsed))
        except Exception as exc:
            self.app.call_from_thread(self._fail, str(exc) or type(exc).__name__)
            return
        self.app.call_from_thread(self.dismiss, True)

    def _step(self, line: str) -> None:
        """One step line; the work the progress line showed is over."""
        self.query_one(Log).write_line(f"• {line}")
        self._progress("")

    def _progress(self, line: str) -> None:
        """The progress of the work under way (copying, Triton loading the models)."""
        self.query_one("#launch-progress", Static).update(line)

    def _fail(self, message: str) -> None:
        """Show why the start failed; the operator quits with q."""
        self.failed = message
        self.query_one(LoadingIndicator).display = False
        self.query_one(Log).write_line(f"✗ {message}")
        title = Text("Start failed — press q to quit", style="bold red")
        self.query_one("#launch-title", Static).update(title)
        self.notify(message, title="start failed", severity="error", timeout=30)
