"""The fleet screen over a recorded fleet: rows, models across servers, Enter/Esc, rolling reload."""

from __future__ import annotations

from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import DataTable

from tests.waiting import until
from triton_ge_console.console.fleet_app import FleetConsoleApp
from triton_ge_console.console.options import FleetOptions
from triton_ge_console.console.screens.confirm import ConfirmScreen
from triton_ge_console.console.screens.fleet import MODEL_COLUMNS, FleetScreen, MemberDashboard
from triton_ge_console.console.screens.help import HelpScreen
from triton_ge_console.sessions.observe.recorded import RecordedController

from .recorded_fleet import POLLS, recorded_fleet, recorded_options

SIZE = (160, 45)


def fleet_app(failures: dict[str, dict[tuple[str, str], str]] | None = None) -> FleetConsoleApp:
    """The app over the recorded fleet, replaying each recording to its end, fast."""
    return FleetConsoleApp(recorded_fleet(failures), recorded_options,
                           FleetOptions(interval_s=0.01, backoff_s=0.01, max_polls=POLLS))


async def replayed(pilot: Pilot[None]) -> None:
    """Every member took all its polls."""
    app = pilot.app
    assert isinstance(app, FleetConsoleApp)
    await until(pilot, lambda: all(n >= POLLS for n in app.member_polls.values()), what="every poll")
    await pilot.pause()


def _controller(app: FleetConsoleApp, name: str) -> RecordedController:
    controller = next(m for m in app.fleet.members if m.name == name).source.controller
    assert isinstance(controller, RecordedController)
    return controller


async def test_rows_per_server() -> None:
    app = fleet_app()
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        rows = {row.name: row for row in app.fleet_rows}
        assert list(rows) == ["alpha", "beta", "gamma", "delta"]
        alpha, beta, delta = rows["alpha"], rows["beta"], rows["delta"]
        assert (alpha.health, alpha.version) == ("ready", "2.51.0")
        assert (alpha.models_ready, alpha.models_failing, alpha.models_total) == (2, 0, 2)
        assert alpha.requests_per_s is not None and alpha.requests_per_s > 0
        assert alpha.npu_util_max is not None and alpha.npu_util_mean is not None
        assert alpha.npu_util_max > alpha.npu_util_mean
        assert beta.models_failing == 1  # READY in Triton's index, yet not serving
        assert delta.health == "unreachable" and delta.requests_per_s is None
        table = app.screen.query_one("#fleet-servers", DataTable)
        assert table.row_count == 4
        assert str(table.get_row("delta")[2]) == "unreachable"


async def test_models_across_servers() -> None:
    app = fleet_app()
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("m")
        screen = app.screen
        assert isinstance(screen, FleetScreen) and screen.view == "models"
        models = {row.name: row for row in app.fleet_models}
        llama, bert = models["llama_model"], models["bert_model"]
        assert (llama.replicas, llama.servers) == (2, 3)  # beta's is FAILING; delta answers nothing
        assert llama.versions_differ
        assert dict(llama.versions) == {"alpha": ("1",), "beta": (), "gamma": ("2",)}
        assert (bert.replicas, bert.servers, bert.versions_differ) == (3, 3, False)
        table = screen.query_one("#fleet-models", DataTable)
        assert "v1: alpha" in str(table.get_row("llama_model")[MODEL_COLUMNS.index("VERSIONS")])
        assert "v2: gamma" in str(table.get_row("llama_model")[MODEL_COLUMNS.index("VERSIONS")])


async def test_enter_opens_a_server_and_esc_returns() -> None:
    app = fleet_app()
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("down", "enter")  # beta
        await until(pilot, lambda: isinstance(app.screen, MemberDashboard), what="beta's dashboard")
        assert app.current == "beta" and app.source.name == "beta"
        assert app.connection.session == "beta" and app.connection.last_good is not None
        await pilot.press("down", "u")  # a server action acts on the open server (after asking)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: _controller(app, "beta").calls != [], what="beta's unload")
        assert _controller(app, "beta").calls[0][0] == "unload"
        assert _controller(app, "alpha").calls == []
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), what="back on the fleet")
        assert app.current is None


async def test_server_keys_do_nothing_on_the_fleet_screen() -> None:
    app = fleet_app()
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("u", "l", "t")
        await pilot.pause(0.1)
        assert isinstance(app.screen, FleetScreen)
        assert all(_controller(app, m.name).calls == [] for m in app.fleet.members)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert app.screen.registry == FleetScreen.REGISTRY


async def test_rolling_reload_stops_at_the_first_failure() -> None:
    app = fleet_app({"beta": {("reload", "llama_model"): "failed to load 'llama_model': bad config"}})
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("r")  # in the servers view there is no model to roll
        await pilot.pause(0.1)
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("m", "down")  # models by name: bert_model, llama_model
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("y")
        await until(pilot, lambda: app.last_roll is not None, what="the roll's end")
        result = app.last_roll
        assert result is not None and result.model == "llama_model" and not result.ok
        outcomes = {s.session: s.outcome for s in result.servers}
        assert outcomes["alpha"] == "reloaded" and outcomes["beta"] == "failed"
        assert outcomes["gamma"] == "untouched"
        assert _controller(app, "gamma").calls == []
        assert _controller(app, "alpha").calls == [("reload", "llama_model", None)]
        assert "stopped at the first failure" in str(app.screen.query_one("#fleet-roll").render())


async def test_palette_offers_the_fleet_actions_on_the_fleet_screen() -> None:
    app = fleet_app()
    async with app.run_test(size=SIZE) as pilot:
        await replayed(pilot)
        await pilot.press("m", "down", "ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"rolling")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the roll's question")
        assert "llama_model on 4 servers" in str(app.screen.query_one("#confirm-target").render())
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        assert app.last_roll is None
