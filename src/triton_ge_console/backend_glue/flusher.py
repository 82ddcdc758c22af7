"""The one background thread that hands a glue's buffered metrics to Triton, for telemetry and generate.

Each metric call is an IPC round trip to the server, so the serving path only buffers figures and this
thread passes them on every FLUSH_INTERVAL_S; metrics must never take the model down, so a failing round
is warned once per cause and the thread carries on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

FLUSH_INTERVAL_S = 0.5


class MetricFlusher:
    """Runs `step` every FLUSH_INTERVAL_S until closed, then `last` once (the final moments' figures)."""

    def __init__(self, logger: Any, what: str, step: Callable[[], None], last: Callable[[], None],
                 thread_name: str) -> None:
        self._logger = logger
        self._what = what
        self._step = step
        self._last = last
        self._stop = threading.Event()
        self._last_warning = ""
        self._thread = threading.Thread(target=self._loop, name=thread_name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        """Step until closed; a failing round is skipped and said once per cause."""
        while not self._stop.wait(FLUSH_INTERVAL_S):
            try:
                self._step()
            except Exception as exc:  # metrics must never take the model down
                if str(exc) != self._last_warning:
                    self._last_warning = str(exc)
                    self._logger.log_warn(f"ge glue {self._what}: {exc}")

    def close(self) -> None:
        """Stop the thread, then hand over what is left."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self._last()
        except Exception as exc:
            self._logger.log_warn(f"ge glue {self._what}: last flush failed: {exc}")
