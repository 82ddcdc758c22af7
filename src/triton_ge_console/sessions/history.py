"""A bounded ring of snapshots (default 15 minutes at 1 s) and the time series views draw from it."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

from triton_ge_console.sessions.packed import PackedModel, find_model, pack_model, unpack_model
from triton_ge_console.sessions.snapshot import DeviceSnapshot, ModelSnapshot, ServerSnapshot

DEFAULT_CAPACITY = 15 * 60


class _Kept(NamedTuple):
    """One snapshot as the ring keeps it: the server's fields and devices as they are, its models packed."""

    shell: ServerSnapshot  # the snapshot without its models
    models: tuple[PackedModel, ...]

    @property
    def taken_at(self) -> float:
        """When the snapshot was taken."""
        return self.shell.taken_at


def _keep(snapshot: ServerSnapshot) -> _Kept:
    """A snapshot as the ring keeps it (see sessions.packed for why models are packed)."""
    return _Kept(dataclasses.replace(snapshot, models=()), tuple(pack_model(m) for m in snapshot.models))


def _rebuilt(kept: _Kept) -> ServerSnapshot:
    """The snapshot, equal to the one appended."""
    return dataclasses.replace(kept.shell, models=tuple(unpack_model(m) for m in kept.models))


class SnapshotHistory:
    """Recent snapshots, oldest first; safe to append from a poller thread while views read.

    The newest snapshot is kept as it was appended; older ones are rebuilt (equal, not the same objects)
    when read, so reading all of them (`snapshots`) costs far more than one model's figures over the
    whole history (`model_series`, `model_newer_than`), which rebuild only that model."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._ring: deque[_Kept] = deque(maxlen=capacity)
        self._latest: tuple[_Kept, ServerSnapshot] | None = None  # the newest, also as appended
        self._lock = threading.Lock()

    def append(self, snapshot: ServerSnapshot) -> None:
        """Record one snapshot, dropping the oldest past capacity."""
        kept = _keep(snapshot)
        with self._lock:
            self._ring.append(kept)
            self._latest = (kept, snapshot) if self._ring else None  # a ring of no capacity keeps nothing

    def snapshots(self) -> tuple[ServerSnapshot, ...]:
        """All kept snapshots, oldest first (each rebuilt: reading one model's series is far cheaper)."""
        with self._lock:
            ring, latest = list(self._ring), self._latest
        return tuple(self._snapshot(kept, latest) for kept in ring)

    def newer_than(self, taken_at: float, models: bool = True) -> list[ServerSnapshot]:
        """Snapshots taken after `taken_at`, oldest first: a view catching up reads only what is new.

        models=False leaves their models out (nothing to rebuild), for views of the server and devices."""
        with self._lock:
            fresh, latest = self._newer(taken_at), self._latest
        if not models:
            return [kept.shell for kept in fresh]
        return [self._snapshot(kept, latest) for kept in fresh]

    def model_newer_than(self, model: str, taken_at: float) -> list[tuple[float, ModelSnapshot | None]]:
        """(taken_at, the model's snapshot or None) for each snapshot after `taken_at`, oldest first."""
        with self._lock:
            fresh = self._newer(taken_at)
        return [(kept.taken_at, find_model(kept.models, model)) for kept in fresh]

    @property
    def oldest(self) -> ServerSnapshot | None:
        """The oldest snapshot kept, if any."""
        with self._lock:
            oldest, latest = (self._ring[0] if self._ring else None), self._latest
        return self._snapshot(oldest, latest) if oldest is not None else None

    @property
    def oldest_taken_at(self) -> float | None:
        """When the oldest snapshot kept was taken (nothing rebuilt), if any."""
        with self._lock:
            return self._ring[0].taken_at if self._ring else None

    @property
    def latest(self) -> ServerSnapshot | None:
        """The newest snapshot, if any."""
        with self._lock:
            return self._latest[1] if self._latest else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._ring)

    def _newer(self, taken_at: float) -> list[_Kept]:
        """The kept snapshots after `taken_at`, oldest first, read from the newest end (the lock held)."""
        fresh = list(itertools.takewhile(lambda kept: kept.taken_at > taken_at, reversed(self._ring)))
        fresh.reverse()
        return fresh

    @staticmethod
    def _snapshot(kept: _Kept, latest: tuple[_Kept, ServerSnapshot] | None) -> ServerSnapshot:
        """A kept snapshot as a ServerSnapshot: the very one appended when it is the newest."""
        return latest[1] if latest is not None and latest[0] is kept else _rebuilt(kept)

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
        for taken_at, found in self.model_newer_than(model, float("-inf")):
            for series, figure in zip(sets, figures, strict=True):
                value = figure(found) if found is not None else None
                series.append((taken_at, None if value is None else float(value)))
        return sets

    def device_series(
        self, device_id: str, figure: Callable[[DeviceSnapshot], float | int | None]
    ) -> list[tuple[float, float | None]]:
        """(taken_at, value) for one device's figure; None where missing."""
        with self._lock:
            shells = [kept.shell for kept in self._ring]  # devices are kept as they are: nothing to rebuild
        series: list[tuple[float, float | None]] = []
        for snap in shells:
            found = next((d for d in snap.devices if d.id == device_id), None)
            value = figure(found) if found is not None else None
            series.append((snap.taken_at, None if value is None else float(value)))
        return series
