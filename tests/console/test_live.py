"""The console against a real tritonserver serving the demo models through the ge glue (CPU emulation)."""

from __future__ import annotations

import functools
import json
import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.models import LLAMA_GENERATE, build_spec
from tests.waiting import until
from triton_ge_console.console.app import GEConsoleApp, create_app
from triton_ge_console.console.launch_session import open_record, reload_changed_for
from triton_ge_console.console.options import ConsoleOptions
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.widgets.header import DisconnectedBanner
from triton_ge_console.console.widgets.models import ModelsTable
from triton_ge_console.repository.build import build_demo_repository
from triton_ge_console.sessions.act.changes import find_changes
from triton_ge_console.sessions.act.digests import model_digest, read_loaded_digests, record_loaded_digests
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.pending import RecordLifecycle
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

from .conftest import SIZE
from .notices import notified

pytestmark = pytest.mark.server  # every test here starts a tritonserver

SLOW = 90.0  # generous: other suites run servers on this 2-core machine at the same time


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Registry, Path]]:
    """A private state dir (registry, session dirs) and a freshly built demo repository."""
    root = tmp_path_factory.mktemp("console-live")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(root / "state"))
        repository = root / "repository"
        build_demo_repository(repository)
        yield Registry(root / "state" / "sessions"), repository


@pytest.fixture(scope="module")
def session(state: tuple[Registry, Path]) -> Iterator[SessionRecord]:
    """One demo server for the tests that leave it running."""
    registry, repository = state
    record = launch(LaunchOptions(source=repository, name="console-live"), registry)
    try:
        yield record
    finally:
        down(record, registry)


@pytest.fixture(scope="module")
def generate_session(state: tuple[Registry, Path],
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionRecord]:
    """A server of one generate model (the demo KV-cache llama), built from a spec by the real builder."""
    registry, _ = state
    root = tmp_path_factory.mktemp("console-generate")
    repository = build_spec(root, "models:" + LLAMA_GENERATE, "repository")
    record = launch(LaunchOptions(source=repository, name="console-generate"), registry)
    try:
        yield record
    finally:
        down(record, registry)


