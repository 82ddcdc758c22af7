"""`ge-console grafana`: every panel's query names a metric a live server (or npu-exporter) exposes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine_standins import (
    MINDIE_METRICS,
    VLLM_ASCEND_METRICS,
    VLLM_METRICS,
    VLLM_METRICS_CURRENT,
    VLLM_METRICS_GPU_CACHE,
)
from triton_ge_console.cli import main
from triton_ge_console.sessions.observe.grafana import METRIC_NAME, dashboard, queried_metrics
from triton_ge_console.sessions.observe.metrics import parse_metrics, scrape_metrics
from triton_ge_console.sessions.observe.stats import HttpEndpoint
from triton_ge_console.sessions.server.registry import Registry

pytestmark = pytest.mark.timeout(300)

ENGINE_TITLES = {"vllm": "vLLM: ", "mindie": "MindIE: "}
ASCEND_MEMORY = "vLLM: NPU memory per worker (vllm-ascend with MS Service Metric)"  # only such a server's
EXPORTER_PAGE = Path(__file__).resolve().parents[2] / "data" / "telemetry" / "npu_exporter_910a.txt"
SPEC = """\
name: graf
server:
  metrics: {interval_ms: 500, summary_latencies: true}
models:
  - name: bert_model
    backend: ge
    source: demo:bert
    max_batch_size: 4
    dynamic_batching: {}
  - name: llama_generate
    backend: ge
    source: demo:llama_kv
    generate: {max_tokens: 8}
"""


def _recorded(*recordings: Path) -> frozenset[str]:
    """Every sample name of recorded /metrics texts."""
    return frozenset().union(*(parse_metrics(r.read_text(encoding="utf-8")).names() for r in recordings))


@pytest.mark.parametrize(("engine", "recordings"), [
    ("vllm", (VLLM_METRICS_CURRENT, VLLM_METRICS, VLLM_METRICS_GPU_CACHE)), ("mindie", (MINDIE_METRICS,))])
def test_every_engine_panel_reads_what_the_engine_exposes(engine: str, recordings: tuple[Path, ...]) -> None:
    """Every query of a panel reads a name some recording carries, and every panel has a series under
    each release's names: a current vLLM (ITL only as vllm:inter_token_latency_seconds), 0.9-0.11 (both
    ITL names), before 0.9 (KV only as vllm:gpu_cache_usage_perc)."""
    wanted = {title: names for title, names in queried_metrics(dashboard()).items()
              if title.startswith(ENGINE_TITLES[engine]) and title != ASCEND_MEMORY}
    assert len(wanted) == 6 and all(wanted.values()), wanted
    every = _recorded(*recordings)
    assert {title: names - every for title, names in wanted.items() if names - every} == {}
    for recording in recordings:  # each release: every query of every panel draws a series
        exposed = _recorded(recording)
        blank = [(title, expr) for title, expr in _engine_queries(engine)
                 if title != ASCEND_MEMORY and not _names_in(expr) & exposed]
        assert blank == [], recording.name


def test_vllm_ascend_s_npu_memory_has_its_panel() -> None:
    """MS Service Metric's engine:memory:* gauges (no model_name: per dp rank): every query of their panel
    reads a name a vllm-ascend server with it exposes, in GiB."""
    [panel] = [p for p in dashboard()["panels"] if p.get("title") == ASCEND_MEMORY]
    exposed = _recorded(VLLM_ASCEND_METRICS)
    reads = [_names_in(target["expr"]) for target in panel["targets"]]
    assert len(reads) == 4 and all(names and names <= exposed for names in reads), reads
    assert panel["fieldConfig"]["defaults"]["unit"] == "gbytes"  # Grafana's GiB


def _engine_queries(engine: str) -> list[tuple[str, str]]:
    """(panel title, query) of every query of an engine's panels."""
    return [(panel["title"], target["expr"]) for panel in dashboard()["panels"]
            if panel["type"] != "row" and panel["title"].startswith(ENGINE_TITLES[engine])
            for target in panel["targets"]]


def _names_in(expr: str) -> set[str]:
    """The metric names a query reads."""
    return set(METRIC_NAME.findall(expr))


@pytest.mark.server
def test_every_panel_reads_metrics_a_live_server_exposes(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "dashboard.json"
    assert main(["grafana", "-o", str(target)]) == 0
    board = json.loads(target.read_text(encoding="utf-8"))
    spec = tmp_path / "deploy.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    assert main(["up", str(spec), "--name", "graf", "--timeout", "180"]) == 0
    record = Registry().load("graf")
    assert record.metrics_url is not None
    assert main(["bench", "bert_model", "--session", "graf", "--concurrency", "2", "--warmup-ms", "0",
                 "--window-ms", "300", "--max-windows", "3", "--shape", "input_ids:8",
                 "--shape", "attention_mask:8", "--quiet", "--json"]) == 0
    assert main(["bench", "llama_generate", "--generate", "--session", "graf", "--prompt-tokens", "4",
                 "--output-tokens", "8", "--requests", "2", "--quiet", "--json"]) == 0
    served = scrape_metrics(HttpEndpoint(record.metrics_url)).names()
    # no npu-exporter runs here: its metrics are checked against a recorded answer of one (see its SOURCES.md)
    exporter = parse_metrics(EXPORTER_PAGE.read_text(encoding="utf-8")).names()
    wanted = queried_metrics(board)
    assert len(wanted) >= 12 and all(wanted.values()), wanted
    known = served | exporter | _recorded(  # the engines': their recordings
        VLLM_METRICS, VLLM_METRICS_CURRENT, VLLM_ASCEND_METRICS, MINDIE_METRICS)
    assert {title: names - known for title, names in wanted.items() if names - known} == {}
    from_exporter = {title for title, names in wanted.items() if names <= exporter}
    assert from_exporter == {title for title in wanted if "npu-exporter" in title}
    assert main(["down", "graf"]) == 0
    capsys.readouterr()


def test_grafana_writes_to_stdout_and_names_an_unwritable_file(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grafana", "--title", "Prod NPUs"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "Prod NPUs"
    assert main(["grafana", "-o", str(tmp_path / "missing" / "d.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ge-console: error: cannot write ") and err.count("\n") == 1
