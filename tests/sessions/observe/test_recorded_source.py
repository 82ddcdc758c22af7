"""The recorded session source replays snapshots and records commands, as views' tests rely on."""

from __future__ import annotations

from pathlib import Path

from triton_ge_console.sessions.observe.recorded import RecordedController, RecordedSource
from triton_ge_console.sessions.observe.snapshot import Latency, ModelSnapshot, ServerSnapshot


def _snap(t: float, queue: int) -> ServerSnapshot:
    model = ModelSnapshot(
        name="llama_model", version="1", state="READY", queue_depth=queue,
        latency=Latency(p50_ms=2.0, source="summary"), failures_by_reason=(("REJECTED", 1),),
    )
    return ServerSnapshot(taken_at=t, session="demo", live=True, ready=True, models=(model,))


def test_replays_in_order_then_repeats_last_and_fills_history(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    RecordedSource.save([_snap(1.0, 0), _snap(2.0, 3)], path)
    source = RecordedSource.from_file(path)
    assert [source.poll().taken_at for _ in range(3)] == [1.0, 2.0, 2.0]
    assert source.history.model_series("llama_model", "queue_depth") == [(1.0, 0.0), (2.0, 3.0),
                                                                                    (2.0, 3.0)]
    again = source.history.latest
    assert again is not None and again == _snap(2.0, 3)


def test_controller_records_calls_and_scripted_failures() -> None:
    controller = RecordedController(failures={("reload", "bert_model"): "failed to load 'bert_model'"})
    source = RecordedSource([_snap(1.0, 0)], controller=controller)
    assert source.controller.reload("llama_model").ok
    failed = source.controller.reload("bert_model")
    assert not failed.ok and "failed to load" in failed.message
    assert controller.calls == [("reload", "llama_model", None), ("reload", "bert_model", None)]


def test_series_sets_come_from_one_copy_of_the_history_and_line_up() -> None:
    source = RecordedSource([_snap(1.0, 0), _snap(2.0, 3)])
    source.poll(), source.poll()
    queue, p50 = source.history.model_series_set("llama_model", ("queue_depth", "p50_ms"))
    assert queue == [(1.0, 0.0), (2.0, 3.0)] and p50 == [(1.0, 2.0), (2.0, 2.0)]
    absent = source.history.model_series_set("absent", ("queue_depth",))
    assert absent == [[(1.0, None), (2.0, None)]]
