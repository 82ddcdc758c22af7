"""A session's events: what happened to its server without anyone asking (a crash, a restart, giving up).

One JSON object a line in the session dir's `events.jsonl` (0600), appended by the supervisor, read by
`status`, `ls` and the console. A line that cannot be read is skipped: the file is a log, not a record.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

EVENTS_FILE = "events.jsonl"
CRASHED, RESTARTED, SERVING, GAVE_UP = "crashed", "restarted", "serving", "gave-up"
MAX_EVENTS_READ = 200  # the newest kept when read: a crash loop is capped by its policy anyway


@dataclass(frozen=True)
class SessionEvent:
    """One thing that happened to a session's server, in words, with when."""

    at: float  # epoch seconds
    kind: str  # crashed | restarted | serving | gave-up
    message: str

    def to_dict(self) -> dict[str, object]:
        """The JSON `status --json` prints."""
        return {"at": self.at, "kind": self.kind, "message": self.message}


def record_event(folder: Path, kind: str, message: str) -> SessionEvent:
    """Append an event to the session's events file (created private)."""
    event = SessionEvent(time.time(), kind, message)
    line = json.dumps(event.to_dict()) + "\n"
    fd = os.open(folder / EVENTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as out:
        out.write(line)
    return event


def read_events(folder: Path | None) -> tuple[SessionEvent, ...]:
    """The session's events, oldest first (empty when it has none)."""
    if folder is None:
        return ()
    try:
        lines = (folder / EVENTS_FILE).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ()
    events = []
    for line in lines[-MAX_EVENTS_READ:]:
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            data = json.loads(line)
            events.append(SessionEvent(float(data["at"]), str(data["kind"]), str(data["message"])))
    return tuple(events)


def clear_events(folder: Path) -> None:
    """Forget an earlier run's events (a new `up` starts the count afresh)."""
    with contextlib.suppress(FileNotFoundError):
        (folder / EVENTS_FILE).unlink()


def restarts(events: tuple[SessionEvent, ...]) -> tuple[SessionEvent, ...]:
    """The restarts among a session's events."""
    return tuple(event for event in events if event.kind == RESTARTED)
