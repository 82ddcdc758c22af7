"""Time series the dashboard draws, kept incrementally (history grows at its end), thinned for charts."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence

from triton_ge_console.console.chart import Point
from triton_ge_console.sessions.observe.history import DEFAULT_CAPACITY, SnapshotHistory

# what the detail charts draw, per model (a generate model's token figures: None for others)
FIGURES = ("p50", "p99", "inferences", "requests", "ttft", "itl", "tokens")
HISTORY_FIGURES = ("p50_ms", "p99_ms", "inference_rate", "request_rate",  # their names in the history
                   "ttft_p99_ms", "itl_p99_ms", "output_tokens_per_s")
CHART_POINTS = 120  # points per chart line at most: a braille chart has two dot columns per cell


class Bucket:
    """Consecutive snapshots of one model folded into one chart point: last time, sums, counts, peaks."""

    __slots__ = ("counts", "filled", "last_time", "peaks", "sums")

    def __init__(self) -> None:
        self.last_time = float("-inf")
        self.filled = 0
        self.sums = [0.0] * len(FIGURES)
        self.counts = [0] * len(FIGURES)
        self.peaks = [float("-inf")] * len(FIGURES)

    def add(self, taken_at: float, figures: Sequence[float | None]) -> None:
        """Fold in one snapshot's figures (a None is left out of that figure's average and peak)."""
        self.last_time, self.filled = taken_at, self.filled + 1
        for index, value in enumerate(figures):
            if value is not None:
                self.sums[index] += value
                self.counts[index] += 1
                self.peaks[index] = max(self.peaks[index], value)


class ModelSeriesCache:
    """One model's figures over the history, folded into chart points as snapshots arrive.

    Points are buckets of a fixed number of consecutive snapshots, so a finished bucket never changes and
    a refresh folds in only the new snapshots: thinning 15 minutes of history for a chart costs nothing
    at redraw. The oldest point may still include a few snapshots the history has dropped since."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, points: int = CHART_POINTS) -> None:
        self.model: str | None = None
        self.size = max(1, -(-capacity // points))  # snapshots per point
        self.buckets: deque[Bucket] = deque(maxlen=-(-capacity // self.size) + 1)
        self._history: SnapshotHistory | None = None

    def update(self, model: str, history: SnapshotHistory, until: float | None = None) -> None:
        """Catch up with the history up to `until` (the snapshot on screen: the poller may already have
        added newer ones); rebuilt from scratch when the model or the history changes."""
        last = self.buckets[-1].last_time if self.buckets else float("-inf")
        if model != self.model or is_new_history(self._history, history, last):
            self.model, self._history = model, history
            self.buckets.clear()
            last = float("-inf")
        for taken_at, figures in history.model_newer_than(model, last, HISTORY_FIGURES):
            if until is not None and taken_at > until:
                break
            if not self.buckets or self.buckets[-1].filled == self.size:
                self.buckets.append(Bucket())
            self.buckets[-1].add(taken_at, figures)
        oldest = history.oldest_taken_at
        while self.buckets and oldest is not None and self.buckets[0].last_time < oldest:
            self.buckets.popleft()  # a history smaller than this cache forgot all of that point

    def series(self, figure: str, peak: bool = False) -> list[Point]:
        """One figure (a FIGURES name) per point: its average, or its peak (for tail latency)."""
        index = FIGURES.index(figure)
        if peak:
            return [(b.last_time, b.peaks[index] if b.counts[index] else None) for b in self.buckets]
        return [(b.last_time, b.sums[index] / b.counts[index] if b.counts[index] else None)
                for b in self.buckets]


def is_new_history(cached: SnapshotHistory | None, history: SnapshotHistory, last: float) -> bool:
    """Whether a cache must start over: another history, or one whose newest is older than what it has."""
    newest = history.latest
    return history is not cached or (newest is not None and newest.taken_at < last)


Total = tuple[float, int]  # running sum and count of the known readings


class UtilizationCache:
    """Recent snapshots' device utilizations as running totals, so a sparkline cell is one subtraction."""

    def __init__(self, cells: int, max_bucket: int) -> None:
        self.cells, self.max_bucket = cells, max_bucket
        self.times: deque[float] = deque(maxlen=cells * max_bucket)
        # device -> running totals, one more than times: entry i is the total before the i-th kept snapshot
        self.totals: dict[str, deque[Total]] = {}
        self._history: SnapshotHistory | None = None

    def update(self, history: SnapshotHistory) -> None:
        """Read the snapshots added since the last call (all of the window when the history changed)."""
        last = self.times[-1] if self.times else float("-inf")
        if is_new_history(self._history, history, last):
            self._history = history
            self.times.clear()
            self.totals.clear()
            last = float("-inf")
        times, readings = history.devices_newer_than(last)
        window = self.times.maxlen or 0
        for index in range(max(0, len(times) - window), len(times)):
            self._add(times[index], {device: values[index] for device, values in readings.items()})
        for _ in range(len(self.times) - len(history)):  # a ring smaller than the window forgot these
            self.times.popleft()
            for totals in self.totals.values():
                totals.popleft()

    def _add(self, taken_at: float, utilization: dict[str, float | None]) -> None:
        """One snapshot's readings added to each device's running totals (a missing reading adds nothing)."""
        readings = {device: value for device, value in utilization.items() if value is not None}
        window = self.times.maxlen or 0
        for device_id in readings.keys() - self.totals.keys():
            self.totals[device_id] = deque([(0.0, 0)] * (len(self.times) + 1), maxlen=window + 1)
        self.times.append(taken_at)
        for device_id, totals in self.totals.items():
            total, count = totals[-1]
            value = readings.get(device_id)
            totals.append((total + value, count + 1) if value is not None else (total, count))

    def series(self, device_ids: Sequence[str]) -> dict[str, list[float | None]]:
        """Each device's utilization averaged into at most `cells` cells, aligned to the oldest reading."""
        count = len(self.times)
        size = min(self.max_bucket, max(1, -(-count // self.cells)))
        edges = [*range(0, count, size), count]
        return {device_id: _cell_averages(self.totals.get(device_id), edges) for device_id in device_ids}


def _cell_averages(totals: deque[Total] | None, edges: list[int]) -> list[float | None]:
    """The average known reading between consecutive edges (None where there was none)."""
    if totals is None:
        return [None] * (len(edges) - 1)
    kept = list(totals)
    cells: list[float | None] = []
    for start, end in itertools.pairwise(edges):
        (sum_before, count_before), (sum_after, count_after) = kept[start], kept[end]
        cells.append((sum_after - sum_before) / (count_after - count_before) if count_after > count_before
                     else None)
    return cells
