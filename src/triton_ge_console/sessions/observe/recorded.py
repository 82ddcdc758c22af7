"""A recorded session: replays saved snapshots and records commands, so views are tested deterministically."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import CommandResult


class RecordedController:
    """Accepts commands and remembers them; answers with scripted failures where given."""

    def __init__(self, failures: dict[tuple[str, str], str] | None = None) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self._failures = dict(failures or {})

    def _answer(self, action: str, model: str, config: str | None) -> CommandResult:
        """Record the call and answer as scripted."""
        self.calls.append((action, model, config))
        failure = self._failures.get((action, model))
        if failure is not None:
            return CommandResult(action, model, ok=False, message=failure, duration_s=0.0)
        return CommandResult(action, model, ok=True, message=f"{action} {model}: done", duration_s=0.0)

    def load(self, model: str, config: str | None = None) -> CommandResult:
        """Record a load."""
        return self._answer("load", model, config)

    def unload(self, model: str) -> CommandResult:
        """Record an unload."""
        return self._answer("unload", model, None)

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Record a reload."""
        return self._answer("reload", model, config)


class RecordedSource:
    """A SessionSource over a fixed list of snapshots; each poll returns the next, the last repeats."""

    def __init__(
        self,
        snapshots: Iterable[ServerSnapshot],
        name: str | None = None,
        log_path: Path | None = None,
        controller: RecordedController | None = None,
    ) -> None:
        self._snapshots = list(snapshots)
        if not self._snapshots:
            raise ValueError("a recording needs at least one snapshot")
        self.name = name or self._snapshots[0].session
        self.history = SnapshotHistory()
        self._next = 0
        self._log_path = log_path
        self._controller = controller or RecordedController()
        self.closed = False

    @classmethod
    def from_file(cls, path: Path, **kwargs: object) -> RecordedSource:
        """Load a recording written by `save` (JSON lines, one snapshot each)."""
        lines = path.read_text(encoding="utf-8").splitlines()
        snapshots = [ServerSnapshot.from_dict(json.loads(line)) for line in lines if line.strip()]
        return cls(snapshots, **kwargs)  # type: ignore[arg-type]

    @staticmethod
    def save(snapshots: Iterable[ServerSnapshot], path: Path) -> None:
        """Write snapshots as JSON lines (a recording)."""
        text = "".join(json.dumps(s.to_dict(), sort_keys=True) + "\n" for s in snapshots)
        path.write_text(text, encoding="utf-8")

    def poll(self) -> ServerSnapshot:
        """The next recorded snapshot (the last one again once the recording is exhausted)."""
        snapshot = self._snapshots[min(self._next, len(self._snapshots) - 1)]
        self._next += 1
        self.history.append(snapshot)
        return snapshot

    @property
    def controller(self) -> RecordedController:
        """The recording controller (inspect `.calls` in tests)."""
        return self._controller

    @property
    def log_path(self) -> Path | None:
        """The recorded log file, if any."""
        return self._log_path

    def close(self) -> None:
        """Mark closed."""
        self.closed = True

