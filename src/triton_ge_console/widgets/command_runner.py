"""Run operator commands off the kernel's thread; outcomes go to a status label, never a traceback."""

from __future__ import annotations

import html
import threading
from collections.abc import Callable

import ipywidgets as w

from triton_ge_console.repository import progress
from triton_ge_console.repository.progress import elapsed_line, ticking
from triton_ge_console.sessions.observe.source import CommandResult

Command = Callable[[], CommandResult]
Done = Callable[[CommandResult], None]


def describe(result: CommandResult) -> str:
    """One line for the status label: what was done, or Triton's own message on failure."""
    took = f" ({result.duration_s:.1f}s)" if result.duration_s is not None else ""
    if result.ok:
        return f"✓ {result.message}{took}"
    if result.message.startswith(f"{result.action} {result.target}"):
        return f"✗ {result.message}{took}"
    return f"✗ {result.action} {result.target} failed: {result.message}{took}"


def result_or_failure(action: str, target: str, command: Command) -> CommandResult:
    """Run a command; an exception becomes a failed result carrying its message."""
    try:
        return command()
    except Exception as exc:
        return CommandResult(action, target, ok=False, message=f"{type(exc).__name__}: {exc}")


class CommandRunner:
    """Runs one command per target at a time, in a worker thread (inline for tests), into a status label."""

    def __init__(self, background: bool = True) -> None:
        self.background = background
        self.status = w.HTML("")
        self.results: list[CommandResult] = []
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def busy(self, target: str) -> bool:
        """Whether a command for target is still running."""
        with self._lock:
            return target in self._busy

    def run(self, action: str, target: str, command: Command, done: Done | None = None) -> bool:
        """Start a command unless one for the same target is running; returns whether it started."""
        with self._lock:
            if target in self._busy:
                return False
            self._busy.add(target)
        self.status.value = f"… {html.escape(action)} {html.escape(target)}"

        if not self.background:
            self._execute(action, target, command, done)
            return True
        thread = threading.Thread(target=self._execute, args=(action, target, command, done),
                                  name=f"ge-{action}-{target}", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return True

    def _execute(self, action: str, target: str, command: Command, done: Done | None) -> None:
        """Run the command, the status saying how long it has run (Triton says nothing while it loads)."""
        with ticking(f"{action}ing {target}", self._elapsed):
            result = result_or_failure(action, target, command)
        self._finish(target, result, done)

    def _elapsed(self, what: str, seconds: float) -> None:
        """The status while a command runs longer than SHOW_AFTER_S: "… reloading m … 12 s"."""
        if seconds >= progress.SHOW_AFTER_S:
            self.status.value = f"… {html.escape(elapsed_line(what, seconds))}"

    def _finish(self, target: str, result: CommandResult, done: Done | None) -> None:
        """Record a result, show it, release the target."""
        self.results.append(result)
        colour = "green" if result.ok else "firebrick"
        self.status.value = f'<span style="color:{colour}">{html.escape(describe(result))}</span>'
        with self._lock:
            self._busy.discard(target)
        if done is not None:
            done(result)

    def wait(self, timeout: float = 120.0) -> None:
        """Wait for running commands (notebooks and tests)."""
        for thread in list(self._threads):
            thread.join(timeout)