def _index(record: SessionRecord) -> dict[str, str]:
    """Triton's repository index: model -> state."""
    request = urllib.request.Request(f"{record.http_url}/v2/repository/index", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return {entry["name"]: entry.get("state", "") for entry in json.loads(response.read())}


def _loaded_config(record: SessionRecord, model: str) -> dict[str, object]:
    """GET v2/models/{model}/config."""
    with urllib.request.urlopen(f"{record.http_url}/v2/models/{model}/config", timeout=10) as response:
        return dict(json.loads(response.read()))


_until = functools.partial(until, timeout=SLOW, step=0.1)  # the shared wait, with a generous timeout


def _rows(app: GEConsoleApp) -> list[str]:
    return app.screen.query_one(ModelsTable).row_keys


def _shown_state(app: GEConsoleApp, model: str) -> str | None:
    """The state the dashboard currently has for a model (None when it is not listed)."""
    snapshot = app.connection.last_good
    found = snapshot.model(model) if snapshot is not None else None
    return found.state if found is not None else None


def _titled(app: GEConsoleApp, title: str) -> bool:
    """Whether a notification with this title (a finished command) was shown."""
    return bool(notified(app, title))


def _commands_running(app: GEConsoleApp) -> bool:
    """Whether a control command (reload, reload-changed) is still under way."""
    return any(worker.group == "control" and worker.is_running for worker in app.workers)


def _app(record: SessionRecord, registry: Registry) -> GEConsoleApp:
    opened = open_record(record, registry, interval_s=0.5)
    return GEConsoleApp(opened.source, opened.options)


async def _select(pilot: Pilot[None], app: GEConsoleApp, model: str) -> None:
    await _until(pilot, lambda: f"{model}/1" in _rows(app), what=f"{model} row")
    table = app.screen.query_one(ModelsTable)
    table.move_cursor(_rows(app).index(f"{model}/1"))
    await _until(pilot, lambda: app.selected_model == model, what=f"{model} selected")


async def test_reload_key_reloads_llama_with_the_edited_config(session: SessionRecord,
                                                                 state: tuple[Registry, Path]) -> None:
    registry, repository = state
    config = repository / "llama_model" / "config.pbtxt"
    text = config.read_text(encoding="utf-8")
    batching = _loaded_config(session, "llama_model").get("dynamic_batching") or {}
    delay = int(batching.get("max_queue_delay_microseconds", 0)) + 7  # type: ignore[union-attr]
    key = "max_queue_delay_microseconds"
    if key in text:
        edited = "\n".join(f"  {key}: {delay}" if key in line else line for line in text.splitlines()) + "\n"
    else:
        edited = text + f"dynamic_batching {{\n  max_queue_delay_microseconds: {delay}\n}}\n"
    config.write_text(edited, encoding="utf-8")
    app = _app(session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await _select(pilot, app, "llama_model")
        await pilot.press("r")
        await _until(pilot, lambda: _titled(app, "reload llama_model"), what="reload notification")
    after = _loaded_config(session, "llama_model")
    assert after["dynamic_batching"]["max_queue_delay_microseconds"] == delay  # type: ignore[index]
    assert _index(session)["llama_model"] == "READY"
    assert [n.severity for n in notified(app, "reload llama_model")] == ["information"]
    loaded = read_loaded_digests(session).get("llama_model")
    assert loaded == model_digest(repository / "llama_model"), "`r` did not record the digest it loaded"


async def test_reload_changed_key_reloads_only_edited_models(session: SessionRecord,
                                                              state: tuple[Registry, Path]) -> None:
    registry, repository = state
    record_loaded_digests(session)  # Triton serves every folder as it is now (earlier tests reloaded edits)
    config = repository / "bert_model" / "config.pbtxt"
    config.write_text(config.read_text(encoding="utf-8") + "\n# touched by a test\n", encoding="utf-8")
    app = _app(session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: len(_rows(app)) == 2, what="two models")
        await pilot.press("R")
        await _until(pilot, lambda: _titled(app, "reload bert_model"), what="bert reloaded")
        await _until(pilot, lambda: not _commands_running(app), what="reloads finished")
        await pilot.pause()
        reloads = notified(app, "reload bert_model")
        assert reloads[0].severity == "information"
        assert not _titled(app, "reload llama_model"), "llama_model was not edited but was reloaded"
    assert _index(session)["bert_model"] == "READY"
    assert find_changes(session).empty, "the digests were not recorded: reload --changed would repeat it"


async def test_watch_reloads_through_the_sessions_digests(session: SessionRecord,
                                                           state: tuple[Registry, Path]) -> None:
    registry, repository = state
    record_loaded_digests(session)
    config = repository / "bert_model" / "config.pbtxt"
    original = config.read_text(encoding="utf-8")
    app = _app(session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: len(_rows(app)) == 2, what="two models")
        await pilot.press("w")
        await _until(pilot, lambda: _titled(app, "watch on"), what="watching")
        for attempt in range(10):  # the watcher thread starts asynchronously: touch until it reacts
            config.write_text(original + f"\n# watched edit {attempt}\n", encoding="utf-8")
            try:
                await until(pilot, lambda: _titled(app, "reload bert_model"), 3.0, "watch reload")
                break
            except AssertionError:
                continue
        await _until(pilot, lambda: _titled(app, "reload bert_model"), what="bert reloaded by the watch")
        await _until(pilot, lambda: not _commands_running(app), what="reloads finished")
        await pilot.press("w")
        assert not _titled(app, "reload llama_model")
    assert find_changes(session).empty, "the watch did not record digests: reload --changed would repeat it"


def test_reload_changed_lists_spec_problems_and_reloads_nothing(session: SessionRecord,
                                                                  state: tuple[Registry, Path],
                                                                  tmp_path: Path) -> None:
    registry, _ = state
    spec = tmp_path / "deploy.yaml"
    spec.write_text("models:\n  - name: llama_model\n    max_batch_size: eight\n", encoding="utf-8")
    results = reload_changed_for(RecordLifecycle(registry, session.replace(spec=spec)))()
    assert [(r.ok, r.target) for r in results] == [(False, "changed")]
    assert "spec not applied" in results[0].message and "deploy.yaml" in results[0].message


async def test_unload_then_load(session: SessionRecord, state: tuple[Registry, Path]) -> None:
    registry, _ = state
    app = _app(session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await _select(pilot, app, "bert_model")
        await pilot.press("u", "y")
        await _until(pilot, lambda: _index(session).get("bert_model") == "UNAVAILABLE", what="unloaded")
        await _until(pilot, lambda: _shown_state(app, "bert_model") != "READY", what="table state")
        await _select(pilot, app, "bert_model")
        await pilot.press("l")
        await _until(pilot, lambda: _index(session).get("bert_model") == "READY", what="loaded again")
        await _until(pilot, lambda: _shown_state(app, "bert_model") == "READY", what="READY shown")


async def test_filter_and_sort_live(session: SessionRecord, state: tuple[Registry, Path]) -> None:
    registry, _ = state
    app = _app(session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: len(_rows(app)) == 2, what="two models")
        await pilot.press("slash", *"bert", "enter")
        assert _rows(app) == ["bert_model/1"]
        await pilot.press("slash", "escape")
        assert len(_rows(app)) == 2
        await pilot.press(*"s" * 7)  # round past each sort key (timed out the newest) to state
        assert app.screen.query_one(ModelsTable).sort_key.label == "state"


async def test_killed_server_shows_banner_then_recovers_after_restart(state: tuple[Registry, Path]) -> None:
    registry, repository = state
    app: GEConsoleApp | None = None
    try:
        record = launch(LaunchOptions(source=repository, name="console-kill"), registry)
        app = _app(record, registry)
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: app.connection.last_good is not None and not app.connection.stale,
                         what="connected")
            assert record.pid is not None
            os.killpg(record.pid, signal.SIGKILL)
            banner = app.screen.query_one(DisconnectedBanner)
            await _until(pilot, lambda: banner.display and app.screen.has_class("-stale"), what="banner")
            await _until(pilot, lambda: "tritonserver exited" in str(banner.render()), what="crash reported")
            app.action_start_server()
            await _until(pilot, lambda: not app.connection.stale, what="recovered")
            assert not banner.display and isinstance(app.screen, DashboardScreen)
            assert _index(record) == {"bert_model": "READY", "llama_model": "READY"}
    finally:
        if app is not None:
            app.source.close()
        if registry.exists("console-kill"):
            down(registry.load("console-kill"), registry)


async def test_demo_app_launches_with_progress_and_serves(state: tuple[Registry, Path]) -> None:
    from triton_ge_console.console.demo import demo_thresholds, new_demo_session

    session = new_demo_session()
    options = ConsoleOptions(interval_s=0.5, repository=state[1], thresholds=demo_thresholds(),
                             server=session.lifecycle, startup=lambda say: session.start(say, 8.0))
    app = create_app(session.pending, options=options)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: type(app.screen).__name__ == "LaunchingScreen", what="progress")
            await _until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="dashboard")
            await _until(pilot, lambda: (snap := app.connection.last_good) is not None
                         and all((m := snap.model(n)) is not None and (m.success_total or 0) > 0
                                 for n in ("llama_model", "bert_model")), what="figures moving")
    finally:
        assert session.close(keep=False) is not None


