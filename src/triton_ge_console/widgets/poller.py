"""A background thread polling a session and handing snapshots to the views, so the kernel never blocks."""

from __future__ import annotations

import threading
from collections.abc import Callable

from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import SessionSource

SnapshotHandler = Callable[[ServerSnapshot], None]
ErrorHandler = Callable[[BaseException], None]


class BackgroundPoller:
    """Polls `source` every `interval` s on a daemon thread; the next poll is armed when the last ends."""

    def __init__(self, source: SessionSource, on_snapshot: SnapshotHandler, interval: float = 1.0,
                 on_error: ErrorHandler | None = None) -> None:
        if interval <= 0:
            raise ValueError(f"poll interval must be > 0 seconds, got {interval}")
        self.source = source
        self.interval = interval
        self._on_snapshot = on_snapshot
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.polls = 0

    @property
    def running(self) -> bool:
        """Whether the polling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start polling (a no-op when already running)."""
        with self._lock:
            if self.running:
                return
            self._stop.clear()
            name = f"ge-poller-{self.source.name}"
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def poll_once(self) -> ServerSnapshot | None:
        """One poll and hand-off, in the caller's thread; a view error is reported, never raised."""
        try:
            snapshot = self.source.poll()
            self._on_snapshot(snapshot)
        except Exception as exc:  # a broken view must not kill the poller
            if self._on_error is not None:
                self._on_error(exc)
            return None
        self.polls += 1
        return snapshot

    def _run(self) -> None:
        """Poll until stopped."""
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval)

    def close(self, timeout: float = 10.0) -> None:
        """Stop polling and wait for the thread; safe to call more than once."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
