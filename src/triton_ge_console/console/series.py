"""The selected model's time series, kept incrementally (history grows at its end), thinned for charts."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from triton_ge_console.sessions.history import DEFAULT_CAPACITY
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

    def update(self, model: str, snapshots: Sequence[ServerSnapshot]) -> None:
        """Catch up with the history (rebuilt from scratch when the model changes)."""
        if model != self.model:
            self.model = model
            self.points.clear()
        last = self.points[-1].taken_at if self.points else float("-inf")
        fresh: list[ServerSnapshot] = []
        for snapshot in reversed(snapshots):
            if snapshot.taken_at <= last:
                break
            fresh.append(snapshot)
        self.points.extend(figures_of(s, model) for s in reversed(fresh))

    def series(self, figure: Callable[[Figures], float | None]) -> list[Point]:
        """(taken_at, value) for one figure."""
        return [(p.taken_at, figure(p)) for p in self.points]


def thin(points: Sequence[Point], max_points: int, peak: bool = False) -> list[Point]:
    """At most max_points points: consecutive buckets averaged (or their peak, for tail latency)."""
    if len(points) <= max_points:
        return list(points)
    size = -(-len(points) // max_points)
    thinned: list[Point] = []
    for start in range(0, len(points), size):
        bucket = points[start:start + size]
        values = [v for _, v in bucket if v is not None]
        value = (max(values) if peak else sum(values) / len(values)) if values else None
        thinned.append((bucket[-1][0], value))
    return thinned

