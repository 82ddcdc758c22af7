"""The last 15 minutes (at 1 s) of every figure views chart, kept as numbers: one ring per model and figure.

Views chart a few numbers per model and device over time, and show the newest snapshot whole. Keeping
the numbers, not the snapshots, leaves the garbage collector nothing to walk however long the history:
each figure is a ring of C doubles (an array, NaN where the figure was missing), which the collector does
not track at all; a deque of Python floats would be one tracked object too, but a full collection visits
each of its items (a million at 100 models), and 15 minutes of snapshots would be 90,000 objects.
"""

from __future__ import annotations

import math
import operator
import threading
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from triton_ge_console.sessions.observe.snapshot import (
    DeviceSnapshot,
    ModelSnapshot,
    ServerSnapshot,
    version_key,
)

DEFAULT_CAPACITY = 15 * 60
# a generate model's token figures kept over time (None for other models)
GENERATION_FIGURES = ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "output_tokens_per_s")
Value = float | int | None
Point = tuple[float, float | None]  # (taken_at, value)

# what is kept of each model (its newest version) and each device, by figure name
MODEL_FIGURES: dict[str, Callable[[ModelSnapshot], Value]] = {
    **{name: operator.attrgetter(name) for name in ("queue_depth", "request_rate", "inference_rate",
                                                    "execution_rate", "avg_batch", "queue_ms", "compute_ms")},
    **{name: operator.attrgetter(f"latency.{name}") for name in ("p50_ms", "p90_ms", "p99_ms", "avg_ms")},
    **{name: (lambda m, n=name: None if m.generation is None else getattr(m.generation, n))  # type: ignore[misc]
       for name in GENERATION_FIGURES}}
DEVICE_FIGURES: dict[str, Callable[[DeviceSnapshot], Value]] = {
    name: operator.attrgetter(name)
    for name in ("utilization", "memory_used_bytes", "temperature_c", "power_w")}


class _Figures:
    """One model's or device's figures, a ring each, in step with the history's ring of times."""

    __slots__ = ("last_seen", "series")

    def __init__(self, names: Iterable[str], capacity: int) -> None:
        self.series = {name: _ring(capacity) for name in names}  # NaN: absent, or not yet seen
        self.last_seen = 0

    def put(self, slot: int, found: Any, getters: dict[str, Callable[[Any], Value]]) -> None:
        """One snapshot's figures into a slot (all missing when the model or device was absent from it)."""
        for name, values in self.series.items():
            value = None if found is None else getters[name](found)
            values[slot] = math.nan if value is None else value


def _ring(capacity: int) -> array[float]:
    """A ring of doubles, every slot missing."""
    return array("d", [math.nan]) * capacity


def _read(values: array[float], start: int, count: int) -> list[float | None]:
    """`count` values of a ring from slot `start` on, wrapping round; None where missing."""
    end = start + count
    wrapped = end > len(values)
    items = [*values[start:], *values[:end - len(values)]] if wrapped else values[start:end].tolist()
    return [None if math.isnan(value) else value for value in items]


def newest_versions(models: Iterable[ModelSnapshot]) -> dict[str, ModelSnapshot]:
    """Each model name's newest version, as ServerSnapshot.model finds it."""
    newest: dict[str, ModelSnapshot] = {}
    for model in models:
        kept = newest.get(model.name)
        if kept is None or version_key(model.version) > version_key(kept.version):
            newest[model.name] = model
    return newest


