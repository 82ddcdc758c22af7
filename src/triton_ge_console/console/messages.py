"""Messages workers post to the app: the UI thread is the only one that touches widgets."""

from __future__ import annotations

from textual.message import Message

from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import CommandResult


class SnapshotArrived(Message):
    """A poll finished."""

    def __init__(self, snapshot: ServerSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class CommandFinished(Message):
    """A control command (load, unload, reload, start, stop) finished."""

    def __init__(self, result: CommandResult) -> None:
        super().__init__()
        self.result = result


class RepositoryChanged(Message):
    """The watcher saw files change under these model folders."""

    def __init__(self, models: tuple[str, ...]) -> None:
        super().__init__()
        self.models = models
