"""The tail of a server log, read incrementally, with a substring filter."""

from __future__ import annotations

import html
import threading
from collections import deque
from pathlib import Path

import ipywidgets as w

MAX_READ_BYTES = 1 << 20
GE_FAILURE_MARKERS = ("aclgrphParseONNX", "CompileGraph failed", "execute model failed", "ACL error",
                      "failed to load", "UNAVAILABLE")


class FilteredLogTail:
    """Keeps the last `max_lines` lines of a log file; `refresh()` reads only what was appended."""

    def __init__(self, path: Path | None, max_lines: int = 200, shown: int = 40) -> None:
        self.path = path
        self.max_lines = max_lines
        self.shown = shown
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._offset = 0
        self._partial = ""
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
        """Append the file's new complete lines to the kept ones."""
        if self.path is None or not self.path.is_file():
            return
        size = self.path.stat().st_size
        if size < self._offset:
            self._offset, self._partial = 0, ""
            self._lines.clear()
        if size > self._offset:
            start = max(self._offset, size - MAX_READ_BYTES)  # a huge backlog: only its end matters
            with open(self.path, "rb") as log:
                log.seek(start)
                chunk = log.read(size - start)
            text = chunk.decode("utf-8", errors="replace")
            if start > self._offset:
                self._partial, text = "", text.split("\n", 1)[-1]  # drop the cut first line
            self._offset = size
            *complete, self._partial = (self._partial + text).split("\n")
            self._lines.extend(complete)

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
        rendered = [f"<span style='color:firebrick'>{html.escape(line)}</span>" if _is_failure(line)
                    else html.escape(line) for line in self.visible()]
        body = "\n".join(rendered) or "<i>(empty)</i>"
        self.view.value = f"<pre style='font-size:11px; line-height:1.25; margin:0'>{body}</pre>"


def _is_failure(line: str) -> bool:
    """Whether a log line reports a failure worth highlighting."""
    if line[:1] == "E":  # Triton's own error lines start with E<MMDD>
        return True
    return any(marker in line for marker in GE_FAILURE_MARKERS)
