"""The notebooks' dashboard over an attached vLLM server (a stand-in serving a recording of its /metrics):
its model with its token figures, and no model command offered, with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine_standins import VLLM_ASCEND_METRICS, mindie_standin, vllm_standin
from triton_ge_console.sessions.lifecycle import attach
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry
from triton_ge_console.widgets import Dashboard

MODEL = "qwen2.5-7b-instruct"


def test_the_dashboard_shows_a_vllm_model_with_commands_off(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    with vllm_standin() as server:
        record = attach(server.url, "vl", Registry(), engine="vllm")
        board = Dashboard(LiveSource.from_record(record, npu_smi=None), autostart=False, background=False)
        try:
            board.refresh()
            board.refresh()  # two readings: tokens/s from the counter's delta
            state = board.state()
        finally:
            board.close()
    assert "vLLM" in board.header.value and "Triton" not in board.header.value
    row = state["generation"][MODEL]
    assert (row["RUNNING"], row["WAITING"], row["KV"]) == ("3", "2", "42%")
    assert (row["TTFT p50 ms"], row["ITL p50 ms"]) == ("85.00", "25.00")
    assert row["OUT TOK/S"] != "—"
    assert state["buttons"][f"{MODEL}:"] == []
    assert "its API cannot load, unload or reload one" in board.models.reasons.value


def test_the_dashboard_shows_a_mindie_model_over_https_with_commands_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    with mindie_standin(tmp_path) as mindie:
        record = attach(mindie.business.url, "mi", Registry(), engine="mindie",
                        metrics_url=mindie.metrics_url, ca_file=mindie.ca)
        board = Dashboard(LiveSource.from_record(record, npu_smi=None), autostart=False, background=False)
        try:
            board.refresh()
            board.refresh()
            state = board.state()
        finally:
            board.close()
    assert "MindIE" in board.header.value
    row = state["generation"]["llama3-8b"]
    assert (row["RUNNING"], row["WAITING"], row["KV"]) == ("4", "1", "35%")
    assert (row["TTFT p50 ms"], row["ITL p50 ms"]) == ("95.00", "54.17")
    assert row["OUT TOK/S"] != "—"
    assert state["buttons"]["llama3-8b:"] == []
    assert "MindIE Server serves the models of its config.json" in board.models.reasons.value


def test_the_dashboard_shows_vllm_ascend_s_npu_memory_under_its_header(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm-ascend with MS Service Metric on: each worker's NPU memory under the header, as status says it;
    a plain vLLM's header has no such line."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    headers = {}
    for name, recording in (("va", VLLM_ASCEND_METRICS), ("vl", None)):
        with (vllm_standin(recording) if recording else vllm_standin()) as server:
            record = attach(server.url, name, Registry(), engine="vllm")
            board = Dashboard(LiveSource.from_record(record, npu_smi=None), autostart=False, background=False)
            try:
                board.refresh()
                headers[name] = board.header.value
            finally:
                board.close()
    assert ("NPU memory (vllm-ascend, dp 0): weights 15.24 GiB, KV cache 36.21 GiB, reserved 54.86 of "
            "60.96 GiB (utilization 90%)") in headers["va"]
    assert "NPU memory" not in headers["vl"]


def test_the_dashboard_says_when_mindie_s_monitoring_is_off(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    with mindie_standin(tmp_path, monitoring=False) as mindie:
        record = attach(mindie.business.url, "mi", Registry(), engine="mindie",
                        metrics_url=mindie.metrics_url, ca_file=mindie.ca)
        board = Dashboard(LiveSource.from_record(record, npu_smi=None), autostart=False, background=False)
        try:
            board.refresh()
            state, header = board.state(), board.header.value
        finally:
            board.close()
    assert "MIES_SERVICE_MONITOR_MODE=1" in header and "firebrick" not in header  # a note, not a failure
    assert not state["stale"] and list(state["models"]) == ["llama3-8b:"]
    assert state["generation"] == {}  # no figure invented
