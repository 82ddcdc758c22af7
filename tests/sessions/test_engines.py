"""`attach URL --engine vllm|mindie`: a vLLM stand-in (HTTP) and a MindIE stand-in (HTTPS, its own CA
given with --ca) join as watched sessions; status, ls and the model verbs say what they carry and refuse."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.engine_standins import (
    GENERATED_PER_SCRAPE,
    VLLM_ASCEND_METRICS,
    VLLM_METRICS,
    VLLM_METRICS_CURRENT,
    StandIn,
    mindie_standin,
    vllm_engine_dead,
    vllm_standin,
)
from triton_ge_console.cli import main

FAKES = Path(__file__).resolve().parents[1] / "fakes"


def _status(name: str, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    assert main(["status", name, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("recording", [VLLM_METRICS, VLLM_METRICS_CURRENT], ids=["0.10", "current"])
def test_a_vllm_server_attaches_and_status_shows_its_figures(recording: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    with vllm_standin(recording) as server:
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl"]) == 0
        assert "qwen2.5-7b-instruct" in capsys.readouterr().out
        data = _status("vl", capsys)
        assert (data["engine"], data["state"]) == ("vllm", "ready")
        assert data["metrics_url"] == f"{server.url}/metrics"
        [model] = data["models"]
        g = model["generation"]
        assert model["name"] == "qwen2.5-7b-instruct" and model["state"] == "READY"
        assert (g["running"], g["waiting"]) == (3, 2)
        assert g["ttft_p50_ms"] == pytest.approx(85.0) and g["ttft_p99_ms"] == pytest.approx(242.5)
        assert g["itl_p50_ms"] == pytest.approx(25.0) and g["itl_p99_ms"] == pytest.approx(72.5)
        assert g["kv_cache_share"] == pytest.approx(0.42)
        assert g["output_tokens_per_s"] > 0  # the counter moved GENERATED_PER_SCRAPE between the two polls
        assert g["output_tokens_per_s"] < GENERATED_PER_SCRAPE * 1000
        assert model["success_total"] >= 100 and model["failure_total"] is None
        capsys.readouterr()
        assert main(["status", "vl"]) == 0
        text = capsys.readouterr().out
        assert "(attached vllm)" in text and "running 3 waiting 2" in text and "KV 42%" in text
        assert main(["ls", "--json"]) == 0
        [row] = json.loads(capsys.readouterr().out)
        assert (row["name"], row["engine"], row["state"]) == ("vl", "vllm", "ready")


def test_a_vllm_ascend_with_ms_service_metric_shows_its_npu_memory(
        capsys: pytest.CaptureFixture[str]) -> None:
    """vllm-ascend's optional ms_service_metric adds NPU memory per worker (engine:memory:*): status --json
    carries it per data-parallel rank, the text says it in one line; a plain vLLM has none."""
    with vllm_standin(VLLM_ASCEND_METRICS) as server:
        assert main(["attach", server.url, "--engine", "vllm", "--name", "va"]) == 0
        data = _status("va", capsys)
        assert data["engine_memory"] == [{
            "dp": "0", "total_gib": 60.96, "utilization": 0.9, "reserved_gib": 54.86, "weights_gib": 15.24,
            "kv_cache_gib": 36.21, "non_torch_gib": 0.35, "activation_gib": 2.09, "graph_gib": 0.97}]
        assert data["models"][0]["generation"]["running"] == 3
        assert main(["status", "va"]) == 0
        text = capsys.readouterr().out
        assert ("NPU memory (vllm-ascend, dp 0): weights 15.24 GiB, KV cache 36.21 GiB, reserved 54.86 "
                "of 60.96 GiB (utilization 90%)") in text
    with vllm_standin() as plain:
        assert main(["attach", plain.url, "--engine", "vllm", "--name", "vl"]) == 0
        assert _status("vl", capsys)["engine_memory"] == []


def test_reload_on_an_engine_session_is_refused_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    with vllm_standin() as server:
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl"]) == 0
        capsys.readouterr()
        assert main(["reload", "qwen2.5-7b-instruct", "-s", "vl"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "ge-console: error:" in err
        assert "its API cannot load, unload or reload one" in err
        for verb in ("unload", "load"):
            assert main([verb, "qwen2.5-7b-instruct", "-s", "vl"]) == 1
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "its API cannot load, unload or reload one" in err, verb


def test_a_mindie_server_over_https_attaches_with_its_ca(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with mindie_standin(tmp_path) as mindie:
        assert main(["attach", mindie.business.url, "--engine", "mindie", "--name", "mi",
                     "--metrics-url", mindie.metrics_url, "--ca", str(mindie.ca)]) == 0
        data = _status("mi", capsys)
        assert data["engine"] == "mindie" and data["error"] is None and data["note"] is None
        [model] = data["models"]
        g = model["generation"]
        assert model["name"] == "llama3-8b"
        assert (g["running"], g["waiting"]) == (4, 1)
        assert g["ttft_p50_ms"] == pytest.approx(95.0) and g["kv_cache_share"] == pytest.approx(0.35)
        assert g["itl_p50_ms"] == pytest.approx(54.1667, rel=1e-4)
        assert g["output_tokens_per_s"] > 0
        assert (model["success_total"] >= 97, model["failure_total"]) == (True, 3)


def test_a_mindie_s_metrics_default_to_its_management_address_over_https(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --metrics-url, MindIE's own defaults (config_info.h: managementIpAddress 127.0.0.2,
    metricsPort 1027, httpsEnabled): nothing answers there here, which status says, naming it."""
    with mindie_standin(tmp_path) as mindie:
        assert main(["attach", mindie.business.url, "--engine", "mindie", "--name", "mi",
                     "--ca", str(mindie.ca)]) == 0
        data = _status("mi", capsys)
    assert data["metrics_url"] == "https://127.0.0.2:1027/metrics"
    assert data["state"] == "ready" and data["models"][0]["name"] == "llama3-8b"
    assert data["error"].startswith("https://127.0.0.2:1027/metrics: ")
    assert data["models"][0]["generation"] is None  # no figure invented