async def test_test_request_and_load_test(session: SessionRecord, state: tuple[Registry, Path]) -> None:
    from textual.widgets import Input, Label, Log, ProgressBar

    from triton_ge_console.console.screens.loadtest import LoadTestScreen

    registry, _ = state
    app = _app(session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await _select(pilot, app, "llama_model")
        await pilot.press("t")
        await _until(pilot, lambda: _titled(app, "test request llama_model"), what="test request answered")
        answer = notified(app, "test request llama_model")[0]
        assert answer.severity == "information" and "answered in" in answer.message
        await pilot.press("b")
        await _until(pilot, lambda: isinstance(app.screen, LoadTestScreen), what="load test dialog")
        hint = str(app.screen.query_one("#loadtest-hint", Label).render())
        assert "Esc" in hint and "close" in hint  # the dialog says how to leave it
        duration = app.screen.query_one("#duration", Input)
        duration.value = "2"
        duration.focus()
        await pilot.press("enter")  # Enter in a field starts the test, as the Start button does
        log = app.screen.query_one(Log)
        await _until(pilot, lambda: any(line.startswith("done:") for line in log.lines), what="load test")
        await _until(pilot, lambda: "run done" in log.lines, what="run finished")
        assert app.screen.query_one(ProgressBar).percentage == 1.0  # 100 % when done, not back to 0
        await pilot.press("escape")
        await _until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="dialog closed")


async def test_console_launches_a_repository_it_is_given(state: tuple[Registry, Path]) -> None:
    from triton_ge_console.console.launch_session import open_target

    registry, repository = state
    opened = open_target(repository, registry, interval_s=0.5, name="console-target")
    app = GEConsoleApp(opened.source, opened.options)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="dashboard")
            await _until(pilot, lambda: _shown_state(app, "llama_model") == "READY", what="llama READY")
            assert app.repository_path() == repository
    finally:
        opened.source.close()
        assert opened.lifecycle.record is not None
        assert "stopped" in opened.lifecycle.stop().message


