"""The tail of a server log, read incrementally, with a substring filter."""

from __future__ import annotations

import html
import threading
from collections import deque
from pathlib import Path

import ipywidgets as w

from triton_ge_console.sessions.server.server_log import LogTail, is_failure

MAX_READ_BYTES = 1 << 20
# long lines wrap: a narrow notebook output shows all of each (nothing cut at its edge)
LOG_PRE = ("<pre style='font-size:11px; line-height:1.25; margin:0; white-space:pre-wrap; "
           "overflow-wrap:anywhere'>")


class FilteredLogTail:
    """Keeps the last `max_lines` lines of a log file; `refresh()` reads only what was appended."""

    def __init__(self, path: Path | None, max_lines: int = 200, shown: int = 40) -> None:
        self.path = path
        self.max_lines = max_lines
        self.shown = shown
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._tail = LogTail(path, backlog=MAX_READ_BYTES, start=0)
        self._lock = threading.RLock()  # the poller thread reads while the filter box renders
        self.filter = w.Text(placeholder="filter", description="log", layout=w.Layout(width="320px"))
        self.view = w.HTML(layout=w.Layout(max_height="260px", overflow="auto"))
        self.filter.observe(lambda _change: self.render(), names="value")
        self.box = w.VBox([self.filter, self.view])

    @property
    def lines(self) -> list[str]:
        """The kept lines, oldest first."""
        with self._lock:
            return list(self._lines)

    def refresh(self) -> None:
        """Read what was appended since the last call (from the start again if the file was truncated)."""
        with self._lock:
            self._read_new()
            self.render()

    def _read_new(self) -> None:
        """Append the file's new complete lines to the kept ones (all afresh after a truncation)."""
        lines = self._tail.read_lines()
        if self._tail.truncated:
            self._lines.clear()
        self._lines.extend(lines)

    def visible(self) -> list[str]:
        """The last `shown` lines that match the filter."""
        needle = self.filter.value.strip().lower()
        kept = self.lines
        matching = [line for line in kept if needle in line.lower()] if needle else kept
        return matching[-self.shown:]

    def render(self) -> None:
        """Show the visible lines, GE and load failures in red."""
        if self.path is None or not self.path.is_file():
            where = f" at {html.escape(str(self.path))}" if self.path else ""
            self.view.value = f"<i>no log{where}</i>"
            return
        rendered = [f"<span style='color:firebrick'>{html.escape(line)}</span>" if is_failure(line)
                    else html.escape(line) for line in self.visible()]
        body = "\n".join(rendered) or "<i>(empty)</i>"
        self.view.value = f"{LOG_PRE}{body}</pre>"
