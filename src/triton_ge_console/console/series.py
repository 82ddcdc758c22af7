"""Time series the dashboard draws, kept incrementally (history grows at its end), thinned for charts."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from triton_ge_console.sessions.history import DEFAULT_CAPACITY, SnapshotHistory
from triton_ge_console.sessions.snapshot import ServerSnapshot

Point = tuple[float, float | None]


@dataclass(frozen=True)
class Figures:
    """The figures charted for one model at one instant."""

    taken_at: float
    p50: float | None
    p99: float | None
    inferences: float | None
    requests: float | None


def figures_of(snapshot: ServerSnapshot, model: str) -> Figures:
    """One model's charted figures in one snapshot (all None when the model is absent)."""
    found = snapshot.model(model)
    if found is None:
        return Figures(snapshot.taken_at, None, None, None, None)
    return Figures(snapshot.taken_at, found.latency.p50_ms, found.latency.p99_ms, found.inference_rate,
                   found.request_rate)


class ModelSeriesCache:
    """Figures for one model over the history; each refresh only reads the snapshots that are new."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.model: str | None = None
        self.points: deque[Figures] = deque(maxlen=capacity)
        self._history: SnapshotHistory | None = None

    def update(self, model: str, history: SnapshotHistory) -> None:
        """Catch up with the history (rebuilt from scratch when the model or the history changes)."""
        last = self.points[-1].taken_at if self.points else float("-inf")
        if model != self.model or is_new_history(self._history, history, last):
            self.model, self._history = model, history
            self.points.clear()
            last = float("-inf")
        self.points.extend(figures_of(s, model) for s in history.newer_than(last))

    def thinned(self, figure: str, max_points: int, peak: bool = False) -> list[Point]:
        """One figure (a Figures field) thinned for a chart, without building its full series first."""
        times = [p.taken_at for p in self.points]
        return thin_values(times, list(map(attrgetter(figure), self.points)), max_points, peak)


def thin_values(times: Sequence[float], values: Sequence[float | None], max_points: int,
                peak: bool = False) -> list[Point]:
    """At most max_points points: each bucket's last time with its average (or peak, for tail latency)."""
    if len(times) <= max_points:
        return list(zip(times, values, strict=True))
    size = -(-len(times) // max_points)
    last_times = [times[min(start + size, len(times)) - 1] for start in range(0, len(times), size)]
    return list(zip(last_times, bucketed(values, size, peak), strict=True))


def bucketed(values: Sequence[float | None], size: int, peak: bool = False) -> list[float | None]:
    """Consecutive buckets of `size` values, each its average (or peak) of the known ones, else None."""
    cells: list[float | None] = []
    for start in range(0, len(values), size):
        known = [v for v in values[start:start + size] if v is not None]
        cells.append((max(known) if peak else sum(known) / len(known)) if known else None)
    return cells


def is_new_history(cached: SnapshotHistory | None, history: SnapshotHistory, last: float) -> bool:
    """Whether a cache must start over: another history, or one whose newest is older than what it has."""
    newest = history.latest
    return history is not cached or (newest is not None and newest.taken_at < last)


class UtilizationCache:
    """Recent snapshots' device utilizations, kept as the history grows, so sparklines never rescan it."""

    def __init__(self, cells: int, max_bucket: int) -> None:
        self.cells, self.max_bucket = cells, max_bucket
        self.times: deque[float] = deque(maxlen=cells * max_bucket)
        self.columns: dict[str, deque[float | None]] = {}  # device -> one reading per kept snapshot
        self._history: SnapshotHistory | None = None

    def update(self, history: SnapshotHistory) -> None:
        """Read the snapshots added since the last call (all of the window when the history changed)."""
        last = self.times[-1] if self.times else float("-inf")
        if is_new_history(self._history, history, last):
            self._history = history
            self.times.clear()
            self.columns.clear()
            last = float("-inf")
        for snapshot in history.newer_than(last)[-(self.times.maxlen or 0):]:
            self._add(snapshot)
        for _ in range(len(self.times) - len(history)):  # a ring smaller than the window forgot these
            self.times.popleft()
            for column in self.columns.values():
                column.popleft()

    def _add(self, snapshot: ServerSnapshot) -> None:
        """One snapshot's readings: a column per device, None where it reported nothing."""
        readings = {d.id: d.utilization for d in snapshot.devices if d.utilization is not None}
        for device_id in readings.keys() - self.columns.keys():
            self.columns[device_id] = deque([None] * len(self.times), maxlen=self.times.maxlen)
        self.times.append(snapshot.taken_at)
        for device_id, column in self.columns.items():
            column.append(readings.get(device_id))

    def series(self, device_ids: Sequence[str]) -> dict[str, list[float | None]]:
        """Each device's utilization averaged into at most `cells` cells, aligned to the oldest reading."""
        count = len(self.times)
        size = min(self.max_bucket, max(1, -(-count // self.cells)))
        return {device_id: bucketed(list(self.columns.get(device_id, ())) or [None] * count, size)
                for device_id in device_ids}