def test_a_mindie_server_without_its_ca_is_refused_in_one_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    with mindie_standin(tmp_path) as mindie:
        assert main(["attach", mindie.business.url, "--engine", "mindie", "--name", "mi",
                     "--metrics-url", mindie.metrics_url]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--ca FILE" in err


def test_a_mindie_with_monitoring_off_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with mindie_standin(tmp_path, monitoring=False) as mindie:
        assert main(["attach", mindie.business.url, "--engine", "mindie", "--name", "mi",
                     "--metrics-url", mindie.metrics_url, "--ca", str(mindie.ca)]) == 0
        data = _status("mi", capsys)
        assert data["state"] == "ready" and data["error"] is None  # it answers: not a failed poll
        assert "MindIE monitoring is off" in data["note"] and "MIES_SERVICE_MONITOR_MODE=1" in data["note"]
        [model] = data["models"]
        assert model["name"] == "llama3-8b" and model["generation"] is None  # nothing invented
        capsys.readouterr()
        assert main(["status", "mi"]) == 0
        assert "MIES_SERVICE_MONITOR_MODE=1" in capsys.readouterr().out


def test_an_engine_that_stopped_answering_reads_dead(capsys: pytest.CaptureFixture[str]) -> None:
    with vllm_standin() as server:
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl"]) == 0
    capsys.readouterr()
    assert main(["status", "vl", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["state"] == "dead"


def test_a_vllm_whose_engine_died_reads_dead_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 45: a vLLM whose engine died still answers on its port (/v1/models, /metrics), but its /health
    answers 503 (EngineDeadError; kept so with VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1). status and ls call it
    dead, never ready, naming the 503 and what vLLM means by it; attaching such a server is refused in one
    line that does not say nothing answers there."""
    with vllm_standin() as server:
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl"]) == 0
        server.routes["/health"] = vllm_engine_dead
        capsys.readouterr()
        assert main(["status", "vl", "--json"]) == 1
        data = json.loads(capsys.readouterr().out)
        assert (data["state"], data["models"]) == ("dead", [])
        assert data["error"] == (f"vLLM: {server.url}/health: HTTP 503 (not healthy: vLLM answers 503 once "
                                 f"its engine has died)")
        assert main(["status", "vl"]) == 1
        text = capsys.readouterr().out
        assert "(attached vllm): dead" in text and "engine has died" in text
        assert main(["ls", "--json"]) == 0
        [row] = json.loads(capsys.readouterr().out)
        assert row["state"] == "dead"
    with vllm_standin(engine_dead=True) as dead:
        assert main(["attach", dead.url, "--engine", "vllm", "--name", "dead"]) == 1
        err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HTTP 503" in err and "engine has died" in err
    assert "answers there" not in err and f"{dead.url}: no healthy vLLM server there" in err


def test_a_rolling_reload_leaves_an_engine_out_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    from triton_ge_console.fleet.rolling import rolling_reload
    from triton_ge_console.sessions.server.registry import Registry

    with vllm_standin() as server:
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl"]) == 0
        said: list[str] = []
        result = rolling_reload([Registry().load("vl")], "qwen2.5-7b-instruct", said.append)
    assert result.servers == [] and result.ok
    [line] = said
    assert line.startswith("vl: left out: vLLM serves the model it was started with")


def test_a_vllm_with_an_api_key_takes_the_token_from_the_environment(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with vllm_standin(api_key="sk-local") as server:
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "HTTP 401" in err and "Unauthorized" in err
        monkeypatch.delenv("VLLM_KEY", raising=False)
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl",
                     "--token-env", "VLLM_KEY"]) == 1
        assert capsys.readouterr().err == "ge-console: error: --token-env VLLM_KEY: the variable is not set\n"
        monkeypatch.setenv("VLLM_KEY", "sk-local")
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl",
                     "--token-env", "VLLM_KEY"]) == 0
        assert _status("vl", capsys)["models"][0]["name"] == "qwen2.5-7b-instruct"


def test_a_vllm_on_this_host_has_its_npus_read_by_npu_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither engine reports NPU utilization: npu-smi on the host does (here the replayed fake)."""
    from tests.waiting import wait_until
    from triton_ge_console.sessions.live import LiveSource
    from triton_ge_console.sessions.server.registry import Registry

    monkeypatch.setenv("PATH", f"{FAKES}:{os.environ['PATH']}")
    with vllm_standin() as server:
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl"]) == 0
        source = LiveSource.from_record(Registry().load("vl"))
        try:
            snapshot = wait_until(lambda: (s := source.poll()).devices and s, timeout=30,
                                  what="npu-smi's NPUs")
        finally:
            source.close()
    assert all(d.source == "npu-smi" for d in snapshot.devices)
    assert any(d.utilization is not None for d in snapshot.devices)
    assert snapshot.models[0].generation is not None  # and the engine's own figures beside them


def test_bench_and_probe_send_a_keyed_vllm_its_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The headers every caller takes from the session (bench's endpoint, a rolling reload's probe) carry
    vLLM's key as `Authorization: Bearer KEY`, as the console's own poller does."""
    from urllib.request import Request, urlopen

    from triton_ge_console.sessions.loadgen.bench_shared import resolve_endpoint
    from triton_ge_console.sessions.server.access import token_headers
    from triton_ge_console.sessions.server.registry import Registry

    with vllm_standin(api_key="sk-local") as server:
        monkeypatch.setenv("VLLM_KEY", "sk-local")
        assert main(["attach", server.url, "--engine", "vllm", "--name", "vl",
                     "--token-env", "VLLM_KEY"]) == 0
        address, bench_headers = resolve_endpoint("vl", None, "http")
        probe_headers = token_headers(Registry().load("vl"))
        assert bench_headers == probe_headers == {"Authorization": "Bearer sk-local"}
        with urlopen(Request(f"{address}/v1/models", headers=bench_headers), timeout=5) as reply:
            assert reply.status == 200


def test_attaching_a_triton_as_vllm_says_nothing_answers_vllms_health_and_that_it_looks_like_triton(
        tmp_path: Path, triton_factory: Any, python_backends: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A real tritonserver has no /health (its HTTP API is KServe v2's: /v2/health/live, /v2/health/ready,
    /v2 for its metadata, which names it "triton": triton-inference-server/server src/http_server.cc).
    `attach --engine vllm` there said "HTTP 404 (not healthy)", which reads as a vLLM that is sick; it says
    in one line that nothing there answers vLLM's /health, and that it looks like a Triton server."""
    (tmp_path / "repo").mkdir()
    server = triton_factory(tmp_path / "repo", python_backends)
    assert main(["attach", server.http_url, "--engine", "vllm", "--name", "tr"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not healthy" not in err, err
    assert f"nothing at {server.http_url} answers vLLM's /health (HTTP 404)" in err, err
    assert "it looks like a Triton server" in err and "attach it without --engine" in err, err


def test_attaching_something_else_as_vllm_says_nothing_answers_vllms_health(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A server answering 404 to everything (neither vLLM nor Triton): the same words, and no guess."""
    other = StandIn({})
    try:
        assert main(["attach", other.url, "--engine", "vllm", "--name", "x"]) == 1
    finally:
        other.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not healthy" not in err and "Triton" not in err, err
    assert f"nothing at {other.url} answers vLLM's /health (HTTP 404)" in err, err
