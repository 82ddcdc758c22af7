"""The app's view of its server connection: UI-free state the header, banners and operations read."""

from __future__ import annotations

from dataclasses import dataclass

from triton_ge_console.sessions.observe.snapshot import ServerSnapshot


@dataclass(frozen=True)
class Connection:
    """What the console knows about reaching the server: the last good snapshot and any current failure."""

    session: str
    interval_s: float
    last_good: ServerSnapshot | None = None
    error: str | None = None
    failed_polls: int = 0
    retry_in_s: float | None = None
    stopped: bool = False  # the operator stopped the server on purpose
    diagnosis: str | None = None  # what happened to the server, when the console knows (it crashed, ...)
    no_reply: bool = False  # the failing poll's server took the connection but sent no reply (hung)

    @property
    def stale(self) -> bool:
        """Whether what is on screen is older than the last poll."""
        return self.error is not None
