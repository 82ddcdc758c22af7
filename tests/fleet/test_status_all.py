"""`ge-console status --all` and the fleet screen: three real tritonservers on loopback plus two dead ones
(a closed port, and a socket that accepts but never answers); the dead ones get their row without delaying
the others'."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton_http

from tests.conftest import RunningServer, run_triton
from tests.models import write_echo_model
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.cli import main
from triton_ge_console.console.options import ConsoleOptions
from triton_ge_console.fleet.status import FleetRow, running_records
from triton_ge_console.session_states import READY
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.follow import sample
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

INTERVAL_S = 1.0


@pytest.fixture(scope="module")
def servers(
    triton_dist: TritonDistribution, python_backends: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[RunningServer]]:
    """Three servers; the third also has a model whose load failed."""
    root = tmp_path_factory.mktemp("fleet")
    write_echo_model(root / "repo", "echo")
    broken = write_echo_model(root / "repo", "broken")
    (broken / "config.pbtxt").write_text('name: "broken"\nbackend: "no_such_backend"\n', encoding="utf-8")
    backends = python_backends
    extra = ("--exit-timeout-secs=3",)
    with run_triton(triton_dist, root / "repo", backends, ("echo",), extra) as one, \
         run_triton(triton_dist, root / "repo", backends, ("echo",), extra) as two, \
         run_triton(triton_dist, root / "repo", backends, ("echo", "broken"), extra) as three:
        yield [one, two, three]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose socket takes connections (the kernel's backlog) but never answers a request."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers: list[RunningServer],
          silent_port: int, closed_port: int) -> Registry:
    """Five attached sessions in this test's own state dir: s1..s3 real, gone (closed) and mute (silent)."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    for index, server in enumerate(servers, 1):
        name = f"s{index}"
        assert main(["attach", server.http_url, "--name", name, "--metrics-url", server.metrics_url]) == 0
    registry = Registry()
    for name, port in (("gone", closed_port), ("mute", silent_port)):
        registry.save(SessionRecord(
            name=name, pid=None, started_at=time.time(), http_url=f"http://127.0.0.1:{port}", grpc_url=None,
            metrics_url=None, repository=None, spec=None, backend_dir=None, log_path=None, token_ref=None,
            attached=True, session_dir=None, state=READY,
        ))
    return registry


@pytest.fixture
def load_on_first(servers: list[RunningServer]) -> Iterator[None]:
    """Requests to s1's echo model, back to back, while the test runs."""
    stop = threading.Event()

    def send() -> None:
        client = triton_http.InferenceServerClient(servers[0].http_hostport)
        data = triton_http.InferInput("INPUT0", [1, 4], "FP32")
        data.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
        try:
            while not stop.is_set():
                client.infer("echo", [data])
        finally:
            client.close()

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(10)


def test_status_all_json_has_every_server(fleet: Registry, load_on_first: None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """One row per running session with real figures; the dead ones say so; exit code 1 for them."""
    capsys.readouterr()
    assert main(["status", "--all", "--json", "--interval", str(INTERVAL_S)]) == 1
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert sorted(rows) == ["gone", "mute", "s1", "s2", "s3"]
    for name in ("s1", "s2", "s3"):
        assert rows[name]["health"] == "ready" and rows[name]["version"], rows[name]
    # every model of the repository counts; one never loaded is not failing, one whose load failed is
    assert (rows["s1"]["models_ready"], rows["s1"]["models_failing"], rows["s1"]["models_total"]) == (1, 0, 2)
    assert (rows["s3"]["models_ready"], rows["s3"]["models_failing"], rows["s3"]["models_total"]) == (1, 1, 2)
    assert rows["s1"]["requests_per_s"] > 0
    assert rows["s2"]["requests_per_s"] == 0
    assert rows["s1"]["npu_util_mean"] is None  # python-backend servers report no NPU: no figure invented
    assert rows["gone"]["health"] == "unreachable" and rows["gone"]["version"] is None
    assert rows["mute"]["health"] == "not answering" and "timed out" in rows["mute"]["error"]


def test_a_silent_server_delays_no_other(fleet: Registry) -> None:
    """With two workers, the live servers' second polls come one interval after their first, while the
    silent server's poll is still waiting for its timeout."""
    sources = [LiveSource.from_record(record) for record in running_records(fleet)]
    began = time.monotonic()
    try:
        taken = sample(sources, polls=2, interval_s=INTERVAL_S, deadline_s=8.0, max_workers=2)
    finally:
        for source in sources:
            source.close()
    for name in ("s1", "s2", "s3"):
        first, second = taken[name]
        assert second.taken_at - first.taken_at < INTERVAL_S + 0.5, name
    assert [s.live for s in taken["gone"]] == [False] and [s.live for s in taken["mute"]] == [False]
    assert "timed out" in (taken["mute"][0].error or "")
    assert time.monotonic() - began < 8.0


def test_status_all_table_marks_missing_figures(fleet: Registry, capsys: pytest.CaptureFixture[str]) -> None:
    """The table has a line per server; a figure nobody reported reads as the missing mark."""
    capsys.readouterr()
    main(["status", "--all", "--interval", "0.2"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "WHERE", "HEALTH"]
    assert len(lines) == 6
    gone = next(line for line in lines if line.startswith("gone"))
    assert "unreachable" in gone and "—/—/—" in gone


async def test_fleet_screen_shows_every_server(fleet: Registry, load_on_first: None) -> None:
    """`ge-console` with several sessions: the fleet screen has a row per server, the three real ones ready
    with their figures, the dead ones unreachable; Enter opens s1's dashboard on its models, Esc returns."""
    from tests.fleet.live_fleet import live_fleet_app
    from tests.waiting import until
    from triton_ge_console.console.screens.fleet import FleetScreen, MemberDashboard

    app, live = live_fleet_app(fleet, INTERVAL_S)

    def rows() -> dict[str, FleetRow]:
        return {row.name: row for row in app.fleet_rows}

    def settled() -> bool:
        now = rows()
        real = [now[name] for name in ("s1", "s2", "s3")]
        return (all(row.health == "ready" and row.requests_per_s is not None for row in real)
                and now["gone"].health == "unreachable" and now["mute"].health == "not answering")

    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await until(pilot, settled, timeout=30, what="every row with its figures")
            now = rows()
            assert sorted(now) == ["gone", "mute", "s1", "s2", "s3"]
            assert (now["s3"].models_ready, now["s3"].models_failing, now["s3"].models_total) == (1, 1, 2)
            assert (now["s1"].requests_per_s or 0) > 0 and now["s1"].version
            assert "timed out" in (now["mute"].error or "")
            assert app.screen.query_one("#fleet-servers").row_count == 5
            await pilot.press("enter")  # rows in name order: gone first
            await until(pilot, lambda: isinstance(app.screen, MemberDashboard))
            assert app.current == "gone"
            await pilot.press("escape", "down", "down", "enter")  # gone, mute, s1
            await until(pilot, lambda: app.current == "s1" and app.connection.last_good is not None)
            snapshot = app.connection.last_good
            assert snapshot is not None and snapshot.model("echo") is not None
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, FleetScreen))
    finally:
        live.close()


