"""Binding the console to real sessions: a source that exists before its server, and its lifecycle."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import STARTING_MESSAGE, ServerSnapshot
from triton_ge_console.sessions.observe.source import CommandResult, Controller, SessionSource
from triton_ge_console.sessions.server.registry import Registry, SessionRecord


class _NotYetController:
    """Answers every command with "not started yet" until the server is up."""

    def _refuse(self, action: str, model: str) -> CommandResult:
        return CommandResult(action, model, False, f"cannot {action} {model}: the server is still starting")

    def load(self, model: str, config: str | None = None) -> CommandResult:
        """Refuse."""
        return self._refuse("load", model)

    def unload(self, model: str) -> CommandResult:
        """Refuse."""
        return self._refuse("unload", model)

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Refuse."""
        return self._refuse("reload", model)


class PendingSource:
    """A SessionSource the app can poll while its server is still being launched; bound once it is up."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.history = SnapshotHistory()
        self._inner: SessionSource | None = None
        self._lock = threading.Lock()

    def bind(self, source: SessionSource) -> None:
        """From now on, delegate to the live source (which should share this history)."""
        with self._lock:
            self._inner = source

    @property
    def inner(self) -> SessionSource | None:
        """The bound source, if any."""
        with self._lock:
            return self._inner

    def poll(self) -> ServerSnapshot:
        """The live source's snapshot, or a "starting" one (never kept in history)."""
        inner = self.inner
        if inner is None:
            return ServerSnapshot(taken_at=time.time(), session=self.name, error=STARTING_MESSAGE)
        return inner.poll()

    @property
    def controller(self) -> Controller:
        """The live source's controller, or one that refuses until then."""
        inner = self.inner
        return inner.controller if inner is not None else _NotYetController()

    @property
    def log_path(self) -> Path | None:
        """The live source's log."""
        inner = self.inner
        return inner.log_path if inner is not None else None

    def close(self) -> None:
        """Close the live source."""
        inner = self.inner
        if inner is not None:
            inner.close()


class RecordLifecycle:
    """Stop and start a launched session's server through the sessions lifecycle (same ports, same repo)."""

    def __init__(self, registry: Registry, record: SessionRecord | None = None) -> None:
        self.registry = registry
        self.record = record

    def stop(self) -> CommandResult:
        """`ge-console down` for this session."""
        from triton_ge_console.sessions.lifecycle import down

        if self.record is None:
            return CommandResult("stop", "server", False, "no session to stop")
        result = down(self.record, self.registry)
        self.record = result.record
        return CommandResult("stop", self.record.name, True, result.message)

    def diagnose(self) -> str | None:
        """Why the server stopped answering, when it is ours: it exited (its code) and its log's cause."""
        from triton_ge_console.sessions.lifecycle import recorded_exit_code
        from triton_ge_console.sessions.server.events import CRASHED, GAVE_UP, read_events
        from triton_ge_console.sessions.server.registry import server_process_alive
        from triton_ge_console.sessions.server.server_log import log_cause

        record = self.record
        if record is None or record.attached or server_process_alive(record):
            return None
        code = recorded_exit_code(record)
        how = "" if code is None else (f" (killed by signal {-code})" if code < 0 else f" (exit code {code})")
        cause = log_cause(record.log_path) if record.log_path is not None else ""
        events = read_events(record.session_dir)
        plan = f"; {events[-1].message}" if events and events[-1].kind in (CRASHED, GAVE_UP) else ""
        return f"tritonserver exited{how}" + (f"; log: {cause}" if cause else "") + plan

    def start(self, env: Mapping[str, str]) -> CommandResult:
        """Start the stopped session again, with diagnostics' environment."""
        from triton_ge_console.sessions.launcher import LaunchError
        from triton_ge_console.sessions.lifecycle import restart

        if self.record is None:
            return CommandResult("start", "server", False, "no session to start")
        try:
            self.record = restart(self.record, self.registry, env=env)
        except LaunchError as exc:
            return CommandResult("start", self.record.name, False, str(exc))
        extra = f" with {', '.join(sorted(env))}" if env else ""
        return CommandResult("start", self.record.name, True, f"session '{self.record.name}' ready{extra}")
