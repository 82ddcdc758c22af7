"""The snapshot history keeps models packed: what it hands back equals what went in, and the GC skips it."""

from __future__ import annotations

import gc

from triton_ge_console.sessions.history import SnapshotHistory
from triton_ge_console.sessions.packed import pack_model, unpack_model
from triton_ge_console.sessions.snapshot import (
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


def test_a_packed_model_unpacks_equal() -> None:
    model = _snapshot(3).models[0]
    assert unpack_model(pack_model(model)) == model
    bare = ModelSnapshot("bare", "1", "LOADING")
    assert unpack_model(pack_model(bare)) == bare


def test_the_history_hands_back_what_was_appended() -> None:
    history = SnapshotHistory(capacity=5)
    appended = [_snapshot(step) for step in range(8)]
    for snapshot in appended:
        history.append(snapshot)
    assert history.snapshots() == tuple(appended[3:]) and history.oldest == appended[3]
    assert history.oldest_taken_at == appended[3].taken_at
    assert history.latest is appended[-1] and history.newer_than(appended[-2].taken_at)[0] is appended[-1]
    assert history.newer_than(appended[5].taken_at) == appended[6:]
    shells = history.newer_than(appended[5].taken_at, models=False)
    assert [s.models for s in shells] == [(), ()]
    assert [s.devices for s in shells] == [a.devices for a in appended[6:]]


def test_a_history_of_no_capacity_keeps_nothing() -> None:
    history = SnapshotHistory(capacity=0)
    history.append(_snapshot(0))
    assert len(history) == 0 and history.latest is None and history.oldest_taken_at is None


def test_one_models_figures_read_from_the_history_match_the_snapshots() -> None:
    history = SnapshotHistory()
    appended = [_snapshot(step) for step in range(6)]
    for snapshot in appended:
        history.append(snapshot)
    for name in ("m0", "m1", "absent"):
        assert history.model_newer_than(name, appended[1].taken_at) == [
            (s.taken_at, s.model(name)) for s in appended[2:]]
        assert history.model_series(name, lambda m: m.queue_depth) == [
            (s.taken_at, None if s.model(name) is None else float(s.model(name).queue_depth))  # type: ignore[union-attr]
            for s in appended]


def test_the_history_adds_almost_nothing_for_the_garbage_collector_to_walk() -> None:
    history = SnapshotHistory(capacity=200)
    gc.collect()
    before = len(gc.get_objects())
    for step in range(200):
        history.append(_snapshot(step, models=50))
    for _ in range(4):  # a tuple is untracked once its items are: nested ones take a collection per level
        gc.collect()
    tracked = len(gc.get_objects()) - before
    assert tracked < 200 * 6  # the server, its endpoints and devices per snapshot; 10,000 models untracked
