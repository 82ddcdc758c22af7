"""The composite dashboard renders recorded snapshots into widget state, with no kernel."""

from __future__ import annotations

import base64
import dataclasses
import math
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_until
from tests.widgets.recording import T0, down, recording, snapshot
from triton_ge_console.sessions.observe.recorded import RecordedController, RecordedSource
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot
from triton_ge_console.widgets import Dashboard


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    """A dashboard over a 4-step recording, updated by explicit refreshes."""
    log = tmp_path / "server.log"
    log.write_text("I1130 started\nE1130 failed to load 'bert_model'\n", encoding="utf-8")
    source = RecordedSource(recording(4), log_path=log)
    board = Dashboard(source, autostart=False, background=False)
    for _ in range(4):
        board.refresh()
    yield board
    board.close()


def test_header_and_model_rows_show_the_latest_snapshot(dashboard: Dashboard) -> None:
    assert "session demo" in dashboard.header.value and "Triton 2.51.0" in dashboard.header.value
    assert "01:00:03" in dashboard.header.value and "● ready" in dashboard.header.value
    assert "http http://127.0.0.1:8000" in dashboard.header.value and "refresh 1s" in dashboard.header.value
    state = dashboard.state()
    assert state["polls"] == 4 and state["ready"] is True
    assert state["models"]["llama_model:1"] == {
        "MODEL": "llama_model", "VER": "1", "STATE": "READY", "BACKEND": "ge", "QUEUE": "6", "REQ/S": "30.0",
        "INF/S": "90.0", "BATCH": "2.5", "AVG ms": "12.00", "P50 ms": "9.00", "P99 ms": "27.00", "FAIL": "3",
        "T/O": "3", "MODE": "cpu-emulated"}
    assert "darkorange" in dashboard.models.rows[("llama_model", "1")].cells["T/O"].value
    assert state["models"]["bert_model:1"]["STATE"] == "UNAVAILABLE"
    assert state["models"]["bert_model:1"]["P50 ms"] == "—"
    assert "om_model_path does not exist" in dashboard.models.reasons.value


def test_buttons_follow_model_state(dashboard: Dashboard) -> None:
    assert dashboard.state()["buttons"] == {"llama_model:1": ["reload", "unload"], "bert_model:1": ["load"]}


def test_device_gauges_show_utilization_memory_and_history(dashboard: Dashboard) -> None:
    row = dashboard.devices.rows["0"]
    assert row.utilization.value == pytest.approx(0.6)
    assert row.utilization_label.value == "60%"
    assert row.memory_label.value == "21.4/64.0 GiB"
    assert row.memory.value == pytest.approx(21.4 / 64, rel=1e-3)
    assert row.history_values == pytest.approx([0.0, 0.2, 0.4, 0.6])
    assert list(row.line.x) == [-3.0, -2.0, -1.0, 0.0]
    assert "NPU0" in row.title.value and "cpu-emulated" in row.title.value
    assert row.extra.value == "OK  (ge-glue)"
    assert row.models.value == "llama_model 3.0 GiB"  # the models the NPU serves, with their memory there
    assert dashboard.devices.rows["1"].utilization_label.value == "0%"


def test_charts_plot_latency_and_throughput_history_with_gaps(dashboard: Dashboard) -> None:
    charts = dashboard.charts
    assert charts.model == "bert_model"  # first in sorted order
    charts.picker.value = "llama_model"
    latency = charts.latency.plotted
    assert math.isnan(latency["p50"][0]) and latency["p50"][1:] == [3.0, 6.0, 9.0]
    assert latency["p99"][1:] == [9.0, 18.0, 27.0]
    assert all(math.isnan(v) for v in latency["p90"])
    throughput = charts.throughput.plotted
    assert throughput["req/s"] == [0.0, 10.0, 20.0, 30.0] and throughput["inf/s"] == [0.0, 30.0, 60.0, 90.0]
    assert all(math.isnan(v) for v in throughput["tok/s"])  # not a generate model: no tokens line
    assert charts.queue.plotted == {"queue depth": [0.0, 2.0, 4.0, 6.0]}
    assert "queue 25% │ compute 75%" in charts.caption.value
    assert "latency from summary" in charts.caption.value


