"""The last 15 minutes (at 1 s) of every figure views chart, kept as numbers: one deque per model and figure.

Views chart a few numbers per model and device over time, and show the newest snapshot whole. Keeping
the numbers, not the snapshots, leaves the garbage collector a few hundred deques to walk, however long
the history: a deque of floats and None is one tracked object, where 15 minutes of 100 models' snapshots
would be 90,000.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from triton_ge_console.sessions.snapshot import DeviceSnapshot, ModelSnapshot, ServerSnapshot, version_key

DEFAULT_CAPACITY = 15 * 60
Value = float | int | None
Point = tuple[float, float | None]  # (taken_at, value)

# what is kept of each model (its newest version) and each device, by figure name
MODEL_FIGURES: dict[str, Callable[[ModelSnapshot], Value]] = {
    **{name: operator.attrgetter(name) for name in ("queue_depth", "request_rate", "inference_rate",
                                                    "execution_rate", "avg_batch", "queue_ms", "compute_ms")},
    **{name: operator.attrgetter(f"latency.{name}") for name in ("p50_ms", "p90_ms", "p99_ms", "avg_ms")}}
DEVICE_FIGURES: dict[str, Callable[[DeviceSnapshot], Value]] = {
    name: operator.attrgetter(name)
    for name in ("utilization", "memory_used_bytes", "temperature_c", "power_w")}


class _Figures:
    """One model's or device's figures, a deque each, aligned with the history's times (None: absent)."""

    __slots__ = ("last_seen", "series")

    def __init__(self, names: Iterable[str], missed: int, capacity: int) -> None:
        self.series: dict[str, deque[Value]] = {
            name: deque([None] * missed, maxlen=capacity) for name in names}
        self.last_seen = 0

    def add(self, found: Any, getters: dict[str, Callable[[Any], Value]]) -> None:
        """One snapshot's figures (all None when the model or device was absent from it)."""
        for name, values in self.series.items():
            values.append(None if found is None else getters[name](found))

    def newest(self, names: Sequence[str], count: int) -> list[list[float | None]]:
        """The newest `count` values of each named figure, oldest first, as floats."""
        return [[None if v is None else float(v) for v in _tail(self.series[name], count)] for name in names]


def _tail(values: deque[Any], count: int) -> list[Any]:
    """The last `count` items of a deque, oldest first, read from its newest end."""
    tail = list(itertools.islice(reversed(values), count))
    tail.reverse()
    return tail


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
        self.capacity = capacity
        self._times: deque[float] = deque(maxlen=capacity)
        self._models: dict[str, _Figures] = {}
        self._devices: dict[str, _Figures] = {}
        self._appended = 0  # snapshots appended so far, to know when a subject was last seen
        self._latest: ServerSnapshot | None = None
        self._lock = threading.Lock()

    def append(self, snapshot: ServerSnapshot) -> None:
        """Record one snapshot's figures, dropping the oldest past capacity."""
        if self.capacity <= 0:
            return
        models = newest_versions(snapshot.models)
        devices = {d.id: d for d in snapshot.devices}
        with self._lock:
            self._appended += 1
            self._add(self._models, models, MODEL_FIGURES)
            self._add(self._devices, devices, DEVICE_FIGURES)
            self._times.append(snapshot.taken_at)
            self._latest = snapshot

    def _add(self, kept: dict[str, _Figures], found: dict[str, Any],
             getters: dict[str, Callable[[Any], Value]]) -> None:
        """Each subject's figures from one snapshot (the lock held); new subjects start with gaps."""
        for key in found.keys() - kept.keys():
            kept[key] = _Figures(getters, len(self._times), self.capacity)
        for key, figures in list(kept.items()):
            current = found.get(key)
            if current is not None:
                figures.last_seen = self._appended
            elif self._appended - figures.last_seen >= self.capacity:
                del kept[key]  # absent from every snapshot the ring holds
                continue
            figures.add(current, getters)

    @property
    def latest(self) -> ServerSnapshot | None:
        """The newest snapshot, as appended."""
        with self._lock:
            return self._latest

    @property
    def oldest_taken_at(self) -> float | None:
        """When the oldest snapshot kept was taken, if any."""
        with self._lock:
            return self._times[0] if self._times else None

    def times(self) -> list[float]:
        """When each kept snapshot was taken, oldest first."""
        with self._lock:
            return list(self._times)

    def model_names(self) -> list[str]:
        """The models whose figures are kept (seen in at least one kept snapshot)."""
        with self._lock:
            return list(self._models)

    def __len__(self) -> int:
        with self._lock:
            return len(self._times)

    def model_series(self, model: str, figure: str) -> list[Point]:
        """(taken_at, value) for one model's figure (a MODEL_FIGURES name); None where missing."""
        return self.model_series_set(model, (figure,))[0]

    def model_series_set(self, model: str, figures: Sequence[str]) -> list[list[Point]]:
        """Several figures' series read at once, so they line up while a poller appends."""
        times, columns = self._newer(self._models, model, figures, float("-inf"))
        return [list(zip(times, column, strict=True)) for column in columns]

    def model_newer_than(self, model: str, taken_at: float,
                         figures: Sequence[str]) -> list[tuple[float, tuple[float | None, ...]]]:
        """(taken_at, the figures' values) for each snapshot after `taken_at`, oldest first: a view
        catching up reads only what is new."""
        times, columns = self._newer(self._models, model, figures, taken_at)
        return list(zip(times, zip(*columns, strict=True), strict=True)) if columns else []

    def device_series(self, device_id: str, figure: str = "utilization") -> list[Point]:
        """(taken_at, value) for one device's figure (a DEVICE_FIGURES name); None where missing."""
        times, columns = self._newer(self._devices, device_id, (figure,), float("-inf"))
        return list(zip(times, columns[0], strict=True))

    def devices_newer_than(self, taken_at: float,
                           figure: str = "utilization") -> tuple[list[float], dict[str, list[float | None]]]:
        """The times after `taken_at`, oldest first, and every device's figure at each of them."""
        with self._lock:
            count = self._count_newer(taken_at)
            ids = list(self._devices)
            return _tail(self._times, count), {i: self._devices[i].newest((figure,), count)[0] for i in ids}

    def _newer(self, kept: dict[str, _Figures], key: str, figures: Sequence[str],
               taken_at: float) -> tuple[list[float], list[list[float | None]]]:
        """The times after `taken_at` and one subject's named figures at each (None: never seen)."""
        with self._lock:
            count = self._count_newer(taken_at)
            times = _tail(self._times, count)
            found = kept.get(key)
            gaps: list[list[float | None]] = [[None] * count for _ in figures]
            columns = found.newest(figures, count) if found else gaps
        return times, columns

    def _count_newer(self, taken_at: float) -> int:
        """How many kept snapshots were taken after `taken_at` (the lock held)."""
        if taken_at == float("-inf"):
            return len(self._times)
        return sum(1 for _ in itertools.takewhile(lambda t: t > taken_at, reversed(self._times)))
