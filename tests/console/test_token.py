"""The console on an exposed session (restricted APIs, a token): test request, config diff and load test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.waiting import until
from triton_ge_console.console.app import GEConsoleApp
from triton_ge_console.console.launch_session import open_record
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.widgets.models import ModelsTable
from triton_ge_console.repository import inventory
from triton_ge_console.repository.build import build_demo_repository
from triton_ge_console.sessions.act.probe import send_test_request
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.observe.source import session_headers
from triton_ge_console.sessions.observe.stats import fetch_loaded_config
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

from .conftest import SIZE
from .leftovers import stop_leftover_sessions
from .notices import notified

pytestmark = pytest.mark.server  # every test here starts a tritonserver

SLOW = 90.0
TOKEN = "console-s3cret"


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SessionRecord, Registry]]:
    """The demo models on 127.0.0.1 with restricted APIs behind a token; stopped even on failure."""
    root = tmp_path_factory.mktemp("console-token")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(root / "state"))
        registry = Registry(root / "state" / "sessions")
        try:
            build_demo_repository(root / "repository")
            options = LaunchOptions(source=root / "repository", name="exposed", listen="127.0.0.1",
                                    token=TOKEN)
            yield launch(options, registry), registry
        finally:
            stop_leftover_sessions(root / "state")


def _app(record: SessionRecord, registry: Registry) -> GEConsoleApp:
    opened = open_record(record, registry, interval_s=0.5)
    return GEConsoleApp(opened.source, opened.options)


def test_probe_and_config_diff_send_the_sessions_token(exposed: tuple[SessionRecord, Registry]) -> None:
    record, registry = exposed
    app = _app(record, registry)
    try:
        headers = session_headers(app.source)
        assert headers == {record.token_header: TOKEN}
        without = send_test_request(record.http_url, "llama_model")
        assert not without.ok and "token required" in without.message  # the server really enforces the token
        assert fetch_loaded_config(record.http_url, "llama_model") is None
        loaded = fetch_loaded_config(record.http_url, "llama_model", headers=headers)
        assert loaded is not None and loaded["name"] == "llama_model"
        assert record.repository is not None
        disk = (record.repository / "llama_model" / "config.pbtxt").read_text(encoding="utf-8")
        assert inventory.config_diff(disk, loaded) == ["(no difference: Triton serves the file on disk)"]
    finally:
        app.source.close()


async def test_test_request_and_load_test_keys_work_with_the_token(
        exposed: tuple[SessionRecord, Registry]) -> None:
    from textual.widgets import Input, Log, Static

    from triton_ge_console.console.screens.loadtest import LoadTestScreen
    from triton_ge_console.console.screens.repository import RepositoryScreen

    record, registry = exposed
    app = _app(record, registry)
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(ModelsTable)
        await until(pilot, lambda: "llama_model/1" in table.row_keys, SLOW, "rows")
        table.move_cursor(table.row_keys.index("llama_model/1"))
        await until(pilot, lambda: app.selected_model == "llama_model", SLOW, "llama selected")
        await pilot.press("t")
        title = "test request llama_model"
        await until(pilot, lambda: notified(app, title), SLOW, "test request")
        answer = notified(app, title)[0]
        assert answer.severity == "information" and "answered in" in answer.message, answer.message
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, LoadTestScreen), SLOW, "load test dialog")
        app.screen.query_one("#duration", Input).value = "2"
        await pilot.click("#start")
        log = app.screen.query_one(Log)
        await until(pilot, lambda: any(line.startswith("done:") for line in log.lines), SLOW, "load test")
        done = next(line for line in log.lines if line.startswith("done:"))
        assert " 0 errors" in done and "restrict" not in "\n".join(log.lines), "\n".join(log.lines)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), SLOW, "dialog closed")
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, RepositoryScreen), SLOW, "repository screen")
        diff = app.screen.query_one("#diff-view", Static)
        await until(pilot, lambda: "no difference" in str(diff.render()), SLOW, "diff with the token")