def test_missing_points_never_reach_a_line(dashboard: Dashboard) -> None:
    """bqplot puts a line's label at its last point and draws an empty line as a null path: each line holds
    only its span of known points, and a line with fewer than two is hidden, not drawn empty."""
    charts = dashboard.charts
    charts.picker.value = "llama_model"
    marks = {mark.labels[0]: mark for mark in charts.latency.marks}
    assert not marks["p90"].visible  # no p90 at all: hidden
    p50 = marks["p50"]
    assert p50.visible and list(p50.y) == [3.0, 6.0, 9.0] and len(p50.x) == 3  # the missing first left out
    for chart in (charts.latency, charts.throughput, charts.queue):
        for mark in chart.marks:
            assert not mark.visible or (len(mark.x) >= 2 and math.isfinite(mark.y[0]) and
                                        math.isfinite(mark.y[-1])), mark.labels
    fresh = Dashboard(RecordedSource(recording(1)), autostart=False, background=False)
    assert all(not mark.visible for mark in fresh.charts.latency.marks)  # first render: nothing to draw
    fresh.close()


def test_reload_button_reports_success_in_the_status_label(dashboard: Dashboard) -> None:
    dashboard.models.row("llama_model").buttons["reload"].click()
    controller = dashboard.source.controller
    assert isinstance(controller, RecordedController)
    assert controller.calls == [("reload", "llama_model", None)]
    assert "✓ reload llama_model: done" in dashboard.models.runner.status.value
    assert dashboard.state()["buttons"]["llama_model:1"] == ["reload", "unload"]


def test_triton_errors_show_in_the_widget_not_as_a_traceback(tmp_path: Path) -> None:
    message = "failed to load 'bert_model': version 1 is at UNAVAILABLE state"
    controller = RecordedController(failures={("load", "bert_model"): message})
    board = Dashboard(RecordedSource(recording(2), controller=controller), autostart=False, background=False)
    board.refresh()
    board.models.row("bert_model").buttons["load"].click()
    status = board.models.runner.status.value
    assert "✗ load bert_model failed: failed to load &#x27;bert_model&#x27;" in status
    assert "firebrick" in status
    assert board.state()["status"] == message
    board.close()


class ExplodingController(RecordedController):
    """A controller whose unload raises, as a dropped connection would."""

    def unload(self, model: str) -> object:  # type: ignore[override]
        raise ConnectionRefusedError("[Errno 111] Connection refused")


def test_an_exception_from_a_command_becomes_a_status_message() -> None:
    board = Dashboard(RecordedSource(recording(2), controller=ExplodingController()), autostart=False,
                      background=False)
    board.refresh()
    assert board.models.act("unload", "llama_model")
    status = board.models.runner.status.value
    assert "✗ unload llama_model failed: ConnectionRefusedError: [Errno 111]" in status
    board.close()


