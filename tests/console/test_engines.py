"""The console on an attached vLLM server (a stand-in serving a recording of vLLM's /metrics): its model
with running/waiting, TTFT/ITL, tokens/s and KV use; reload is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine_standins import VLLM_ASCEND_METRICS, mindie_standin, vllm_standin
from tests.waiting import until
from triton_ge_console.console.app import create_app
from triton_ge_console.console.launch_session import open_record
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.widgets.header import StatusHeader
from triton_ge_console.console.widgets.models import ModelsTable
from triton_ge_console.sessions.lifecycle import attach
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry

from .conftest import SIZE
from .notices import notified

MODEL = "qwen2.5-7b-instruct"


def _rates_known(app, name: str = MODEL) -> bool:  # type: ignore[no-untyped-def]
    """Two polls taken: the model's tokens/s known."""
    snapshot = app.connection.last_good
    model = snapshot.model(name) if snapshot is not None else None
    return model is not None and model.generation is not None and model.generation.output_tokens_per_s


async def test_the_console_shows_a_vllm_model_and_refuses_to_reload_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    registry = Registry()
    with vllm_standin() as server:
        record = attach(server.url, "vl", registry, engine="vllm")
        opened = open_record(record, registry, 0.2)
        app = create_app(opened.source, options=opened.options)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen) and _rates_known(app),
                        what="two polls of the vLLM stand-in")
            table = app.screen.query_one(ModelsTable)
            assert table.row_keys == [f"{MODEL}/"]
            await until(pilot, lambda: app.selected_model == MODEL, what="the model selected")
            info = str(app.screen.query_one("#detail-info").render())
            assert "running 3 waiting 2" in info and "KV 42%" in info
            assert "TTFT p50 85.00" in info and "ITL p50 25.00" in info
            assert "out (" in info and "(—/s)" not in info  # tokens/s from the counter's delta
            await pilot.press("r")
            await until(pilot, lambda: notified(app, "reload disabled"), what="the refusal")
            [notice] = notified(app, "reload disabled")
            assert "its API cannot load, unload or reload one" in notice.message
            assert notice.severity == "warning"
            await pilot.press("u")  # unload asks no confirmation for a command that is off: it says why
            await until(pilot, lambda: notified(app, "unload disabled"), what="the unload refusal")
            assert isinstance(app.screen, DashboardScreen)
            await pilot.press("l")
            await until(pilot, lambda: notified(app, "load disabled"), what="the load refusal")
            assert isinstance(app.screen, DashboardScreen)


async def test_the_console_header_shows_vllm_ascend_s_npu_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm-ascend with MS Service Metric on: its workers' NPU memory in the header, per DP rank."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    registry = Registry()
    with vllm_standin(VLLM_ASCEND_METRICS) as server:
        record = attach(server.url, "va", registry, engine="vllm")
        opened = open_record(record, registry, 0.2)
        app = create_app(opened.source, options=opened.options)
        async with app.run_test(size=(200, 40)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen) and _rates_known(app),
                        what="two polls of the vllm-ascend stand-in")
            header = str(app.screen.query_one(StatusHeader).render())
    assert "NPU dp0: weights 15.24 + KV 36.21 of 60.96 GiB" in header


async def test_the_console_shows_a_mindie_model_over_https_with_its_figures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    registry = Registry()
    with mindie_standin(tmp_path) as mindie:
        record = attach(mindie.business.url, "mi", registry, engine="mindie", metrics_url=mindie.metrics_url,
                        ca_file=mindie.ca)
        opened = open_record(record, registry, 0.2)
        app = create_app(opened.source, options=opened.options)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen)
                        and _rates_known(app, "llama3-8b"), what="two polls of the MindIE stand-in")
            assert app.screen.query_one(ModelsTable).row_keys == ["llama3-8b/"]
            await until(pilot, lambda: app.selected_model == "llama3-8b", what="the model selected")
            info = str(app.screen.query_one("#detail-info").render())
            assert "running 4 waiting 1" in info and "KV 35%" in info
            assert "TTFT p50 95.00" in info and "ITL p50 54.17" in info
            assert "out (" in info and "(—/s)" not in info
            await pilot.press("r")
            await until(pilot, lambda: notified(app, "reload disabled"), what="the refusal")
            [notice] = notified(app, "reload disabled")
            assert "MindIE Server serves the models of its config.json" in notice.message


async def test_the_console_says_plainly_when_mindie_s_monitoring_is_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    registry = Registry()
    with mindie_standin(tmp_path, monitoring=False) as mindie:
        record = attach(mindie.business.url, "mi", registry, engine="mindie", metrics_url=mindie.metrics_url,
                        ca_file=mindie.ca)
        opened = open_record(record, registry, 0.2)
        app = create_app(opened.source, options=opened.options)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: notified(app, "no figures from this server"), what="the note")
            [notice] = notified(app, "no figures from this server")
            assert "MIES_SERVICE_MONITOR_MODE=1" in notice.message
            assert not app.connection.stale  # it answers: its model shows, figures —
            assert app.screen.query_one(ModelsTable).row_keys == ["llama3-8b/"]
