"""Progress of long work: a hook any front end can take, and a terminal bar.

A ProgressHook is called as hook(what, done, total): `what` names the work ("copying 1/model.onnx.data"),
done and total are bytes. Work with no measure of its own (Triton loading a model, ATC) reports only
how long it has run: an ElapsedHook is called as hook(what, seconds). The console and the notebooks
pass their own (LineProgress turns both into one line of text); the CLI passes a TerminalProgress,
which draws rich progress only on a terminal and only once a task has run for more than SHOW_AFTER_S
seconds (nothing on a pipe: there the final lines say what happened).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

ProgressHook = Callable[[str, int, int], None]
ElapsedHook = Callable[[str, float], None]
SHOW_AFTER_S = 1.0
TICK_S = 0.5  # how often `ticking` reports elapsed time


def size_text(count: float) -> str:
    """Bytes for people: 512 B, 3.2 MiB, 1.5 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def bytes_line(what: str, done: int, total: int) -> str:
    """One line for file work: "copying m/1/w.data  1.2 GiB / 3.0 GiB (40%)"."""
    share = f" ({100 * done // total}%)" if total else ""
    return f"{what}  {size_text(done)} / {size_text(total)}{share}"


def elapsed_line(what: str, seconds: float) -> str:
    """One line for work that says nothing while it runs: "loading m … 12 s"."""
    return f"{what} … {seconds:.0f} s"


class Feed:
    """Where a long start reports: a step line when called, and (optionally) file progress and elapsed
    time, which `hooks_of` finds on it; a plain line callback has neither."""

    def __init__(self, say: Callable[[str], None], progress: ProgressHook | None = None,
                 elapsed: ElapsedHook | None = None) -> None:
        self.say = say
        self.progress = progress
        self.elapsed = elapsed

    def __call__(self, line: str) -> None:
        """One step line."""
        self.say(line)


def hooks_of(notify: Callable[[str], None] | None) -> tuple[ProgressHook | None, ElapsedHook | None]:
    """The progress hooks a Feed carries ((None, None) for a plain line callback)."""
    return getattr(notify, "progress", None), getattr(notify, "elapsed", None)


class LineProgress:
    """Both hooks as one line of text handed to `show`, for work older than show_after_s, at most every
    min_interval_s (the last line of a file is always shown); for screens and notebook labels."""

    def __init__(self, show: Callable[[str], None], show_after_s: float | None = None,
                 min_interval_s: float = 0.2) -> None:
        self.show = show
        self.show_after_s = SHOW_AFTER_S if show_after_s is None else show_after_s
        self.min_interval_s = min_interval_s
        self._started: dict[str, float] = {}
        self._last = 0.0

    def __call__(self, what: str, done: int, total: int) -> None:
        """A ProgressHook."""
        self._maybe(what, bytes_line(what, done, total), final=done >= total)

    def elapsed(self, what: str, seconds: float) -> None:
        """An ElapsedHook (the work's own clock decides when it is old enough)."""
        if seconds >= self.show_after_s:
            self._maybe(what, elapsed_line(what, seconds), final=False, old=True)

    def _maybe(self, what: str, line: str, final: bool, old: bool = False) -> None:
        """Show line if the work is old enough and the last line is not too fresh."""
        now = time.monotonic()
        started = self._started.setdefault(what, now)
        if not old and now - started < self.show_after_s:
            return
        if final or now - self._last >= self.min_interval_s:
            self._last = now
            self.show(line)


@contextlib.contextmanager
def ticking(what: str, hook: ElapsedHook | None, every_s: float = TICK_S) -> Iterator[None]:
    """Report `what`'s elapsed time to hook every every_s from a thread while the block runs (a blocking
    call that says nothing, such as Triton's load)."""
    if hook is None:
        yield
        return
    started, stop = time.monotonic(), threading.Event()

    def tick() -> None:
        while not stop.wait(every_s):
            hook(what, time.monotonic() - started)

    thread = threading.Thread(target=tick, name="ge-progress-tick", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


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
            task = self._bar().add_task(what, total=total, sizes="")
            self._tasks[what] = task
        sizes = f"{size_text(done)} / {size_text(total)}"
        self._progress.update(task, completed=done, total=total, sizes=sizes)

    def elapsed(self, what: str, seconds: float) -> None:
        """An ElapsedHook: a spinner with the elapsed time, once the work is older than show_after_s."""
        if not self.enabled or seconds < self.show_after_s:
            return
        task = self._tasks.get(what)
        if task is None:
            self._tasks[what] = self._bar().add_task(what, total=None, sizes="")
        # rich's own refresh thread moves the spinner and the elapsed time

    def _bar(self) -> Any:
        """The rich Progress, started on first use."""
        if self._progress is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(finished_text="✓"), TextColumn("{task.description}"), BarColumn(),
                TextColumn("{task.fields[sizes]}"), TimeElapsedColumn(), console=Console(file=self.stream),
                transient=False,
            )  # fmt: skip  (sizes: "1.2 GiB / 3.0 GiB" for file work, "" for a wait)
            self._progress.start()
        return self._progress

    def finish(self, what: str) -> None:
        """Mark a work reported through elapsed() as done (its line stays, its spinner stops)."""
        task = self._tasks.pop(what, None)
        self._started.pop(what, None)
        if task is not None and self._progress is not None:
            self._progress.update(task, total=1, completed=1)

    def close(self) -> None:
        """Stop drawing (leaves the finished bars on screen)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
