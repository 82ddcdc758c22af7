"""A bounded ring of snapshots (default 15 minutes at 1 s) and the time series views draw from it."""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Sequence

from triton_ge_console.sessions.snapshot import DeviceSnapshot, ModelSnapshot, ServerSnapshot

DEFAULT_CAPACITY = 15 * 60


class SnapshotHistory:
    """Recent snapshots, oldest first; safe to append from a poller thread while views read."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._ring: deque[ServerSnapshot] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def append(self, snapshot: ServerSnapshot) -> None:
        """Record one snapshot, dropping the oldest past capacity."""
        with self._lock:
            self._ring.append(snapshot)

    def snapshots(self) -> tuple[ServerSnapshot, ...]:
        """All kept snapshots, oldest first."""
        with self._lock:
            return tuple(self._ring)

    def newer_than(self, taken_at: float) -> list[ServerSnapshot]:
        """Snapshots taken after `taken_at`, oldest first: a view catching up reads only what is new."""
        with self._lock:
            fresh = list(itertools.takewhile(lambda s: s.taken_at > taken_at, reversed(self._ring)))
        fresh.reverse()
        return fresh

    @property
    def oldest(self) -> ServerSnapshot | None:
        """The oldest snapshot kept, if any."""
        with self._lock:
            return self._ring[0] if self._ring else None

    @property
    def latest(self) -> ServerSnapshot | None:
        """The newest snapshot, if any."""
        with self._lock:
            return self._ring[-1] if self._ring else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._ring)

    def model_series(
        self, model: str, figure: Callable[[ModelSnapshot], float | int | None]
    ) -> list[tuple[float, float | None]]:
        """(taken_at, value) for one model's figure; None where the model or figure was missing."""
        return self.model_series_set(model, (figure,))[0]

    def model_series_set(
        self, model: str, figures: Sequence[Callable[[ModelSnapshot], float | int | None]]
    ) -> list[list[tuple[float, float | None]]]:
        """Several figures' series from one copy of the ring, so they line up while a poller appends."""
        sets: list[list[tuple[float, float | None]]] = [[] for _ in figures]
        for snap in self.snapshots():
            found = snap.model(model)
            for series, figure in zip(sets, figures, strict=True):
                value = figure(found) if found is not None else None
                series.append((snap.taken_at, None if value is None else float(value)))
        return sets

    def device_series(
        self, device_id: str, figure: Callable[[DeviceSnapshot], float | int | None]
    ) -> list[tuple[float, float | None]]:
        """(taken_at, value) for one device's figure; None where missing."""
        series: list[tuple[float, float | None]] = []
        for snap in self.snapshots():
            found = next((d for d in snap.devices if d.id == device_id), None)
            value = figure(found) if found is not None else None
            series.append((snap.taken_at, None if value is None else float(value)))
        return series