async def test_fleet_screen_follows_sessions_that_come_and_go(fleet: Registry) -> None:
    """Opened on two sessions, the fleet screen takes in the three registered later, and drops one whose
    session is removed, keeping the others' rows."""
    from tests.waiting import until
    from triton_ge_console.console.fleet_app import FleetConsoleApp
    from triton_ge_console.console.options import FleetOptions
    from triton_ge_console.fleet.members import LiveFleet

    first = [r for r in running_records(fleet) if r.name in ("s1", "s2")]
    live = LiveFleet(first, fleet)
    app = FleetConsoleApp(live, lambda member: ConsoleOptions(interval_s=INTERVAL_S),
                          FleetOptions(interval_s=INTERVAL_S, backoff_s=5.0, rescan_s=0.2))

    def names() -> list[str]:
        return [row.name for row in app.fleet_rows]

    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await until(pilot, lambda: names() == ["gone", "mute", "s1", "s2", "s3"], what="five rows")
            await until(pilot, lambda: {r.name: r.health for r in app.fleet_rows}["s3"] == "ready",
                        what="s3 polled")
            s1 = live.members[2]
            fleet.remove("gone")
            await until(pilot, lambda: names() == ["mute", "s1", "s2", "s3"], what="gone's row removed")
            assert live.members[1] is s1  # a member that stayed keeps its source
            assert app.figures.polls["s1"] > 0 and "gone" not in app.figures.latest
            assert app.screen.query_one("#fleet-servers").row_count == 4
    finally:
        live.close()


def test_bare_ge_console_opens_the_fleet_screen(fleet: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ge-console` with several running sessions: the fleet screen (driven headless here), all five rows."""
    from textual.pilot import Pilot

    from tests.waiting import until
    from triton_ge_console.console import console_cli as commands
    from triton_ge_console.console.fleet_app import FleetConsoleApp

    seen: dict[str, object] = {}
    original = FleetConsoleApp.run

    async def look(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, FleetConsoleApp)
        await until(pilot, lambda: all(r.health in ("ready", "unreachable", "not answering")
                                       for r in app.fleet_rows),
                    timeout=30, what="every row")
        seen["screen"] = type(app.screen).__name__
        seen["rows"] = {row.name: row.health for row in app.fleet_rows}
        app.exit()

    def headless(self: FleetConsoleApp, **_kwargs: object) -> None:
        original(self, headless=True, size=(160, 45), auto_pilot=look)

    monkeypatch.setattr(commands, "_has_terminal", lambda: True)
    monkeypatch.setattr(FleetConsoleApp, "run", headless)
    assert main(["console"]) == 0
    assert seen["screen"] == "FleetScreen"
    assert seen["rows"] == {"gone": "unreachable", "mute": "not answering", "s1": "ready", "s2": "ready",
                            "s3": "ready"}