async def test_vs_direct_key_shows_the_seeds_tables_for_the_selected_model(
        session: SessionRecord, state: tuple[Registry, Path]) -> None:
    """v opens the load test dialog and compares llama's own executor with Triton over both protocols."""
    from textual.widgets import DataTable, Log, ProgressBar

    from triton_ge_console.console.screens.loadtest import LoadTestScreen

    registry, _ = state
    app = _app(session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await _select(pilot, app, "llama_model")
        await pilot.press("v")
        await _until(pilot, lambda: isinstance(app.screen, LoadTestScreen), what="load test dialog")
        screen = app.screen
        log = screen.query_one(Log)
        await _until(pilot, lambda: any(line.startswith("vs direct: round 1/") for line in log.lines),
                     what="progress while it runs")
        assert 0 < (screen.query_one(ProgressBar).percentage or 0) < 1.0
        await _until(pilot, lambda: any(line.startswith(("vs direct done", "vs direct failed"))
                                        for line in log.lines), what="comparison finished")
        assert "vs direct done" in log.lines, log.lines
        latency = screen.query_one("#vs-direct-latency", DataTable)
        assert latency.display and [str(c.label) for c in latency.ordered_columns] == [
            "batch", "direct (cpu-emulated)", "through Triton, gRPC", "Triton adds, gRPC (range)",
            "through Triton, HTTP", "Triton adds, HTTP (range)"]
        assert [str(latency.get_row_at(i)[0]) for i in range(latency.row_count)] == ["1", "4", "8"]
        throughput = screen.query_one("#vs-direct-throughput", DataTable)
        assert [str(c.label) for c in throughput.ordered_columns] == [
            "direct", "through Triton, gRPC", "gRPC ÷ direct", "through Triton, HTTP", "HTTP ÷ direct"]
        assert throughput.row_count == 1 and str(throughput.get_row_at(0)[2]).endswith("×)")
        await pilot.pause()
        assert latency.region.height >= 4 and throughput.region.height >= 2  # header and rows on screen
        assert screen.query_one(ProgressBar).percentage == 1.0
        await pilot.press("escape")
        await _until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="dialog closed")


async def test_load_test_of_a_generate_model_streams_tokens_and_shows_their_figures(
        generate_session: SessionRecord, state: tuple[Registry, Path]) -> None:
    """b on a generate model streams generations (bench --generate's engine) and fills the token figures'
    table as it runs and at the end; one stream's tokens show as they arrive (ids: this model has no
    tokenizer)."""
    from textual.widgets import Button, DataTable, Input, Label, Log, ProgressBar, Static

    from triton_ge_console.console.screens.loadtest import STREAM_COLUMNS, STREAM_IDS, LoadTestScreen

    registry, _ = state
    app = _app(generate_session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await _select(pilot, app, "llama_generate")
        await _until(pilot, lambda: (snap := app.connection.last_good) is not None
                     and (m := snap.model("llama_generate")) is not None and m.generation is not None,
                     what="token figures known")
        await pilot.press("b")
        await _until(pilot, lambda: isinstance(app.screen, LoadTestScreen), what="load test dialog")
        screen = app.screen
        assert "token streams" in str(screen.query_one(Label).render())
        assert screen.query_one("#vs-direct", Button).disabled  # a comparison of single inferences
        screen.query_one("#concurrency", Input).value = "4"
        duration = screen.query_one("#duration", Input)
        duration.value = "4"
        duration.focus()
        await pilot.press("enter")
        table = screen.query_one("#stream-figures", DataTable)
        await _until(pilot, lambda: table.row_count >= 1, what="figures while it runs")
        assert table.display and str(table.get_row_at(0)[0]) == "so far"
        log = screen.query_one(Log)
        await _until(pilot, lambda: any(line.startswith("run done") for line in log.lines), what="run done")
        cells = dict(zip(STREAM_COLUMNS, map(str, table.get_row_at(table.row_count - 1)), strict=True))
        assert cells[""] == "done" and int(cells["requests"]) > 0 and cells["errors"] == "0", log.lines
        figures = {c: float(cells[c]) for c in STREAM_COLUMNS[4:]}
        assert all(v > 0 for v in figures.values()), cells
        assert figures["TTFT p50 ms"] <= figures["TTFT p99 ms"]
        assert figures["ITL p50 ms"] <= figures["ITL p99 ms"]
        assert screen.query_one(ProgressBar).percentage == 1.0
        shown = str(screen.query_one("#stream-text", Static).render())  # issue 39: one stream as it arrives
        assert shown.startswith("one stream: llama_generate has no tokenizer, so token ids: "), shown
        assert shown.split(": ")[-1].split() == [str(t) for t in screen.watched.tokens[-STREAM_IDS:]]
        await pilot.press("escape")
        await _until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="dialog closed")


async def test_the_openai_action_serves_the_generate_models_until_toggled_off(
        generate_session: SessionRecord, state: tuple[Registry, Path]) -> None:
    """The palette's openai action starts `ge-console openai`'s front door for the session (its URL in a
    notice), which lists the generate model; the action again stops it, and so would quitting."""
    import httpx

    registry, _ = state
    app = _app(generate_session, registry)
    async with app.run_test(size=SIZE) as pilot:
        await app.run_action("toggle_openai")
        await _until(pilot, lambda: _titled(app, "openai on"), what="the front door started")
        door = app.openai_door
        assert door is not None and notified(app, "openai on", text=door.url)
        listed = httpx.get(f"{door.url}/models", timeout=10).json()
        assert [model["id"] for model in listed["data"]] == ["llama_generate"]
        await app.run_action("toggle_openai")
        assert app.openai_door is None and _titled(app, "openai off")
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{door.url}/models", timeout=5)
