"""The one poll loop (sessions/observe/follow.py) on a background thread, handing snapshots to the views, so
the kernel never blocks."""

from __future__ import annotations

import threading
from collections.abc import Callable

from triton_ge_console.sessions.observe.follow import Follower
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import SessionSource

SnapshotHandler = Callable[[ServerSnapshot], None]
ErrorHandler = Callable[[BaseException], None]


class BackgroundPoller:
    """Polls `source` every `interval` s on a daemon thread (the one loop, a source that does not answer
    asked again at the same pace); a view error is reported, never raised."""

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
            loop = Follower([self.source], interval_s=self.interval, backoff_s=self.interval, max_workers=1)
            self._thread = threading.Thread(target=loop.run, args=(self._hand_on, self._stop), name=name,
                                            daemon=True)
            self._thread.start()

    def poll_once(self) -> ServerSnapshot | None:
        """One poll and hand-off, in the caller's thread."""
        try:
            snapshot = self.source.poll()
        except Exception as exc:
            self._report(exc)
            return None
        return snapshot if self._hand_on(self.source.name, snapshot) else None

    def _hand_on(self, _name: str, snapshot: ServerSnapshot) -> bool:
        """Give the views a snapshot; whether they took it (a broken view must not kill the poller)."""
        try:
            self._on_snapshot(snapshot)
        except Exception as exc:
            self._report(exc)
            return False
        self.polls += 1
        return True

    def _report(self, error: BaseException) -> None:
        """A poll's or a view's error, to on_error."""
        if self._on_error is not None:
            self._on_error(error)

    def close(self, timeout: float = 10.0) -> None:
        """Stop polling and wait for the thread; safe to call more than once."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
