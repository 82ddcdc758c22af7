"""The console against recorded sessions: actions reach the controller, destructive ones ask, states show."""

from __future__ import annotations

import gc

from textual.widgets import Static

from tests.waiting import until
from triton_ge_console.console.app import GEConsoleApp
from triton_ge_console.console.screens.confirm import ConfirmScreen
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.widgets.header import DisconnectedBanner, FailingBanner
from triton_ge_console.console.widgets.models import ModelsTable
from triton_ge_console.sessions.observe.recorded import RecordedController
from triton_ge_console.sessions.observe.source import CommandResult

from .conftest import SIZE, recorded_app, replayed
from .notices import notified, toasts_shown


def _rows(app: GEConsoleApp) -> list[str]:
    table = app.screen.query_one(ModelsTable)
    return table.row_keys


async def test_reload_notifies_and_failures_carry_tritons_message() -> None:
    controller = RecordedController(failures={("reload", "bert_model"): "failed to load 'bert_model': boom"})
    app = recorded_app("healthy", controller)
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        assert app.selected_model == "bert_model"
        await pilot.press("r")
        await until(pilot, lambda: notified(app, text="boom"))
        await pilot.press("down", "r")
        await until(pilot, lambda: ("reload", "llama_model", None) in controller.calls)
        assert app.last_errors == {"bert_model": "failed to load 'bert_model': boom"}


async def test_unload_asks_first_and_only_runs_on_yes() -> None:
    controller = RecordedController()
    app = recorded_app("healthy", controller)
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert controller.calls == []
        await pilot.press("u", "y")
        await until(pilot, lambda: controller.calls == [("unload", "bert_model", None)])


def _title(app: GEConsoleApp) -> str:
    return str(app.screen.query_one("#models-box").border_title)


def _header(app: GEConsoleApp) -> str:
    return app.screen.query_one(ModelsTable).render_line(0).text


async def test_filter_and_sort() -> None:
    """The title counts what the filter shows of all models; the header marks the sort column."""
    app = recorded_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        assert _rows(app) == ["bert_model/1", "llama_model/1"]
        assert _title(app).startswith("Models (2) ─ / filter")
        assert _header(app).startswith("MODEL ▲")  # by name, A first
        await pilot.press("slash", "l", "l", "a")
        assert _rows(app) == ["llama_model/1"]
        assert app.selected_model == "llama_model"
        assert _title(app).startswith("Models (1 of 2) ─ filter 'lla'")
        await pilot.press("escape")
        assert _rows(app) == ["bert_model/1", "llama_model/1"]
        assert _title(app).startswith("Models (2) ─")
        await pilot.press("s")  # by queue depth, deepest first
        assert app.screen.query_one(ModelsTable).sort_key.label == "queue"
        assert _rows(app)[0] == "llama_model/1"
        await pilot.pause()
        header = app.screen.query_one(ModelsTable).render_line(0)
        assert "▼QUEUE" in header.text and "▲" not in header.text
        (marked,) = [segment for segment in header if "QUEUE" in segment.text]
        assert marked.style is not None and marked.style.underline


async def test_disconnected_recording_shows_banner_and_keeps_last_figures() -> None:
    app = recorded_app("disconnected")
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        banner = app.screen.query_one(DisconnectedBanner)
        assert banner.display and "connection refused" in str(banner.render())
        assert app.screen.has_class("-stale")
        assert app.connection.last_good is not None and app.connection.retry_in_s == 0.01
        assert len(_rows(app)) == 2


async def test_palette_and_help_come_from_the_registry() -> None:
    app = recorded_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        await pilot.press(*"dump_graph", "enter")
        await until(pilot, lambda: "dump_graph" in app.diagnostics)


class _ExplodingController(RecordedController):
    """A controller whose reload raises, as a broken connection might."""

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        raise ConnectionResetError("connection reset by peer")


async def test_worker_errors_become_notifications_not_crashes() -> None:
    app = recorded_app("healthy", _ExplodingController())
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("r")
        await until(pilot, lambda: notified(app, text="connection reset by peer"))
        assert app.is_running and isinstance(app.screen, DashboardScreen)


async def test_start_up_objects_stay_out_of_full_collections_until_the_console_exits() -> None:
    app = recorded_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        assert gc.get_freeze_count() > 10_000  # modules, classes, the app: not walked by later collections
    assert gc.get_freeze_count() == 0  # handed back at exit, so what the app made can be freed


async def test_a_failing_model_shows_its_reason_and_r_reloads_it() -> None:
    controller = RecordedController()
    app = recorded_app("failing", controller)
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        banner = app.screen.query_one(FailingBanner)
        assert banner.display and "llama_model v1 FAILING: instance process gone" in str(banner.render())
        await pilot.press("down")
        assert app.selected_model == "llama_model"
        info = str(app.screen.query_one("#detail-info", Static).render())
        assert "last error: FAILING: instance process gone: llama_model_0" in info
        await pilot.press("r")
        await until(pilot, lambda: ("reload", "llama_model", None) in controller.calls)


async def test_no_failing_banner_while_every_model_serves() -> None:
    app = recorded_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        assert not app.screen.query_one(FailingBanner).display


async def test_a_toast_shows_brackets_verbatim() -> None:
    """A toast's text comes from outside (Triton's errors, model names): square brackets in it are text,
    not Textual markup (which swallowed "[bold]" and styled the rest, or raised on "[/]")."""
    error = "failed to load 'bert_model': expected [1, 3], got [bold][2, 3] [/]"
    controller = RecordedController(failures={("reload", "bert_model"): error})
    app = recorded_app("healthy", controller)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await replayed(pilot)
        await pilot.press("r")
        await until(pilot, lambda: any(error in text for text in toasts_shown(app)), what=f"a toast: {error}")
