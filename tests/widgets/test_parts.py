"""The dashboard's parts on their own: log tail, load-test control, poller, formatting."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from tests.waiting import wait_until
from tests.widgets.recording import recording
from triton_ge_console.display import duration, memory, number, percent
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.sessions.observe.source import CommandResult
from triton_ge_console.widgets import BackgroundPoller, FilteredLogTail, LoadTestControl
from triton_ge_console.widgets.command_runner import describe


def test_log_tail_reads_increments_partial_lines_and_truncation(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    tail = FilteredLogTail(log, max_lines=3)
    tail.refresh()
    assert "no log at" in tail.view.value
    log.write_text("one\ntwo\nthr", encoding="utf-8")
    tail.refresh()
    assert tail.lines == ["one", "two"]
    with open(log, "a", encoding="utf-8") as handle:
        handle.write("ee\nfour\n")
    tail.refresh()
    assert tail.lines == ["two", "three", "four"]  # bounded to max_lines, partial line completed
    log.write_text("fresh\n", encoding="utf-8")  # rotated / truncated
    tail.refresh()
    assert tail.lines == ["fresh"]


def test_log_tail_filter_and_failure_highlight(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("I1130 model ready\nE1130 CompileGraph failed\nW1130 slow\n", encoding="utf-8")
    tail = FilteredLogTail(log)
    tail.refresh()
    assert "color:firebrick'>E1130 CompileGraph failed</span>" in tail.view.value
    tail.filter.value = "ready"
    assert tail.visible() == ["I1130 model ready"] and "slow" not in tail.view.value


def runner_result(model: str, concurrency: int, duration_s: float) -> dict[str, Any]:
    """What a load generator returns, in plain fields."""
    return {"model": model, "concurrency": concurrency, "requests": 40 * concurrency, "failures": 0,
            "throughput_rps": 40.0 * concurrency / duration_s, "p50_ms": 1.25, "latencies_ms": [1.0, 1.5]}


def test_load_test_control_runs_and_shows_the_figures() -> None:
    control = LoadTestControl(runner_result, background=False, concurrency=2, duration_s=4.0)
    control.set_models(["bert_model", "llama_model"])
    control.model.value = "llama_model"
    control.run_button.click()
    assert control.results[-1]["requests"] == 80
    assert "<td>throughput_rps</td><td>20.000</td>" in control.output.value
    assert "latencies_ms" not in control.output.value  # lists are not tabulated
    assert "✓ 2 clients on llama_model for 4s" in control.status.value and not control.run_button.disabled
    control.set_models(["bert_model"])
    assert control.model.value == "bert_model"


def test_load_test_control_reports_a_failing_run_and_disables_while_running() -> None:
    gate, entered = threading.Event(), threading.Event()

    def slow_then_fail(model: str, concurrency: int, duration_s: float) -> dict[str, Any]:
        entered.set()
        gate.wait(30)
        raise ConnectionError(f"{model}: server went away")

    control = LoadTestControl(slow_then_fail, models=["llama_model"])
    assert control.start()
    assert entered.wait(10) and control.run_button.disabled and not control.start()
    gate.set()
    control.wait(10)
    assert "✗ load test failed: ConnectionError: llama_model: server went away" in control.status.value
    assert not control.run_button.disabled and control.results == []


def test_load_test_control_without_a_load_generator_is_disabled() -> None:
    control = LoadTestControl(None, models=["llama_model"])
    assert control.run_button.disabled and not control.start()
    assert "no load generator" in control.status.value


def test_poller_hands_snapshots_over_on_its_thread_and_stops() -> None:
    seen: list[tuple[float, str]] = []

    def record(snap: ServerSnapshot) -> None:
        seen.append((snap.taken_at, threading.current_thread().name))

    poller = BackgroundPoller(RecordedSource(recording(3)), record, interval=0.01)
    poller.start()
    poller.start()  # no second thread
    wait_until(lambda: len(seen) >= 4, 30, interval=0.01, what="four snapshots")
    poller.close()
    count = len(seen)
    assert count >= 4 and [t for t, _ in seen[:3]] == [s.taken_at for s in recording(3)]
    assert {name for _, name in seen} == {"ge-poller-demo"}
    assert not poller.running and len(seen) == count
    poller.close()


def test_poller_rejects_a_non_positive_interval() -> None:
    try:
        BackgroundPoller(RecordedSource(recording(1)), lambda s: None, interval=0)
    except ValueError as exc:
        assert "poll interval must be > 0" in str(exc)
    else:
        raise AssertionError("interval 0 accepted")


def test_missing_figures_format_as_a_dash() -> None:
    shown = [number(None), number(2), number(2.345, 2), percent(None), percent(0.634)]
    assert shown == ["—", "2", "2.35", "—", "63%"]
    assert memory(None, None) == "—" and memory(None, 2 * 1024**3) == "—/2.0 GiB"
    assert duration(3725.9) == "01:02:05" and duration(None) == "—"
    assert duration(90061) == "1d 01:01:01"  # as the console shows a long uptime (display.py)


def test_snapshot_round_trip_recording_drives_the_poller(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    RecordedSource.save(recording(2), path)
    got: list[ServerSnapshot] = []
    poller = BackgroundPoller(RecordedSource.from_file(path), got.append)
    assert poller.poll_once() is not None and got[0] == recording(2)[0]


def test_status_lines_do_not_repeat_what_the_message_already_says() -> None:
    own_words = CommandResult("reload", "llama_model", ok=False,
                              message="reload llama_model failed: Triton kept version 1 serving")
    bare = CommandResult("load", "bert_model", ok=False, message="failed to load 'bert_model'",
                         duration_s=1.25)
    assert describe(own_words) == "✗ reload llama_model failed: Triton kept version 1 serving"
    assert describe(bare) == "✗ load bert_model failed: failed to load 'bert_model' (1.2s)"


def test_log_tail_survives_filtering_while_the_poller_reads(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("", encoding="utf-8")
    tail = FilteredLogTail(log, max_lines=50)
    failures: list[BaseException] = []
    done = threading.Event()

    def writer_and_reader() -> None:
        try:
            for i in range(300):
                with open(log, "a", encoding="utf-8") as handle:
                    handle.write(f"I1130 line {i}\n")
                tail.refresh()
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer_and_reader)
    thread.start()
    while not done.is_set():
        tail.filter.value = "line 1" if tail.filter.value != "line 1" else ""
    thread.join()
    tail.filter.value = ""
    assert failures == [] and tail.lines[-1] == "I1130 line 299" and len(tail.lines) == 50


def test_log_tail_reads_only_the_end_of_a_huge_backlog(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    line = "I1130 " + "x" * 94 + "\n"  # 101 bytes
    log.write_text(line * 30_000 + "E1130 the last line\n", encoding="utf-8")  # ~3 MB
    tail = FilteredLogTail(log, max_lines=20_000)
    tail.refresh()
    assert tail.lines[-1] == "E1130 the last line"
    assert 10_000 < len(tail.lines) < 10_500 and all(x == line[:-1] for x in tail.lines[:-1])


def test_a_count_chart_has_whole_ticks_and_room_for_its_labels() -> None:
    """The short queue-depth chart: whole-number ticks, a top of at least COUNT_TICKS, so no label repeats
    or overlaps (a depth of 5 once drew 0, 0.5, 1 … 5 on 160 px)."""
    from triton_ge_console.widgets.charts import COUNT_TICKS, TimeChart

    chart = TimeChart("queue depth", ("queue depth",), "requests", height="160px", counts=True)
    y_axis = chart.figure.axes[1]
    assert y_axis.tick_format == "d" and y_axis.num_ticks == COUNT_TICKS
    chart.plot(np.array([-3.0, -2.0, -1.0]), [np.array([0.0, 1.0, np.nan])])
    assert chart.y_scale.max == COUNT_TICKS
    chart.plot(np.array([-3.0, -2.0, -1.0]), [np.array([2.0, 5.4, 3.0])])
    assert chart.y_scale.max == 6.0
    plain = TimeChart("latency", ("p50",), "ms")
    assert plain.figure.axes[1].tick_format == ".3~g" and plain.y_scale.max is None
