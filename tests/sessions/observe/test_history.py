"""The snapshot history keeps figures as numbers: what it hands back matches what went in, and the GC
has next to nothing to walk."""

from __future__ import annotations

import gc

from triton_ge_console.sessions.observe.history import MODEL_FIGURES, SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import (
    DeviceSnapshot,
    Endpoints,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
)


def _snapshot(step: int, models: int = 3) -> ServerSnapshot:
    """Models whose figures move with the step; model m1 missing on odd steps; m0 in two versions."""
    latency = Latency(p50_ms=1.0 + step, p99_ms=None, source="summary")
    rows = [ModelSnapshot(name=f"m{i}", version="1", state="READY", backend="ge", queue_depth=step + i,
                          request_rate=step * 1.5, latency=latency, failures_by_reason=(("REJECTED", step),),
                          devices=("0",), execution_mode="cpu-emulated")
            for i in range(models) if not (i == 1 and step % 2)]
    rows.append(ModelSnapshot(name="m0", version="2", state="READY", queue_depth=100 + step))
    devices = (DeviceSnapshot("0", "cpu-emulated", "910B", utilization=step / 10),)
    return ServerSnapshot(1_790_000_000.0 + step, "t", True, True, "2.51.0", 1.0 + step,
                          Endpoints("http://127.0.0.1:1"), tuple(rows), devices)


def test_the_history_keeps_the_newest_snapshot_and_the_times_of_the_others() -> None:
    history = SnapshotHistory(capacity=5)
    appended = [_snapshot(step) for step in range(8)]
    for snapshot in appended:
        history.append(snapshot)
    assert history.times() == [s.taken_at for s in appended[3:]] and len(history) == 5
    assert history.oldest_taken_at == appended[3].taken_at
    assert history.latest is appended[-1]


def test_a_history_of_no_capacity_keeps_nothing() -> None:
    history = SnapshotHistory(capacity=0)
    history.append(_snapshot(0))
    assert len(history) == 0 and history.latest is None and history.oldest_taken_at is None


def _figure(snapshot: ServerSnapshot, name: str, figure: str) -> float | None:
    """A model's figure read from the snapshot itself, as the history should hand it back."""
    model = snapshot.model(name)
    value = MODEL_FIGURES[figure](model) if model is not None else None
    return None if value is None else float(value)


def test_one_models_figures_read_from_the_history_match_the_snapshots() -> None:
    history = SnapshotHistory()
    appended = [_snapshot(step) for step in range(6)]
    for snapshot in appended:
        history.append(snapshot)
    for name in ("m0", "m1", "absent"):  # m0: its newest version; m1: missing on odd steps
        assert history.model_newer_than(name, appended[1].taken_at, ("queue_depth", "p50_ms")) == [
            (s.taken_at, (_figure(s, name, "queue_depth"), _figure(s, name, "p50_ms"))) for s in appended[2:]]
        assert history.model_series(name, "queue_depth") == [
            (s.taken_at, _figure(s, name, "queue_depth")) for s in appended]
    assert history.device_series("0") == [(s.taken_at, s.devices[0].utilization) for s in appended]
    times, readings = history.devices_newer_than(appended[3].taken_at)
    assert times == [s.taken_at for s in appended[4:]] and readings == {"0": [0.4, 0.5]}


def test_a_model_that_comes_late_has_gaps_before_and_one_gone_for_a_whole_ring_is_forgotten() -> None:
    history = SnapshotHistory(capacity=4)
    early, late = _snapshot(0, models=1), _snapshot(1, models=3)
    for snapshot in (early, late, early, early, early):
        history.append(snapshot)
    assert [v for _, v in history.model_series("m2", "queue_depth")] == [3.0, None, None, None]
    history.append(early)  # m2 was in none of the last four
    assert history.model_series("m2", "queue_depth") == [(early.taken_at, None)] * 4
    assert "m2" not in history.model_names()  # forgotten, not kept as gaps forever


def _tracked_after(history: SnapshotHistory, steps: range) -> int:
    """Objects the garbage collector tracks once these snapshots are appended and collected."""
    for step in steps:
        history.append(_snapshot(step, models=50))
    gc.collect()
    return len(gc.get_objects())


def test_the_garbage_collector_walks_as_much_for_a_long_history_as_for_a_short_one() -> None:
    history = SnapshotHistory(capacity=200)
    gc.collect()
    before = len(gc.get_objects())
    short = _tracked_after(history, range(20))
    long = _tracked_after(history, range(20, 400))  # twice round the ring
    # one tracked object kept per appended snapshot would add 380; other threads of a full test run (a
    # poller, an event loop winding down) make or free a few dozen meanwhile
    assert abs(long - short) < 100
    # per model and device its figures' deques, their dict and their holder; the newest snapshot (its
    # server, endpoints, tuples, 51 models) and what the test and the collector made meanwhile
    assert short - before < 51 * (len(MODEL_FIGURES) + 2) + 150
