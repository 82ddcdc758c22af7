"""Progress of long file work (hashing, copying): a hook any front end can take, and a terminal bar.

A hook is called as hook(what, done, total): `what` names the work ("copying 1/model.onnx.data"),
done and total are bytes. The console and the notebooks pass their own; the CLI passes a
TerminalProgress, which draws a rich progress bar only on a terminal and only once a task has run
for more than SHOW_AFTER_S seconds (nothing on a pipe: there the final lines say what happened).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

ProgressHook = Callable[[str, int, int], None]
SHOW_AFTER_S = 1.0


def for_file(hook: ProgressHook | None, what: str) -> Callable[[int, int], None] | None:
    """A (done, total) callback for one file's work, or None without a hook."""
    if hook is None:
        return None
    return lambda done, total: hook(what, done, total)


class TerminalProgress:
    """rich.progress bars on stderr for work that outlasts SHOW_AFTER_S; silent when not a terminal."""

    def __init__(self, stream: TextIO | None = None, show_after_s: float = SHOW_AFTER_S) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.show_after_s = show_after_s
        self._started: dict[str, float] = {}
        self._tasks: dict[str, Any] = {}
        self._progress: Any = None

    def __call__(self, what: str, done: int, total: int) -> None:
        """Note progress; draw once the task is old enough, finish its bar when done."""
        if not self.enabled:
            return
        started = self._started.setdefault(what, time.monotonic())
        if what not in self._tasks and time.monotonic() - started < self.show_after_s:
            return
        task = self._tasks.get(what)
        if task is None:
            task = self._bar().add_task(what, total=total)
            self._tasks[what] = task
        self._progress.update(task, completed=done, total=total)

    def _bar(self) -> Any:
        """The rich Progress, started on first use."""
        if self._progress is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                TimeRemainingColumn(), console=Console(file=self.stream), transient=False,
            )  # fmt: skip
            self._progress.start()
        return self._progress

    def close(self) -> None:
        """Stop drawing (leaves the finished bars on screen)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
