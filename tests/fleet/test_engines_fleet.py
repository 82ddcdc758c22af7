"""The fleet screen with a vLLM stand-in (HTTP) and a MindIE stand-in (HTTPS, its own CA) attached: each
server's row names its engine, and each model's row carries running/waiting, TTFT/ITL, tokens/s and KV."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from tests.engine_standins import mindie_standin, vllm_standin
from tests.fleet.live_fleet import live_fleet_app
from tests.waiting import until
from triton_ge_console.console.screens.fleet import MODEL_COLUMNS
from triton_ge_console.fleet.models import FleetModelRow
from triton_ge_console.sessions.lifecycle import attach
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry

INTERVAL_S = 0.2


async def test_the_fleet_screen_shows_vllm_and_mindie_models(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    registry = Registry()
    with vllm_standin() as vllm, mindie_standin(tmp_path) as mindie:
        attach(vllm.url, "vl", registry, engine="vllm")
        attach(mindie.business.url, "mi", registry, engine="mindie", metrics_url=mindie.metrics_url,
               ca_file=mindie.ca)

        app, live = live_fleet_app(registry, INTERVAL_S)

        def models() -> dict[str, FleetModelRow]:
            return {row.name: row for row in app.fleet_models}

        try:
            async with app.run_test(size=(200, 45)) as pilot:
                await until(pilot, lambda: len(models()) == 2 and all(
                    row.tokens_per_s for row in models().values()), timeout=30, what="both models' rates")
                servers = {row.name: row for row in app.fleet_rows}
                assert (servers["vl"].server, servers["mi"].server) == ("vLLM", "MindIE")
                assert (servers["vl"].health, servers["mi"].health) == ("ready", "ready")
                qwen, llama = models()["qwen2.5-7b-instruct"], models()["llama3-8b"]
                assert (qwen.running, qwen.waiting, llama.running, llama.waiting) == (3, 2, 4, 1)
                assert qwen.worst_kv_share == pytest.approx(0.42)
                assert llama.worst_kv_share == pytest.approx(0.35)
                assert qwen.worst_ttft_p99_ms == pytest.approx(242.5)
                assert llama.worst_itl_p99_ms == pytest.approx(74.5833, rel=1e-4)
                await pilot.press("m")  # the models table
                table = app.screen.query_one("#fleet-models", DataTable)
                await until(pilot, lambda: table.row_count == 2, what="the models table")
                row = [str(cell) for cell in table.get_row("llama3-8b")]
                shown = dict(zip(MODEL_COLUMNS, row, strict=True))
                assert (shown["RUN/WAIT"], shown["KV"]) == ("4/1", "35%")
                assert shown["TTFT/ITL p99 ms"] == "246.2/74.6" and shown["TOK/S"] != "—"
        finally:
            live.close()