class SnapshotHistory:
    """Recent figures by model and device, and the newest snapshot whole; safe to append from a poller
    thread while views read. A model or device absent for a whole ring is forgotten."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = max(0, capacity)
        self._times = _ring(self.capacity)
        self._models: dict[str, _Figures] = {}
        self._devices: dict[str, _Figures] = {}
        self._appended = 0  # snapshots appended so far: the next goes to slot _appended % capacity
        self._latest: ServerSnapshot | None = None
        self._lock = threading.Lock()

    def append(self, snapshot: ServerSnapshot) -> None:
        """Record one snapshot's figures, over the oldest past capacity."""
        if not self.capacity:
            return
        models = newest_versions(snapshot.models)
        devices = {d.id: d for d in snapshot.devices}
        with self._lock:
            slot = self._appended % self.capacity
            self._appended += 1
            self._add(self._models, models, MODEL_FIGURES, slot)
            self._add(self._devices, devices, DEVICE_FIGURES, slot)
            self._times[slot] = snapshot.taken_at
            self._latest = snapshot

    def _add(self, kept: dict[str, _Figures], found: dict[str, Any],
             getters: dict[str, Callable[[Any], Value]], slot: int) -> None:
        """Each subject's figures from one snapshot (the lock held); new subjects start with gaps."""
        for key in found.keys() - kept.keys():
            kept[key] = _Figures(getters, self.capacity)
        for key, figures in list(kept.items()):
            current = found.get(key)
            if current is not None:
                figures.last_seen = self._appended
            elif self._appended - figures.last_seen >= self.capacity:
                del kept[key]  # absent from every snapshot the ring holds
                continue
            figures.put(slot, current, getters)

    @property
    def latest(self) -> ServerSnapshot | None:
        """The newest snapshot, as appended."""
        with self._lock:
            return self._latest

    @property
    def oldest_taken_at(self) -> float | None:
        """When the oldest snapshot kept was taken, if any."""
        with self._lock:
            kept = self._kept()
            return self._times[self._start(kept)] if kept else None

    def times(self) -> list[float]:
        """When each kept snapshot was taken, oldest first."""
        with self._lock:
            kept = self._kept()
            return [t for t in _read(self._times, self._start(kept), kept) if t is not None]

    def model_names(self) -> list[str]:
        """The models whose figures are kept (seen in at least one kept snapshot)."""
        with self._lock:
            return list(self._models)

    def __len__(self) -> int:
        with self._lock:
            return self._kept()

    def model_series(self, model: str, figure: str) -> list[Point]:
        """(taken_at, value) for one model's figure (a MODEL_FIGURES name); None where missing."""
        return self.model_series_set(model, (figure,))[0]

    def model_series_set(self, model: str, figures: Sequence[str]) -> list[list[Point]]:
        """Several figures' series read at once, so they line up while a poller appends."""
        times, columns = self._newer(self._models, model, figures, -math.inf)
        return [list(zip(times, column, strict=True)) for column in columns]

    def model_newer_than(self, model: str, taken_at: float,
                         figures: Sequence[str]) -> list[tuple[float, tuple[float | None, ...]]]:
        """(taken_at, the figures' values) for each snapshot after `taken_at`, oldest first: a view
        catching up reads only what is new."""
        times, columns = self._newer(self._models, model, figures, taken_at)
        return list(zip(times, zip(*columns, strict=True), strict=True)) if columns else []

    def device_series(self, device_id: str, figure: str = "utilization") -> list[Point]:
        """(taken_at, value) for one device's figure (a DEVICE_FIGURES name); None where missing."""
        times, columns = self._newer(self._devices, device_id, (figure,), -math.inf)
        return list(zip(times, columns[0], strict=True))

    def devices_newer_than(self, taken_at: float,
                           figure: str = "utilization") -> tuple[list[float], dict[str, list[float | None]]]:
        """The times after `taken_at`, oldest first, and every device's figure at each of them."""
        with self._lock:
            count = self._count_newer(taken_at)
            start = self._start(count)
            times = [t for t in _read(self._times, start, count) if t is not None]
            return times, {i: _read(kept.series[figure], start, count) for i, kept in self._devices.items()}

    def _newer(self, kept: dict[str, _Figures], key: str, figures: Sequence[str],
               taken_at: float) -> tuple[list[float], list[list[float | None]]]:
        """The times after `taken_at` and one subject's named figures at each (None: never seen)."""
        with self._lock:
            count = self._count_newer(taken_at)
            start = self._start(count)
            times = [t for t in _read(self._times, start, count) if t is not None]
            found = kept.get(key)
            gap: list[float | None] = [None] * count
            columns = [_read(found.series[name], start, count) if found else gap for name in figures]
        return times, columns

    def _kept(self) -> int:
        """How many snapshots the ring holds (the lock held)."""
        return min(self._appended, self.capacity)

    def _start(self, count: int) -> int:
        """The slot of the oldest of the newest `count` snapshots (the lock held)."""
        return (self._appended - count) % self.capacity if self.capacity else 0

    def _count_newer(self, taken_at: float) -> int:
        """How many kept snapshots were taken after `taken_at`, counted from the newest (the lock held)."""
        kept = self._kept()
        if taken_at == -math.inf:
            return kept
        count = 0
        while count < kept and self._times[(self._appended - 1 - count) % self.capacity] > taken_at:
            count += 1
        return count
