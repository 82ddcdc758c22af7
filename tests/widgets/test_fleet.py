"""FleetDashboard over the recorded fleet: the same rows as the fleet screen, a rolling reload button."""

from __future__ import annotations

import ipywidgets as w

from tests.fleet.recorded_fleet import POLLS, recorded_fleet
from triton_ge_console.fleet.status import FleetRow
from triton_ge_console.sessions.observe.recorded import RecordedController
from triton_ge_console.widgets import FleetDashboard


def replayed(failures: dict[str, dict[tuple[str, str], str]] | None = None) -> FleetDashboard:
    """A dashboard refreshed inline until every recording was replayed to its end."""
    board = FleetDashboard(recorded_fleet(failures), interval=0.01, autostart=False, background=False)
    for _ in range(POLLS):
        board.refresh()
    return board


def test_a_row_per_server_and_models_across_them() -> None:
    board = replayed()
    state = board.state()
    assert list(state["servers"]) == ["alpha", "beta", "gamma", "delta"]
    assert state["polls"] == {"alpha": POLLS, "beta": POLLS, "gamma": POLLS, "delta": POLLS}
    alpha = state["servers"]["alpha"]
    assert (alpha["HEALTH"], alpha["SERVER"], alpha["MODELS r/f/t"]) == ("ready", "Triton 2.51.0", "2/0/2")
    assert alpha["REQ/S"] == "51.1" and alpha["NPU max"] == "40%"
    assert state["servers"]["beta"]["MODELS r/f/t"] == "2/1/2"
    assert state["servers"]["delta"]["HEALTH"] == "unreachable"
    assert state["servers"]["delta"]["REQ/S"] == "—"
    llama = state["models"]["llama_model"]
    assert llama["REPLICAS"] == "2/3"
    assert llama["VERSIONS"] == "v1: alpha · none READY: beta · v2: gamma"
    assert state["models"]["bert_model"]["VERSIONS"] == "v1"
    assert "firebrick" in board.servers_table.value and "darkorange" in board.models_table.value
    assert list(board.picker.options) == ["bert_model", "llama_model"]
    assert "1 unreachable" in board.header.value and "3 ready" in board.header.value
    board.close()


def test_rolling_reload_stops_at_the_first_failure() -> None:
    board = replayed({"beta": {("reload", "llama_model"): "failed to load 'llama_model': bad config"}})
    board.picker.value = "llama_model"
    board.roll_button.click()
    roll = board.state()["roll"]
    assert roll["alpha"][0] == "reloaded" and roll["beta"][0] == "failed"
    assert roll["gamma"][0] == roll["delta"][0] == "untouched"
    assert "stopped at the first failure" in board.roll_status.value
    gamma = next(m for m in board.fleet.members if m.name == "gamma").source.controller
    assert isinstance(gamma, RecordedController) and gamma.calls == []
    assert not board.roll_button.disabled
    board.close()


def test_background_follow_then_close_leaves_the_last_tables() -> None:
    board = FleetDashboard(recorded_fleet(), interval=0.01)

    def delta_gone(rows: tuple[FleetRow, ...] | list[FleetRow]) -> bool:
        return any(r.name == "delta" and r.health == "unreachable" for r in rows)

    board.wait_for(delta_gone, timeout=30, what="delta unreachable")
    board.close()
    assert board._thread is not None and not board._thread.is_alive()
    polls = dict(board.figures.polls)
    assert all(n > 1 for n in polls.values())
    children = board.box.children
    assert board.servers_table in children and "closed at" in children[1].value
    assert isinstance(children[1], w.HTML)
    board.close()  # idempotent
    assert board.figures.polls == polls  # nothing polls after close
