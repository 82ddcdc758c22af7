"""A progress widget for long work in a notebook: a bar and a line for file work (copying, hashing),
the line alone with the elapsed time for work that says nothing while it runs (Triton loading a model)."""

from __future__ import annotations

import threading
import time

import ipywidgets as w

from triton_ge_console.repository import progress
from triton_ge_console.repository.progress import bytes_line, elapsed_line


class ProgressWidget:
    """Both progress hooks as ipywidgets (hidden until some work has run for SHOW_AFTER_S): pass it as
    `build_repository(..., progress=widget)`, or widget.elapsed as an ElapsedHook; safe from any thread."""

    def __init__(self, show_after_s: float | None = None) -> None:
        self.show_after_s = progress.SHOW_AFTER_S if show_after_s is None else show_after_s
        self.bar = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="240px"))
        self.label = w.Label("")
        self.box = w.HBox([self.bar, self.label], layout=w.Layout(display="none"))
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()

    def __call__(self, what: str, done: int, total: int) -> None:
        """A ProgressHook: the bar at done/total, the line with the sizes."""
        with self._lock:
            started = self._started.setdefault(what, time.monotonic())
            if time.monotonic() - started < self.show_after_s:
                return
        self.bar.layout.visibility = "visible"
        self.bar.value = done / total if total else 1.0
        self.label.value = bytes_line(what, done, total)
        self.box.layout.display = "flex"

    def elapsed(self, what: str, seconds: float) -> None:
        """An ElapsedHook: no bar (nothing to measure), the line with how long so far."""
        if seconds < self.show_after_s:
            return
        self.bar.layout.visibility = "hidden"
        self.label.value = elapsed_line(what, seconds)
        self.box.layout.display = "flex"

    def clear(self) -> None:
        """Hide the widget: the work is over (its outcome is said elsewhere)."""
        self.box.layout.display = "none"
        self.label.value = ""
        with self._lock:
            self._started.clear()