class GatedController(RecordedController):
    """A controller whose reload waits for the test to open a gate, like a slow model load."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def reload(self, model: str, config: str | None = None) -> object:  # type: ignore[override]
        self.entered.set()
        self.gate.wait(30)
        return super().reload(model, config)


def test_buttons_are_disabled_while_a_command_runs_in_the_background() -> None:
    controller = GatedController()
    board = Dashboard(RecordedSource(recording(2), controller=controller), autostart=False, background=True)
    board.refresh()
    row = board.models.row("llama_model")
    row.buttons["reload"].click()
    assert controller.entered.wait(10)
    assert row.enabled == [] and "… reload llama_model" in board.models.runner.status.value
    assert not board.models.act("reload", "llama_model")  # one command per model at a time
    assert board.state()["buttons"]["bert_model:1"] == ["load"]
    controller.gate.set()
    board.models.runner.wait(10)
    assert row.enabled == ["reload", "unload"]
    assert "✓ reload llama_model: done" in board.models.runner.status.value
    board.close()


def test_an_unreadable_server_shows_a_banner_and_disables_commands() -> None:
    stale = dataclasses.replace(snapshot(2), live=False, ready=False, error="timed out")
    board = Dashboard(RecordedSource([snapshot(1), stale, down(3), snapshot(4)]), autostart=False,
                      background=False)
    board.refresh()
    last_figures = board.state()["models"]
    board.refresh()
    assert board.state()["buttons"] == {"llama_model:1": [], "bert_model:1": []}
    assert "timed out" in board.header.value
    board.refresh()
    assert "connection refused" in board.header.value and "○ down" in board.header.value
    state = board.state()
    # the last figures stay, greyed, as the terminal console keeps them; no command can work meanwhile
    assert state["models"] == last_figures and state["stale"]
    assert state["buttons"] == {"llama_model:1": [], "bert_model:1": []}
    assert state["devices"] and all(d["memory"] != "—" for d in state["devices"].values())
    assert board.charts.picker.options  # the history stays charted
    board.refresh()  # the server answers again: live figures, not greyed, commands back
    state = board.state()
    assert not state["stale"] and state["buttons"]["llama_model:1"] == ["reload", "unload"]
    board.close()


def test_rows_follow_the_repository() -> None:
    only_llama = snapshot(1)
    only_llama = dataclasses.replace(only_llama, models=only_llama.models[:1])
    board = Dashboard(RecordedSource([snapshot(1), only_llama]), autostart=False, background=False)
    board.refresh()
    assert set(board.models.rows) == {("llama_model", "1"), ("bert_model", "1")}
    board.refresh()
    assert set(board.models.rows) == {("llama_model", "1")}
    assert len(board.models.grid.children) == 2 * 15  # header and one row: 14 figures and the buttons' cell
    board.close()


def test_log_tail_in_the_dashboard_highlights_failures(dashboard: Dashboard) -> None:
    assert dashboard.logs.lines == ["I1130 started", "E1130 failed to load 'bert_model'"]
    assert "color:firebrick'>E1130 failed to load" in dashboard.logs.view.value


def test_background_poller_updates_until_closed_and_close_is_idempotent() -> None:
    source = RecordedSource(recording(4))
    board = Dashboard(source, interval=0.02)
    wait_until(lambda: board.poller.polls >= 5, 30, interval=0.01, what="five polls")
    assert board.poller.running
    assert board.state()["models"]["llama_model:1"]["QUEUE"] == "6"
    board.close()
    assert not board.poller.running and board.closed
    # what stays on screen after Run All: a static copy of the last state, the live views closed
    (left,) = board.box.children
    assert "dashboard closed at" in left.value and "llama_model" in left.value and "bert_model" in left.value
    assert board.box.comm is not None and board.views.comm is None
    polls = board.poller.polls
    board.close()
    board.start()  # a closed dashboard stays closed
    assert not board.poller.running and board.poller.polls == polls


class BrokenSource(RecordedSource):
    """A source whose poll raises once (a bug, not an unreachable server), then recovers."""

    def __init__(self) -> None:
        super().__init__(recording(2))
        self.raised = False

    def poll(self) -> ServerSnapshot:
        if not self.raised:
            self.raised = True
            raise RuntimeError("metrics parser choked")
        return super().poll()


def test_a_failing_poll_is_shown_and_the_next_one_clears_it() -> None:
    board = Dashboard(BrokenSource(), autostart=False, background=False)
    assert board.refresh() is None
    assert "update failed: RuntimeError: metrics parser choked" in board.problem.value
    assert board.refresh() is not None and board.problem.value == ""
    assert board.snapshot is not None and board.snapshot.taken_at == T0
    board.close()


def test_wait_for_polls_until_the_condition_holds_or_times_out() -> None:
    board = Dashboard(RecordedSource(recording(4)), autostart=False, background=False)
    seen = board.wait_for(lambda s: (s.model("llama_model") or s.models[0]).queue_depth == 4, timeout=10)
    assert seen.taken_at == T0 + 2 and board.poller.polls == 3
    with pytest.raises(TimeoutError, match="session demo: queue above 100 not seen within 0s"):
        board.wait_for(lambda s: False, timeout=0.3, what="queue above 100")
    board.close()


def test_close_closes_a_source_the_dashboard_owns_only() -> None:
    owned, borrowed = RecordedSource(recording(1)), RecordedSource(recording(1))
    Dashboard(owned, autostart=False, owns_source=True).close()
    Dashboard(borrowed, autostart=False).close()
    assert owned.closed and not borrowed.closed


def test_switching_the_charted_model_while_the_poller_redraws() -> None:
    board = Dashboard(RecordedSource(recording(4)), interval=0.002)
    board.wait_for(lambda s: s.taken_at == T0 + 3, timeout=30)
    for i in range(200):
        board.charts.picker.value = ("llama_model", "bert_model")[i % 2]
    board.charts.picker.value = "llama_model"
    board.close()
    assert board.problem.value == ""
    plotted = board.charts.throughput.plotted["req/s"]
    # Polls after the recording ends repeat its last snapshot; how many ran before close() is timing.
    assert plotted[:4] == [0.0, 10.0, 20.0, 30.0] and set(plotted[4:]) <= {30.0}


def test_a_failing_model_reads_failing_with_its_reason_and_can_be_reloaded() -> None:
    base = snapshot(1)
    reason = "instance process gone: llama_model_0 (killed or crashed)"
    llama = dataclasses.replace(base.models[0], health="FAILING", reason=reason)
    board = Dashboard(RecordedSource([dataclasses.replace(base, models=(llama, *base.models[1:]))]),
                      autostart=False, background=False)
    board.refresh()
    state = board.state()
    assert state["models"]["llama_model:1"]["STATE"] == "FAILING"
    assert f"llama_model: FAILING: {reason}" in board.models.reasons.value
    assert state["buttons"]["llama_model:1"] == ["reload", "unload"]
    board.close()


def test_a_displayed_dashboard_is_replaced_by_plain_html_when_it_closes() -> None:
    # a saved notebook then keeps the last figures as HTML, readable without a kernel: a widget output
    # saved without its state reopens in JupyterLab as "Error displaying widget: model not found"
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()  # IPython's own display machinery, as in a kernel
    board = Dashboard(RecordedSource(recording(2)), autostart=False, background=False)
    board.refresh()
    board.refresh()  # two points: lines to draw
    try:
        with capture_output() as shown:
            display(board)
            board.close()
    finally:
        InteractiveShell.clear_instance()
    live, left = shown.outputs
    assert "application/vnd.jupyter.widget-view+json" in live.data and not live.update
    assert left.update and left.transient["display_id"] == live.transient["display_id"]
    assert set(left.data) == {"text/html", "text/plain"}
    assert "dashboard closed at" in left.data["text/html"] and "llama_model" in left.data["text/html"]
    assert board.box.comm is None  # nothing live is left
    # its charts stay as images: the charted model's three, and each device's utilization history
    images = re.findall(r'class="ge-static-chart" src="data:image/svg\+xml;base64,([^"]+)" alt="([^"]+)"',
                        left.data["text/html"])
    assert [alt for _, alt in images] == [
        "NPU0 utilization history", "NPU1 utilization history", "latency of bert_model",
        "throughput of bert_model", "queue depth of bert_model"]
    assert all("<polyline" in base64.b64decode(data).decode("utf-8") for data, _ in images[:2])


def test_the_load_test_and_the_charts_follow_the_same_model() -> None:
    # the models sort bert_model first: a notebook charting llama_model then loaded bert_model by default
    board = Dashboard(RecordedSource(recording(2)), autostart=False, background=False)
    board.refresh()
    assert board.charts.model == board.loadtest.model.value == "bert_model"
    board.charts.picker.value = "llama_model"
    assert board.loadtest.model.value == "llama_model"
    board.refresh()
    assert board.charts.model == board.loadtest.model.value == "llama_model"
    board.loadtest.model.value = "bert_model"  # chosen in the load test: the charts show what is loaded
    assert board.charts.model == "bert_model"
    board.close()


def test_a_row_shows_only_the_buttons_that_apply_to_its_model(dashboard: Dashboard) -> None:
    # three buttons in every row pushed the table past a 1000 px notebook panel; a loaded model cannot be
    # loaded, an unloaded one neither reloaded nor unloaded
    def shown(model: str) -> list[str]:
        buttons = dashboard.models.row(model).buttons
        return [action for action, button in buttons.items() if button.layout.display != "none"]

    assert shown("llama_model") == ["reload", "unload"] and shown("bert_model") == ["load"]


def test_the_header_says_a_server_restarted_after_crashes_as_the_console_does() -> None:
    """A supervised server that serves again after crashing says so beside its health; one that never
    crashed says nothing of restarts."""
    board = Dashboard(RecordedSource([dataclasses.replace(snapshot(1), restarts=2), snapshot(2)]),
                      autostart=False, background=False)
    try:
        board.refresh()
        said = "● ready</span> ─ <b style='color:darkorange'>restarted 2× after a crash</b>"
        assert said in board.header.value
        board.refresh()
        assert "restarted" not in board.header.value
    finally:
        board.close()
